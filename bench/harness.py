"""Shared machinery of the peer benchmarks (``python -m bench producer``, ``... consumer``).

Role: everything a "kpax vs peer clients on the same broker, in one run"
benchmark needs besides the peers' own code: a broker, fresh topics, running
each peer in its own subprocess with a timeout, collecting one result dict per
run, and rendering the Markdown table and PNG bar chart into bench/results/.

Stable API (the consumer benchmark reuses it)::

    from bench import harness as h

    with h.broker() as bootstrap:                     # KPAX_TEST_BOOTSTRAP, else a local broker
        topic = h.make_topic(bootstrap, partitions=6)   # fresh random topic, every partition served
        h.delete_topic(bootstrap, topic)                # at the end (best effort)
        res = h.run_peer(
            [sys.executable, "-m", "bench.producer", "--peer", "kafka-python", ...],
            peer="kafka-python", scenario="1p acks=1 none", records=N, timeout=300,
        )                                               # -> Result dict (never raises)
    md = h.render_table(results, baseline="kpax sync", peers=[...], scenarios=[...])
    h.write_results("producer", md, results, title="...")  # bench/results/producer.{md,png,json}
    h.save_partial("producer", results); h.load_partial("producer")  # survive a crash: --resume

    # inside a peer subprocess, after timing its work:
    h.emit(records=n, nbytes=n * size, seconds=elapsed)   # prints the RESULT line
    h.java_classpath()                                   # -cp for org.apache.kafka.tools.*

    h.franz_binary()            # bench/franz/franz-bench (built with go if needed): franz-go peer
    h.select_peers("kpax-sync,aiokafka", PEERS)          # --peers, spelled loosely
    h.percentile(samples, 99)                            # nearest-rank percentile
    h.compile_sources()         # byte-compile kpax and bench, as `pip install` does

A :data:`Result` is a plain dict: ``peer``, ``scenario``, ``records``, ``bytes``,
``seconds``, ``records_per_s``, ``mb_per_s`` (MB = 10**6 bytes of record
values) and ``error`` (None, or why the run failed: exit status, timeout,
missing library; the last lines of the peer's stderr are kept). A failed peer
is reported in the table as "failed", it never aborts the whole benchmark.
``KPAX_BENCH_RESULTS=dir`` writes the results there instead of bench/results/
(for trial runs that should not replace the recorded figures).

A peer subprocess reports by printing one line ``RESULT {json}`` on stdout
(:func:`emit`); anything else it prints is ignored (stderr is kept for errors).
Java peers (``ProducerPerformance``) print their own summary; the caller
parses it and builds the Result with :func:`make_result`.

Imports: kpax (Admin, testing), the standard library; matplotlib lazily (only
in :func:`render_chart`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(
    os.environ.get("KPAX_BENCH_RESULTS") or Path(__file__).resolve().parent / "results"
)
JAVA_DIR = Path(__file__).resolve().parent / "java"
FRANZ_DIR = Path(__file__).resolve().parent / "franz"

Result = dict[str, Any]

__all__ = [
    "RESULTS_DIR",
    "Result",
    "broker",
    "delete_topic",
    "emit",
    "franz_binary",
    "java_classpath",
    "make_result",
    "make_topic",
    "percentile",
    "render_chart",
    "render_table",
    "run_peer",
    "load_partial",
    "save_partial",
    "select_peers",
    "write_results",
]


# ------------------------------------------------------------------ broker and topics


#: The benchmark broker's JVM flags: Kafka's own defaults (kafka-server-start.sh's
#: heap and KAFKA_JVM_PERFORMANCE_OPTS), not kpax.testing's quick-start flags (C1
#: only, serial GC, 512 MiB), which are made for tests that start many brokers.
BROKER_JVM_OPTS = [
    "-Xms1g",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]


def compile_sources() -> None:
    """Byte-compile kpax and bench, as ``pip install`` does for an installed package.

    A benchmark whose timed part starts Python processes (the ``kpax`` command, the
    Python workers Spark starts) must not pay for compiling kpax's sources in each of
    them: that happens when the environment sets ``PYTHONDONTWRITEBYTECODE`` (as this
    repository's development shells may) over an editable install, which never
    writes ``__pycache__``; compileall writes it whatever that variable says.
    """
    root = Path(__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(root / "kpax"), str(root / "bench")],
        check=False,
        stdout=subprocess.DEVNULL,
    )


def _broker_dir() -> str | None:
    """Where the benchmark broker keeps its logs: ``KPAX_BENCH_BROKER_DIR``, else a
    directory in /dev/shm where there is one (a RAM disk). On this project's
    virtual machine a disk-backed broker spent most of a 1,000-partition run
    in page faults on fresh index files (the first entry of each partition's
    offset and time index: a thread dump showed the request handlers in
    ``TimeIndex.maybeAppend``), so clients' figures swung 2k-90k records/s
    between rounds; the benchmark measures clients, and every peer gets the same broker."""
    chosen = os.environ.get("KPAX_BENCH_BROKER_DIR")
    if chosen:
        return chosen
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return None


@contextlib.contextmanager
def broker(config: dict[str, str] | None = None) -> Iterator[str]:
    """Yield a bootstrap address: ``KPAX_TEST_BOOTSTRAP`` if set, else one local
    broker (stopped on exit): with :data:`BROKER_JVM_OPTS`, its logs in
    :func:`_broker_dir`, where the local backend is used
    (:func:`kpax.testing.start_kafka` otherwise)."""
    existing = os.environ.get("KPAX_TEST_BOOTSTRAP")
    if existing:
        yield existing
        return
    from kpax.testing import start_kafka
    from kpax.testing.backends import select_backend
    from kpax.testing.local import LocalCluster

    cluster: Any
    workdir: str | None = None
    if select_backend() == "local":
        base = _broker_dir()
        if base:
            workdir = tempfile.mkdtemp(prefix="kpax-bench-broker-", dir=base)
        cluster = LocalCluster(1, config=config, workdir=workdir, jvm_opts=BROKER_JVM_OPTS)
        cluster.start()
    else:
        cluster = start_kafka(brokers=1, config=config)
    try:
        yield cluster.bootstrap
    finally:
        cluster.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def make_topic(
    bootstrap: str,
    partitions: int = 1,
    *,
    prefix: str = "bench",
    config: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> str:
    """Create a fresh topic (random name) and wait until every partition has a leader
    that serves it: a ListOffsets of every partition answered without error (the
    metadata names a leader before the broker has loaded the partition, and
    until then it answers NOT_LEADER_OR_FOLLOWER: with 1,000 partitions that
    took ~10 s on a busy machine, time a producer would spend retrying)."""
    import kpax

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with kpax.Admin(bootstrap) as admin:
        admin.create_topics(
            [kpax.NewTopic(name, partitions, 1, configs=config or {})], timeout=timeout
        ).raise_for_errors()
        deadline = time.monotonic() + timeout
        while True:
            desc = admin.describe_topics([name]).succeeded.get(name)  # not yet: retry
            if (
                desc is not None
                and len(desc.partitions) == partitions
                and all(p.leader >= 0 for p in desc.partitions)
            ):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has no leader for every partition")
            time.sleep(0.1)
        left = max(deadline - time.monotonic(), 1.0)
        specs = {kpax.TopicPartition(name, p): "latest" for p in range(partitions)}
        admin.list_offsets(specs, timeout=left).raise_for_errors()  # (retried until served)
        return name


def warm_topic(bootstrap: str, name: str, partitions: int, timeout: float = 120.0) -> None:
    """Write one record to every partition of ``name`` (acks=all) and wait for them: the
    broker's first writes to a fresh partition (its segment and index files; on this
    project's machines up to seconds for a request to 1,000 fresh partitions) are then
    out of the timed run, as for a topic in use."""
    import kpax

    with kpax.Producer(bootstrap, acks="all", linger_ms=5) as producer:
        futures = [producer.send(name, b"warm", partition=p) for p in range(partitions)]
        producer.flush(timeout)
        for future in futures:
            future.result(0)


def delete_topic(bootstrap: str, name: str) -> None:
    """Delete a benchmark's topic (best effort: a failure is only printed), so that runs
    against a shared broker do not leave their records behind."""
    import kpax

    try:
        with kpax.Admin(bootstrap) as admin:
            admin.delete_topics([name], timeout=30).raise_for_errors()
    except Exception as exc:
        print(f"could not delete topic {name}: {exc}", file=sys.stderr)


# ------------------------------------------------------------------ peers


def make_result(
    peer: str,
    scenario: str,
    *,
    records: int = 0,
    nbytes: int = 0,
    seconds: float = 0.0,
    error: str | None = None,
    **extra: Any,
) -> Result:
    """A :data:`Result` dict (rates computed here)."""
    ok = error is None and seconds > 0
    return {
        "peer": peer,
        "scenario": scenario,
        "records": records,
        "bytes": nbytes,
        "seconds": round(seconds, 4),
        "records_per_s": records / seconds if ok else None,
        "mb_per_s": nbytes / seconds / 1e6 if ok else None,
        "error": error,
        **extra,
    }


def emit(*, records: int, nbytes: int, seconds: float, **extra: Any) -> None:
    """In a peer subprocess: report the measurement (one ``RESULT {json}`` line)."""
    payload = {"records": records, "bytes": nbytes, "seconds": seconds, **extra}
    sys.stdout.write("RESULT " + json.dumps(payload) + "\n")
    sys.stdout.flush()


def _tail(text: str, n: int = 6) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])


def run_peer(
    argv: Sequence[str],
    *,
    peer: str,
    scenario: str,
    records: int,
    timeout: float = 600.0,
    env: dict[str, str] | None = None,
    parse: Any = None,
) -> Result:
    """Run one peer in its own subprocess and return its :data:`Result`.

    The subprocess prints ``RESULT {json}`` (see :func:`emit`), or ``parse``
    (a function ``stdout -> dict(records=, bytes=, seconds=)``) extracts the
    numbers from its output (Java tools). Never raises: a crash, a timeout or
    a missing RESULT line becomes ``error``.
    """
    full_env = {**os.environ, **(env or {})}
    root = str(Path(__file__).resolve().parent.parent)
    full_env["PYTHONPATH"] = root + os.pathsep + full_env.get("PYTHONPATH", "")
    started = time.monotonic()
    try:
        proc = subprocess.run(
            list(argv),
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            cwd=root,
        )
    except subprocess.TimeoutExpired:
        return make_result(peer, scenario, records=records, error=f"timed out after {timeout:g}s")
    except OSError as exc:
        return make_result(peer, scenario, records=records, error=f"could not start: {exc}")
    wall = time.monotonic() - started
    if proc.returncode != 0:
        return make_result(
            peer,
            scenario,
            records=records,
            error=f"exit {proc.returncode}: {_tail(proc.stderr or proc.stdout)}",
        )
    data: dict[str, Any] | None = None
    if parse is not None:
        try:
            data = parse(proc.stdout)
        except Exception as exc:  # any parse failure is a failed run
            data = None
            err = f"could not parse output ({exc}): {_tail(proc.stdout)}"
            return make_result(peer, scenario, records=records, error=err)
    else:
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                data = json.loads(line[7:])
    if data is None:
        return make_result(
            peer, scenario, records=records, error=f"no RESULT line: {_tail(proc.stderr)}"
        )
    extra = {k: v for k, v in data.items() if k not in ("records", "bytes", "seconds")}
    return make_result(
        peer,
        scenario,
        records=int(data["records"]),
        nbytes=int(data["bytes"]),
        seconds=float(data["seconds"]),
        wall_seconds=round(wall, 2),
        **extra,
    )


def java_classpath(version: str | None = None) -> str:
    """``java -cp`` for the broker/client jars plus kafka-tools (ProducerPerformance,
    ConsumerPerformance). kafka-tools is fetched once with Maven (bench/java/pom.xml)
    into ``<kpax cache>/bench-tools/<version>/``, apart from kpax.testing's jars."""
    from kpax.testing import classpath
    from kpax.testing.jars import cache_dir, kafka_version

    version = kafka_version(version)
    base = classpath(version)
    pom = (JAVA_DIR / "pom.xml").read_text(encoding="utf-8").replace("@KAFKA_VERSION@", version)
    stamp = hashlib.sha256(pom.encode()).hexdigest()
    libs = cache_dir() / "bench-tools" / version
    marker = libs / ".stamp"
    if not (marker.is_file() and marker.read_text().strip() == stamp):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("Maven (mvn) is needed once to fetch kafka-tools for the Java peer")
        libs.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="fetch-", dir=libs.parent))
        try:
            (staging / "pom.xml").write_text(pom, encoding="utf-8")
            out = staging / "libs"
            proc = subprocess.run(
                [mvn, "-q", "-B", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
                 f"-DoutputDirectory={out}", "-DincludeScope=runtime"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                raise RuntimeError(
                    f"Maven could not fetch kafka-tools {version}: {_tail(proc.stdout)}"
                )
            (out / ".stamp").write_text(stamp + "\n")
            if libs.exists():
                shutil.rmtree(libs)
            out.rename(libs)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    have = {Path(p).name for p in base.split(os.pathsep)}
    extra = [str(j) for j in sorted(libs.glob("*.jar")) if j.name not in have]
    return os.pathsep.join([base, *extra])


def franz_binary() -> str:
    """The franz-go peer (bench/franz/franz-bench), built first with ``go build`` when a Go
    toolchain is here (a no-op when up to date; ``make bench`` does the same); raises
    RuntimeError when there is neither a binary nor a Go toolchain."""
    binary = FRANZ_DIR / "franz-bench"
    go = shutil.which("go")
    if go is not None:
        proc = subprocess.run(
            [go, "build", "-buildvcs=false", "-trimpath", "-o", binary.name, "."],
            cwd=FRANZ_DIR, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"go build bench/franz failed: {_tail(proc.stderr)}")
    if not binary.is_file():
        raise RuntimeError("bench/franz/franz-bench is not built and there is no Go toolchain")
    return str(binary)


def _loose(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def select_peers(arg: str, known: Sequence[str]) -> list[str]:
    """The peers named in a comma-separated ``--peers`` value (all of ``known`` when
    empty), matched ignoring case, spaces, hyphens and underscores ("kpax-sync" is
    "kpax sync"); an unknown name exits with the list of known ones."""
    if not arg.strip():
        return list(known)
    by_loose = {_loose(p): p for p in known}
    chosen: list[str] = []
    for raw in arg.split(","):
        peer = by_loose.get(_loose(raw))
        if peer is None:
            raise SystemExit(f"unknown peer {raw.strip()!r}; known: {', '.join(known)}")
        chosen.append(peer)
    return list(dict.fromkeys(chosen))


def percentile(samples: Sequence[float], pct: float) -> float | None:
    """The nearest-rank ``pct`` percentile of ``samples`` (None when empty)."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil(n * pct / 100), at least 1
    return float(ordered[min(int(rank), len(ordered)) - 1])


# ------------------------------------------------------------------ partial results


def _partial_path(name: str) -> Path:
    return RESULTS_DIR / f"{name}.partial.json"


def save_partial(name: str, results: Sequence[Result]) -> None:
    """Save the results so far (bench/results/<name>.partial.json), after every run,
    so a long benchmark that dies keeps what it measured (see :func:`load_partial`)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    _partial_path(name).write_text(json.dumps(list(results), indent=1) + "\n", encoding="utf-8")


def load_partial(name: str) -> list[Result]:
    """The results saved by :func:`save_partial` (``--resume``), successful runs only."""
    path = _partial_path(name)
    if not path.is_file():
        return []
    return [r for r in json.loads(path.read_text(encoding="utf-8")) if r.get("error") is None]


# ------------------------------------------------------------------ rendering


def _fmt_rate(value: float | None) -> str:
    return "failed" if value is None else f"{value:,.0f}"


def render_table(
    results: Sequence[Result],
    *,
    baseline: str,
    peers: Sequence[str] | None = None,
    scenarios: Sequence[str] | None = None,
    ratio_to: Sequence[str] = (),
) -> str:
    """A Markdown table: one row per (scenario, peer) with records/s, MB/s and
    ``baseline``/peer ratio (>1 means the baseline is faster), then for each
    peer named in ``ratio_to`` a column peer/that one (>1 means the row's
    client is faster than it); failures noted."""
    peers = list(peers or dict.fromkeys(r["peer"] for r in results))
    scenarios = list(scenarios or dict.fromkeys(r["scenario"] for r in results))
    by_key = {(r["scenario"], r["peer"]): r for r in results}
    refs = [ref for ref in ratio_to if any(r["peer"] == ref for r in results)]
    lines = [
        f"| scenario | client | records/s | MB/s | {baseline} / client |"
        + "".join(f" client / {ref} |" for ref in refs),
        "|---|---|---:|---:|---:|" + "---:|" * len(refs),
    ]
    notes: list[str] = []

    def rate_of(sc: str, peer: str) -> float | None:
        r = by_key.get((sc, peer))
        return r["records_per_s"] if r else None

    for sc in scenarios:
        base_rate = rate_of(sc, baseline)
        for peer in peers:
            r = by_key.get((sc, peer))
            if r is None:
                continue
            rate = r["records_per_s"]
            mbs = "" if r["mb_per_s"] is None else f"{r['mb_per_s']:.1f}"
            ratio = f"{base_rate / rate:.2f}x" if rate and base_rate else ""
            row = f"| {sc} | {peer} | {_fmt_rate(rate)} | {mbs} | {ratio} |"
            for ref in refs:
                ref_rate = rate_of(sc, ref)
                row += f" {rate / ref_rate:.2f}x |" if rate and ref_rate else " |"
            lines.append(row)
            if r.get("error"):
                notes.append(f"- {sc} / {peer}: {r['error'][:300]}")
    if notes:
        lines += ["", "Failed runs:", *notes]
    return "\n".join(lines) + "\n"


def render_chart(
    results: Sequence[Result],
    path: Path,
    *,
    title: str,
    peers: Sequence[str] | None = None,
    scenarios: Sequence[str] | None = None,
) -> Path:
    """A grouped bar chart (records/s per scenario, one bar per peer) as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = list(peers or dict.fromkeys(r["peer"] for r in results))
    scenarios = list(scenarios or dict.fromkeys(r["scenario"] for r in results))
    by_key = {(r["scenario"], r["peer"]): r for r in results}
    width = 0.8 / max(len(peers), 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(scenarios)), 5))
    for i, peer in enumerate(peers):
        xs = [j + i * width for j in range(len(scenarios))]
        ys = [((by_key.get((sc, peer)) or {}).get("records_per_s") or 0) for sc in scenarios]
        ax.bar(xs, ys, width, label=peer)
    ax.set_xticks([j + width * (len(peers) - 1) / 2 for j in range(len(scenarios))])
    ax.set_xticklabels(scenarios, rotation=15, ha="right")
    ax.set_ylabel("records/s")
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_results(
    name: str,
    markdown: str,
    results: Sequence[Result],
    *,
    title: str,
    header: str = "",
    peers: Sequence[str] | None = None,
    scenarios: Sequence[str] | None = None,
    chart: bool = True,
) -> list[Path]:
    """Write bench/results/<name>.md (header + table), <name>.json and (``chart``)
    <name>.png, the records/s of ``scenarios``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    md = RESULTS_DIR / f"{name}.md"
    md.write_text(f"# {title}\n\n{header}\n\n{markdown}", encoding="utf-8")
    js = RESULTS_DIR / f"{name}.json"
    js.write_text(json.dumps(list(results), indent=1) + "\n", encoding="utf-8")
    _partial_path(name).unlink(missing_ok=True)
    if not chart:
        return [md, js]
    png = render_chart(
        results, RESULTS_DIR / f"{name}.png", title=title, peers=peers, scenarios=scenarios
    )
    return [md, js, png]
