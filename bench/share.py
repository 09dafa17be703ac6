"""Share-group (KIP-932) consumption throughput: kpax's ShareConsumer (sync and asyncio) vs
Apache Kafka's own KafkaShareConsumer and confluent-kafka's ShareConsumer, on one broker, in
one run.

Usage::

    python -m bench share [--records 1000000] [--quick] [--rounds 2]
                          [--peers "kpax sync,java"] [--java-warmup 200000]
                          [--scenarios "1p 1 member,6p 3 members"]

Scenarios: 1 and 6 partitions x 1 and 3 members. Per scenario one fresh topic
is filled once with ``--records`` values of ``--size`` (100) random bytes, no
key (``kpax.Producer.send_many`` in chunks of 10,000 per partition, the
partitions evenly, linger_ms=5, batch_size=16384). Then every peer, in its own
subprocess (bench/harness.py), reads all of it as the members of a fresh share
group whose config ``share.auto.offset.reset=earliest`` is set first
(``kpax.Admin.incremental_alter_configs`` on a GROUP resource; should that fail,
ShareConsumerPerf ``--earliest-only``), acknowledging implicitly (every record
of a poll ACCEPTed with the next poll; the last poll's released on close) with each
client's default fetch settings (poll timeout 100 ms), touching every
record's value.

Members: Python peers run one process per member (``multiprocessing`` spawn;
no GIL shared between members), each with its own ShareConsumer; Java runs one
thread per member, each with its own KafkaShareConsumer. Every member is
created and subscribed, then all start polling together (a barrier); the clock
starts when the first non-empty poll of any member returns (group join and
first assignment excluded) and stops when the records received by all members
reach ``--records``; that first batch is not counted. Records that came back
with a delivery count above 1 (redeliveries) are counted and shown.

Peers: ``kpax sync`` (``kpax.ShareConsumer``, ``poll``), ``kpax asyncio``
(``kpax.aio.ShareConsumer``, ``await poll``), ``confluent-kafka``
(``confluent_kafka.ShareConsumer``, a preview in 2.16; ``poll`` returns a
batch), ``java`` (bench/java/ShareConsumerPerf.java, compiled once with
``kpax.testing.compile_java`` against ``kpax.testing.classpath()`` into the
kpax cache; a warm-up run of ``--java-warmup`` records in its own group in the
same JVM first, as WarmProducerPerformance does). A peer whose client has no
share consumer (kpax before its share consumer, an older confluent-kafka) is
shown as "not available", not as a failure.

The local broker (without ``KPAX_TEST_BOOTSTRAP``) gets
``group.share.heartbeat.interval.ms=500`` (and the same minimum): at the
default 5 s, a member waits up to 5 s for its assignment, and members that
join later take partitions away seconds into a run that lasts a few seconds.
Everything else is the broker's default, among them
``group.share.partition.max.record.locks=2000`` (records in flight per share
partition) and ``group.share.record.lock.duration.ms=30000``.

Before the scenarios one untimed 1,000-record share-group read (Java's, else
the first peer that can) readies the broker's share coordinator and
share-state topic, which a broker's first share group creates. Rounds are
interleaved (every peer once per round, ``--rounds``, 2) and the best round of
each peer is kept. ``--quick``: 100,000 records, the 1-partition
scenarios, 1 round. Writes bench/results/share.{md,json,png} (``--no-write``:
nothing) and prints the table: records/s, MB/s, kpax sync / client, client /
java, client / confluent-kafka.

Imports: bench.harness, kpax (Admin, Producer, testing); each peer library only in its own
subprocess.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import multiprocessing as mp
import os
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import harness as h

PEERS = ["kpax sync", "kpax asyncio", "confluent-kafka", "java"]
PYTHON_PEERS = ["kpax sync", "kpax asyncio", "confluent-kafka"]
SCENARIOS = [f"{p}p {m} member{'s' if m > 1 else ''}" for p in (1, 6) for m in (1, 3)]
RATIO_TO = ["java", "confluent-kafka"]
BASELINE = "kpax sync"
LINGER_MS = 5
BATCH_SIZE = 16384
FILL_CHUNK = 10_000
POLL_S = 0.1
#: Broker settings of the local benchmark broker (see the module docstring).
BROKER_CONFIG = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
}
#: Exit status of a peer subprocess whose client has no share consumer.
NOT_AVAILABLE_EXIT = 3
NOT_AVAILABLE = "NOT AVAILABLE"
JAVA_SRC = h.JAVA_DIR / "ShareConsumerPerf.java"
JAVA_CLASS = "ShareConsumerPerf"


def parse_scenario(name: str) -> tuple[int, int]:
    """``"6p 3 members"`` -> (6 partitions, 3 members)."""
    m = re.fullmatch(r"(\d+)p (\d+) members?", name.strip())
    if m is None or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise SystemExit(f"bad scenario {name!r}: expected like '1p 1 member' or '6p 3 members'")
    return int(m.group(1)), int(m.group(2))


# ------------------------------------------------------------------ members (subprocess side)


@dataclass
class Shared:
    """What a peer's member processes share: the counts, the clock, the stop signal."""

    lock: Any
    total: Any  # records received by all members
    counted: Any  # records after the first batch
    nbytes: Any  # their value bytes
    redelivered: Any  # records with a delivery count above 1
    go: Any  # time.monotonic() when the barrier opened
    first: Any  # time.monotonic() of the first non-empty poll (0: none yet)
    end: Any  # time.monotonic() when the total reached the goal (0: not yet)
    done: Any  # set when the goal is reached (or the run is given up)
    barrier: Any  # all members subscribed
    errors: Any  # a Queue of member failures


def _shared(ctx: Any, members: int) -> Shared:
    return Shared(
        lock=ctx.Lock(),
        total=ctx.RawValue("q", 0),
        counted=ctx.RawValue("q", 0),
        nbytes=ctx.RawValue("q", 0),
        redelivered=ctx.RawValue("q", 0),
        go=ctx.RawValue("d", 0.0),
        first=ctx.RawValue("d", 0.0),
        end=ctx.RawValue("d", 0.0),
        done=ctx.Event(),
        barrier=ctx.Barrier(members),
        errors=ctx.Queue(),
    )


def _account(s: Shared, goal: int, n: int, nbytes: int, again: int) -> bool:
    """Add one non-empty poll's figures (time.monotonic is system-wide: CLOCK_MONOTONIC);
    True once every member should stop."""
    now = time.monotonic()
    with s.lock:
        if s.first.value == 0.0:
            s.first.value = now  # the first batch starts the clock and is not counted
        else:
            s.counted.value += n
            s.nbytes.value += nbytes
        s.redelivered.value += again
        s.total.value += n
        if s.total.value >= goal and s.end.value == 0.0:
            s.end.value = now
            s.done.set()
    return bool(s.done.is_set())


def _ready(s: Shared) -> None:
    """Wait until every member has subscribed; the last one in starts the run."""
    if s.barrier.wait(timeout=180) == 0:
        s.go.value = time.monotonic()


def member_kpax_sync(a: argparse.Namespace, s: Shared) -> None:
    import kpax

    c = kpax.ShareConsumer(a.bootstrap, group_id=a.group, share_acknowledgement_mode="implicit")
    try:
        c.subscribe([a.topic])
        _ready(s)
        poll, done, goal = c.poll, s.done, a.records
        while not done.is_set():
            recs = poll(POLL_S)
            if recs:
                nbytes = again = 0
                for rec in recs:
                    v = rec.value
                    nbytes += len(v) if v is not None else 0
                    if (rec.delivery_count or 1) > 1:
                        again += 1
                _account(s, goal, len(recs), nbytes, again)
    finally:
        c.close()


def member_kpax_asyncio(a: argparse.Namespace, s: Shared) -> None:
    import kpax

    async def main() -> None:
        c = kpax.aio.ShareConsumer(
            a.bootstrap, group_id=a.group, share_acknowledgement_mode="implicit"
        )
        await c.start()
        try:
            c.subscribe([a.topic])  # (kpax.aio's subscribe is not a coroutine)
            await asyncio.get_running_loop().run_in_executor(None, _ready, s)
            poll, done, goal = c.poll, s.done, a.records
            while not done.is_set():
                recs = await poll(POLL_S)
                if recs:
                    nbytes = again = 0
                    for rec in recs:
                        v = rec.value
                        nbytes += len(v) if v is not None else 0
                        if (rec.delivery_count or 1) > 1:
                            again += 1
                    _account(s, goal, len(recs), nbytes, again)
        finally:
            await c.close()

    asyncio.run(main())


def member_confluent(a: argparse.Namespace, s: Shared) -> None:
    from confluent_kafka import KafkaException, ShareConsumer

    c = ShareConsumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": a.group,
            "share.acknowledgement.mode": "implicit",
            "log_level": 3,  # not its "preview" notice at WARNING
        }
    )
    try:
        c.subscribe([a.topic])
        _ready(s)
        poll, done, goal = c.poll, s.done, a.records
        while not done.is_set():
            msgs = poll(POLL_S)
            if msgs:
                nbytes = again = n = 0
                for m in msgs:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    v = m.value()
                    nbytes += len(v) if v is not None else 0
                    dc = m.delivery_count()
                    if dc is not None and dc > 1:
                        again += 1
                    n += 1
                if n:
                    _account(s, goal, n, nbytes, again)
    finally:
        c.close()


MEMBER_FUNCS = {
    "kpax sync": member_kpax_sync,
    "kpax asyncio": member_kpax_asyncio,
    "confluent-kafka": member_confluent,
}


def unavailable(peer: str) -> str | None:
    """Why ``peer``'s client has no share consumer here (None: it has one)."""
    try:
        if peer == "kpax sync":
            import kpax

            _ = kpax.ShareConsumer
        elif peer == "kpax asyncio":
            import kpax.aio

            _ = kpax.aio.ShareConsumer
        elif peer == "confluent-kafka":
            import confluent_kafka

            if not hasattr(confluent_kafka, "ShareConsumer"):
                return (
                    f"confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer "
                    "(a preview from 2.16)"
                )
    except Exception as exc:  # missing library, or a share consumer that does not import
        return f"{type(exc).__name__}: {exc}"
    return None


def _member_main(peer: str, a: argparse.Namespace, s: Shared) -> None:
    """A member process: run the peer's member loop; a failure stops the whole run."""
    try:
        MEMBER_FUNCS[peer](a, s)
    except BaseException as exc:
        s.errors.put(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")
        s.barrier.abort()  # members still waiting for the others give up
        s.done.set()
        raise SystemExit(1) from None


def peer_main(a: argparse.Namespace) -> int:
    """The peer subprocess: start its member processes, wait, print the RESULT line."""
    why = unavailable(a.peer)
    if why is not None:
        print(f"{NOT_AVAILABLE}: {why}", file=sys.stderr)
        return NOT_AVAILABLE_EXIT
    ctx = mp.get_context("spawn")
    s = _shared(ctx, a.members)
    procs = [
        ctx.Process(target=_member_main, args=(a.peer, a, s), name=f"member-{i}", daemon=True)
        for i in range(a.members)
    ]
    started = time.monotonic()
    for p in procs:
        p.start()
    last_total, last_change = -1, time.monotonic()
    error: str | None = None
    while not s.done.wait(0.2):
        if all(not p.is_alive() for p in procs):
            error = "every member ended before the records were read"
            break
        with s.lock:
            total = s.total.value
        now = time.monotonic()
        if total != last_total:
            last_total, last_change = total, now
        elif now - last_change > a.stall_timeout:
            error = f"no records for {a.stall_timeout:g}s after {total:,} of {a.records:,}"
            break
    s.done.set()
    for p in procs:
        p.join(90)  # the members close their consumers (last acknowledgements, leave)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(10)
    failures: list[str] = []
    while True:
        try:
            failures.append(s.errors.get(timeout=0.5))
        except queue.Empty:
            break
    if failures or error or s.end.value == 0.0:
        # the cause first: the other members' BrokenBarrierError only follows from it
        failures.sort(key=lambda f: f.startswith("BrokenBarrierError"))
        print(failures[0] if failures else error or "the goal was not reached", file=sys.stderr)
        return 1
    h.emit(
        records=s.counted.value,
        nbytes=s.nbytes.value,
        seconds=s.end.value - s.first.value,
        redelivered=s.redelivered.value,
        members=a.members,
        first_records_s=round(s.first.value - (s.go.value or started), 3),
    )
    return 0


# ------------------------------------------------------------------ Java ShareConsumerPerf


_java_lock = threading.Lock()


def java_build() -> tuple[Path, str]:
    """ShareConsumerPerf compiled (once per source and classpath, into the kpax cache) and
    the Kafka classpath it runs on."""
    from kpax.testing import classpath
    from kpax.testing.jars import cache_dir
    from kpax.testing.javac import compile_java

    cp = classpath()
    digest = hashlib.sha256(JAVA_SRC.read_bytes() + b"\0" + cp.encode()).hexdigest()[:16]
    target = cache_dir() / "bench-java" / f"{JAVA_CLASS}-{digest}"
    with _java_lock:
        if (target / f"{JAVA_CLASS}.class").is_file():
            return target, cp
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{JAVA_CLASS}-", dir=target.parent))
        try:
            compile_java([JAVA_SRC], cp, staging)
            try:
                staging.rename(target)
            except OSError:  # another process built the same classes first
                if not (target / f"{JAVA_CLASS}.class").is_file():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target, cp


def java_command(*args: str) -> list[str]:
    from kpax.testing.javac import java_executable

    classes, cp = java_build()
    return [java_executable(), "-Xmx512m", "-cp", f"{classes}{os.pathsep}{cp}", JAVA_CLASS, *args]


def java_argv(a: argparse.Namespace, topic: str, group: str, members: int) -> list[str]:
    return java_command(
        "--bootstrap", a.bootstrap, "--topic", topic, "--group", group,
        "--records", str(a.records), "--threads", str(members),
        "--warmup-records", str(a.java_warmup), "--poll-ms", str(int(POLL_S * 1000)),
        "--timeout-ms", str(int(a.stall_timeout * 1000)),
    )  # fmt: skip


# ------------------------------------------------------------------ driver


def set_earliest(bootstrap: str, group: str) -> str:
    """Set ``share.auto.offset.reset=earliest`` on share group ``group`` before it exists:
    with kpax's Admin (a GROUP config resource), else with ShareConsumerPerf; says which."""
    import kpax
    from kpax import AlterConfigOp, ConfigResource, ConfigResourceType

    try:
        with kpax.Admin(bootstrap) as admin:
            admin.incremental_alter_configs(
                {
                    ConfigResource(ConfigResourceType.GROUP, group): [
                        AlterConfigOp("share.auto.offset.reset", "earliest")
                    ]
                },
                timeout=30,
            ).raise_for_errors()
        return "kpax.Admin"
    except Exception as kpax_exc:
        argv = java_command("--bootstrap", bootstrap, "--group", group, "--earliest-only")
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"could not set share.auto.offset.reset on {group}: kpax: {kpax_exc}; "
                f"Java: {proc.stderr.strip()[-500:]}"
            ) from kpax_exc
        return "ShareConsumerPerf --earliest-only"


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    """``records`` values of ``size`` random bytes, the partitions evenly, with send_many."""
    import kpax

    rnd = random.Random(42)
    pool = [rnd.randbytes(size) for _ in range(1000)]
    with kpax.Producer(bootstrap, linger_ms=LINGER_MS, batch_size=BATCH_SIZE) as producer:
        futures = []
        for p in range(partitions):
            count = records // partitions + (1 if p < records % partitions else 0)
            values = [pool[i % len(pool)] for i in range(count)]
            for i in range(0, count, FILL_CHUNK):
                futures.append(producer.send_many(topic, values[i : i + FILL_CHUNK], partition=p))
        producer.flush()
        delivered = sum(f.result(120) for f in futures)
    if delivered != records:
        raise RuntimeError(f"pre-produce delivered {delivered} of {records} records")


def run_one(a: argparse.Namespace, peer: str, sc: str, topic: str, members: int) -> h.Result:
    """One run of ``peer`` as ``members`` members of a fresh share group on ``topic``."""
    group = f"bench-share-{uuid.uuid4().hex[:10]}"
    try:
        how = set_earliest(a.bootstrap, group)
        if peer == "java":
            argv = java_argv(a, topic, group, members)
            res = h.run_peer(argv, peer=peer, scenario=sc, records=a.records, timeout=a.timeout)
        else:
            argv = [
                sys.executable, "-m", "bench.share", "--peer", peer, "--bootstrap", a.bootstrap,
                "--topic", topic, "--group", group, "--records", str(a.records),
                "--members", str(members), "--stall-timeout", str(a.stall_timeout),
            ]  # fmt: skip
            res = h.run_peer(argv, peer=peer, scenario=sc, records=a.records, timeout=a.timeout)
    except Exception as exc:  # a failed setup is a failed run, not a dead benchmark
        return h.make_result(peer, sc, records=a.records, error=repr(exc))
    res["earliest_set_by"] = how
    return mark_unavailable(res)


def mark_unavailable(res: h.Result) -> h.Result:
    """A run whose peer subprocess said its client has no share consumer (exit 3,
    "NOT AVAILABLE: why") becomes ``available: False`` with error "not available: why"."""
    err = res["error"]
    if err and err.startswith(f"exit {NOT_AVAILABLE_EXIT}:") and f"{NOT_AVAILABLE}:" in err:
        reason = err.split(f"{NOT_AVAILABLE}:", 1)[1].split(" | ")[0].strip()
        res["error"] = f"not available: {reason}"
        res["available"] = False
    return res


def warm_broker(a: argparse.Namespace, peers: list[str]) -> None:
    """One untimed share-group run of 1,000 records before the scenarios: a broker's first
    share group creates its share-state topic and coordinator (seconds), which would
    otherwise fall on the first peer of the first round."""
    topic = h.make_topic(a.bootstrap, 1, prefix="bench-share-warm")
    warm = argparse.Namespace(**{**vars(a), "records": 1000, "java_warmup": 0})
    try:
        fill(a.bootstrap, topic, warm.records, a.size, 1)
        t0 = time.monotonic()
        for peer in ["java", *[p for p in peers if p != "java"]]:
            res = run_one(warm, peer, "broker warm-up", topic, 1)
            if res["error"] is None:
                print(
                    f"broker warm-up: one share group read with {peer} in "
                    f"{time.monotonic() - t0:.1f}s"
                )
                return
        print("broker warm-up: no peer could read (the runs will say why)")
    finally:
        h.delete_topic(a.bootstrap, topic)


def best_rate(runs: list[h.Result]) -> h.Result:
    """The fastest of one peer's runs (a failed one if none succeeded)."""
    return max(runs, key=lambda r: r["records_per_s"] or 0)


def _report(sc: str, peer: str, rnd: int, res: h.Result) -> None:
    if res.get("available") is False:
        figure = res["error"]
    elif res["error"]:
        figure = f"failed: {res['error']}"
    else:
        figure = (
            f"{res['records_per_s']:>12,.0f} rec/s (redelivered {res.get('redelivered', 0)}, "
            f"first records after {res.get('first_records_s', 0):.2f}s)"
        )
    print(f"{sc:<16} {peer:<16} round {rnd}: {figure}", flush=True)


def render_table(
    results: list[h.Result], *, peers: list[str], scenarios: list[str], ratio_to: list[str]
) -> str:
    """Markdown like harness.render_table (records/s, MB/s, kpax sync / client, client /
    each of ``ratio_to``) plus the redelivered records and the time to the first records;
    a peer without a share consumer reads "not available", a failed run "failed"."""
    by_key = {(r["scenario"], r["peer"]): r for r in results}
    refs = [ref for ref in ratio_to if any(r["peer"] == ref for r in results)]

    def rate_of(sc: str, peer: str) -> float | None:
        r = by_key.get((sc, peer))
        return r["records_per_s"] if r else None

    lines = [
        f"| scenario | client | records/s | MB/s | {BASELINE} / client |"
        + "".join(f" client / {ref} |" for ref in refs)
        + " redelivered | first records after (s) |",
        "|---|---|---:|---:|---:|" + "---:|" * len(refs) + "---:|---:|",
    ]
    notes: list[str] = []
    missing: dict[str, str] = {}
    for sc in scenarios:
        base = rate_of(sc, BASELINE)
        for peer in peers:
            r = by_key.get((sc, peer))
            if r is None:
                continue
            rate = r["records_per_s"]
            if r.get("available") is False:
                shown = "not available"
                missing.setdefault(peer, r["error"].removeprefix("not available: "))
            else:
                shown = "failed" if rate is None else f"{rate:,.0f}"
                if r["error"]:
                    notes.append(f"- {sc} / {peer}: {r['error'][:300]}")
            mbs = "" if r["mb_per_s"] is None else f"{r['mb_per_s']:.1f}"
            row = f"| {sc} | {peer} | {shown} | {mbs} | "
            row += f"{base / rate:.2f}x |" if rate and base else "|"
            for ref in refs:
                ref_rate = rate_of(sc, ref)
                row += f" {rate / ref_rate:.2f}x |" if rate and ref_rate else " |"
            redelivered = "" if rate is None else str(r.get("redelivered", ""))
            first = r.get("first_records_s")
            row += f" {redelivered} | {'' if first is None or rate is None else f'{first:.2f}'} |"
            lines.append(row)
    if missing:
        lines += ["", "Not available:", *(f"- {p}: {why}" for p, why in missing.items())]
    if notes:
        lines += ["", "Failed runs:", *notes]
    return "\n".join(lines) + "\n"


def driver_main(a: argparse.Namespace) -> int:
    if a.quick:
        a.records = min(a.records, 100_000)
        a.rounds = a.rounds or 1
    a.rounds = a.rounds or 2
    if a.scenarios:
        scenarios = [sc.strip() for sc in a.scenarios.split(",")]
    else:
        scenarios = [s for s in SCENARIOS if s.startswith("1p")] if a.quick else list(SCENARIOS)
    for sc in scenarios:
        parse_scenario(sc)
    peers = h.select_peers(a.peers, PEERS)
    results: list[h.Result] = []
    not_available: dict[str, h.Result] = {}
    local = not os.environ.get("KPAX_TEST_BOOTSTRAP")
    with h.broker(config=dict(BROKER_CONFIG)) as bootstrap:
        a.bootstrap = bootstrap
        warm_broker(a, peers)
        for sc in scenarios:
            parts, members = parse_scenario(sc)
            topic = h.make_topic(bootstrap, parts, prefix="bench-share")
            try:
                t0 = time.monotonic()
                fill(bootstrap, topic, a.records, a.size, parts)
                print(f"{sc}: {a.records:,} records written in {time.monotonic() - t0:.1f}s")
                runs: dict[str, list[h.Result]] = {p: [] for p in peers}
                for rnd in range(1, a.rounds + 1):  # interleaved rounds
                    for peer in peers:
                        if peer in not_available:  # no share consumer: once is enough
                            res = {**not_available[peer], "scenario": sc}
                        else:
                            res = run_one(a, peer, sc, topic, members)
                            if res.get("available") is False:
                                not_available[peer] = res
                        res["round"] = rnd
                        _report(sc, peer, rnd, res)
                        runs[peer].append(res)
                results.extend(best_rate(runs[p]) for p in peers)
            finally:
                h.delete_topic(bootstrap, topic)
    table = render_table(results, peers=peers, scenarios=scenarios, ratio_to=RATIO_TO)
    print()
    print(table)
    machine = f"Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}."
    broker_note = (
        "One local broker with "
        + ", ".join(f"{k}={v}" for k, v in BROKER_CONFIG.items())
        + " (other share-group settings at their defaults)."
        if local
        else "The broker at KPAX_TEST_BOOTSTRAP, its own settings."
    )
    java_note = (
        f" Java: bench/java/ShareConsumerPerf.java (KafkaShareConsumer, one thread per member), "
        f"warmed by an untimed run of {min(a.java_warmup, a.records):,} records in its own "
        "group in the same JVM."
        if "java" in peers
        else ""
    )
    scenario_arg = f' --scenarios "{",".join(scenarios)}"' if a.scenarios else ""
    header = (
        f"{a.records:,} pre-produced records of {a.size} bytes (no key) per scenario, read by "
        "the members of a fresh share group per run (share.auto.offset.reset=earliest set "
        "on the group first; implicit acknowledgement; each client's default fetch "
        "settings). Python clients: one process per member; the clock runs from the first "
        "non-empty poll of any member (not counted) until all members together have the "
        f"records. {broker_note}{java_note} Best of {a.rounds} interleaved rounds. {machine} "
        f"Reproduce: `python -m bench share --records {a.records} --rounds {a.rounds}"
        f"{scenario_arg}`."
    )
    if not a.no_write:
        for path in h.write_results(
            "share", table, results, title="Share consumer throughput (records/s)",
            header=header, peers=peers, scenarios=scenarios,
        ):  # fmt: skip
            print("wrote", path)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench share", description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument(
        "--quick", action="store_true", help="100,000 records, 1-partition scenarios, 1 round"
    )
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds, best kept (2)")
    ap.add_argument(
        "--java-warmup", type=int, default=200_000, help="records of Java's untimed first run"
    )
    ap.add_argument("--peers", default="", help=f"comma-separated subset of {PEERS}")
    ap.add_argument(
        "--scenarios", default="", help="comma-separated, e.g. '1p 1 member,6p 3 members'"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per peer run")
    ap.add_argument(
        "--stall-timeout", type=float, default=60.0, help="seconds without records: a failed run"
    )
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/")
    # subprocess side
    ap.add_argument("--peer", choices=sorted(MEMBER_FUNCS), help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--members", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.peer:
        return peer_main(a)
    return driver_main(a)


if __name__ == "__main__":
    sys.exit(main())
