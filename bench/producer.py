"""Producer throughput: kpax (sync, sync ``send_many`` and asyncio) vs kafka-python,
aiokafka, confluent-kafka, franz-go and the Java client, on one broker, in one run.

Usage::

    python -m bench producer [--suite fixed|defaults|keyed|all] [--records 1000000]
                             [--keyed-records N] [--quick] [--rounds 2]
                             [--peers "kpax sync,franz-go"] [--java-warmup 200000]
                             [--scenarios "1p acks=1 none,1000p acks=all none keyed defaults"]
                             [--out NAME] [--resume] [--warm]

Every peer runs in its own subprocess (bench/harness.py) and produces the same
records -- values of ``--size`` (100) random bytes (a pool of 10,000), no key,
or in a ``keyed`` scenario the key ``key-<i>`` (the i-th record's: every
record a new key, spread over the partitions by each client's default
partitioner) -- to a fresh topic per run (every partition led and loaded:
bench.harness.make_topic), after one warm-up record (connections and
metadata ready). Keys and values are made before the clock starts. The clock
runs from the first send to the moment every record is acknowledged (flush).
With ``--warm`` every partition of the fresh topic gets one record first,
untimed (bench.harness.warm_topic): a broker's first writes to a partition
(creating its segment and index files) then cost no client's clock, as on a
topic in use. Without it they fall in the timed run. (The Java peers' untimed
warm-up run writes to the same topic, so theirs are warm either way.) At 1,000
partitions every client's rounds swung 2-4x on this project's machine with or
without it: the broker took from 0.1 s to seconds to answer a Produce request.

A scenario is ``<P>p acks=<1|all> <compression>[ keyed][ defaults]``. The
settings each client gets:

- without ``defaults`` (the *fixed-batch* run): every client gets the Java
  4.x defaults ``linger_ms=5`` and ``batch_size=16384`` (franz-go:
  ``ProducerLinger(5ms)``, ``ProducerBatchMaxBytes(16384)``; confluent-kafka:
  ``linger.ms=5``, ``batch.size=16384``) so they build comparable batches;
- with ``defaults``: every client at its own defaults except ``linger_ms=5``
  (or its equivalent) -- what a user runs: kpax ``batch_size`` 1,000,000
  (since issue 29; 16384 before), ``buffer_memory`` 32 MiB; kafka-python
  ``batch_size`` 16384; aiokafka ``max_batch_size`` 16384; confluent-kafka
  (librdkafka 2.x) ``batch.size``
  1,000,000, ``batch.num.messages`` 10,000, ``queue.buffering.max.messages``
  100,000; Java ``batch.size`` 16384, ``buffer.memory`` 32 MiB. franz-go gets
  its own defaults *including* its linger (v1.22.2: linger 10 ms,
  ``ProducerBatchMaxBytes`` 1,000,012, ``MaxBufferedRecords`` 50,000), except
  in keyed scenarios, where it lingers 5 ms like every client.

Everything else is each client's default in both runs, acks aside (the
scenario's): idempotence is on for kpax, franz-go, Java and kafka-python with
acks=all, as their defaults say (acks=1 needs it off), and off for
confluent-kafka (librdkafka's default) and aiokafka.

Suites (``--suite``, each written to its own results file):

- ``fixed`` (the default): 1 and 6 partitions x acks=1 and acks=all x no
  compression and lz4, fixed batches, ``--records`` records -> ``producer``;
- ``defaults``: ``1p acks=1 none defaults`` and ``6p acks=all none
  defaults``, ``--records`` records -> ``producer-defaults``;
- ``keyed``: keyed records, each client's defaults, acks=all, to a
  100-partition topic (100,000 records) and to a 1,000-partition topic
  (50,000 records; ``--keyed-records`` sets both) -> ``producer-keyed``.

Peers: ``kpax sync`` calls ``send`` per record; ``kpax send_many`` hands the
values (and keys) to ``Producer.send_many`` in chunks of 10,000 (one
BulkFuture each, all checked); ``franz-go`` is the Go program bench/franz
(built with ``go build``; ``make bench`` builds it); ``java`` is Apache
Kafka's ProducerPerformance (keyless scenarios), run by
bench/java/WarmProducerPerformance.java twice in one JVM: a warm-up run of
``--java-warmup`` records (200,000 by default, same topic and settings, not
reported), then the timed run, so its figure is not a cold-JIT one.
(ProducerPerformance's own ``--warmup-records`` is not used: its steady-state
clock starts when the last warm-up record is queued, not sent, so it also
counts the time to drain the warm-up backlog.) ProducerPerformance cannot key
records: in keyed scenarios the Java peer is bench/java/KeyedProducerPerf.java
(a KafkaProducer, warmed the same way, timed from first send to flush).

Python peers and franz-go also report their process's peak RSS
(``rss_peak_mb``); the keyed suite's results list it next to kpax's
``buffer_memory``.

Rounds are interleaved (round 1: every peer, round 2: every peer, ...) and
the best round of each peer is kept. ``--quick``: at most 100,000 records
(keyed: 20,000), the 1-partition scenarios of the fixed suite (keyed: the
100-partition one), 1 round. The table gives each client's records/s, MB/s,
kpax sync / client, and client / confluent-kafka and client / franz-go; the
header states the load average of the machine at the start and the end.

Writes bench/results/<name>.{md,json,png} and prints the table.

Imports: bench.harness, kpax and each peer library (only inside its own subprocess).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
import time
from typing import Any

from bench import harness as h

PEERS = [
    "kpax sync",
    "kpax send_many",
    "kpax asyncio",
    "kafka-python",
    "aiokafka",
    "confluent-kafka",
    "franz-go",
    "java",
]
SCENARIOS = [f"{p}p acks={a} {c}" for c in ("none", "lz4") for a in ("1", "all") for p in (1, 6)]
SUITES = {
    "fixed": SCENARIOS,
    "defaults": ["1p acks=1 none defaults", "6p acks=all none defaults"],
    "keyed": ["100p acks=all none keyed defaults", "1000p acks=all none keyed defaults"],
}
#: The results file of each suite (bench/results/<name>.*).
RESULT_NAMES = {"fixed": "producer", "defaults": "producer-defaults", "keyed": "producer-keyed"}
#: Records of a keyed run by partition count (others: 100,000); --keyed-records sets all.
KEYED_RECORDS = {100: 100_000, 1000: 50_000}
RATIO_TO = ["confluent-kafka", "franz-go"]
LINGER_MS = 5
BATCH_SIZE = 16384
SEND_MANY_CHUNK = 10_000
WARMUP = b"warm-up"
#: kpax's buffer_memory default (bytes), for the RSS figures.
KPAX_BUFFER_MEMORY = 32 * 1024 * 1024

#: What each peer gets in a ``defaults`` scenario besides acks (the table header says it).
DEFAULT_SETTINGS = (
    "every client at its own defaults except linger_ms=5 (or its equivalent): kpax "
    "batch_size 1,000,000 (a new batch reserves 16 KiB and grows as it fills), "
    "buffer_memory 32 MiB; kafka-python batch_size 16384; aiokafka "
    "max_batch_size 16384; confluent-kafka (librdkafka {librdkafka}) batch.size 1,000,000, "
    "batch.num.messages 10,000, queue.buffering.max.messages 100,000, idempotence off; Java "
    "batch.size 16384, buffer.memory 32 MiB; franz-go v1.22.2 at all its defaults{franz_linger}: "
    "ProducerBatchMaxBytes 1,000,012, MaxBufferedRecords 50,000. Idempotence on with acks=all "
    "for kpax, kafka-python, Java and franz-go (their default), off with acks=1"
)


class Scenario:
    """A parsed scenario name: ``<P>p acks=<1|all|0> <compression>[ keyed][ defaults]``."""

    __slots__ = ("acks", "compression", "defaults", "keyed", "name", "partitions")

    def __init__(self, name: str) -> None:
        m = re.fullmatch(r"(\d+)p acks=(1|all|0) (\w+)( keyed)?( defaults)?", name)
        if m is None:
            raise SystemExit(
                f"bad scenario {name!r}: expected like '1p acks=1 none' or "
                "'1000p acks=all none keyed defaults'"
            )
        self.name = name
        self.partitions = int(m.group(1))
        self.acks = m.group(2)
        self.compression = m.group(3)
        self.keyed = m.group(4) is not None
        self.defaults = m.group(5) is not None

    def records(self, a: argparse.Namespace) -> int:
        """Records of one run: ``--records``, or for a keyed one KEYED_RECORDS /
        ``--keyed-records``."""
        if not self.keyed:
            return int(a.records)
        if a.keyed_records:
            return int(a.keyed_records)
        return KEYED_RECORDS.get(self.partitions, 100_000)


def parse_scenario(name: str) -> tuple[int, str, str]:
    """(partitions, acks, compression) of a scenario name (see :class:`Scenario`)."""
    sc = Scenario(name)
    return sc.partitions, sc.acks, sc.compression


def _values(n: int, size: int) -> list[bytes]:
    rnd = random.Random(42)
    pool = [rnd.randbytes(size) for _ in range(min(n, 10_000))]
    return [pool[i % len(pool)] for i in range(n)]


def _keys(n: int) -> list[bytes]:
    return [b"key-%d" % i for i in range(n)]


def _batch_kw(a: argparse.Namespace, name: str = "batch_size") -> dict[str, int]:
    """The fixed-batch run's batch size option; nothing in a ``defaults`` run."""
    return {} if a.defaults else {name: BATCH_SIZE}


# ------------------------------------------------------------------ peers (subprocess side)


def run_kpax_sync(a: argparse.Namespace, values: list[bytes], keys: list[bytes] | None) -> float:
    import kpax

    with kpax.Producer(
        a.bootstrap, acks=a.acks, compression_type=a.compression, linger_ms=LINGER_MS,
        **_batch_kw(a),
    ) as p:  # fmt: skip
        p.send(a.topic, WARMUP).result(30)
        send, topic = p.send, a.topic
        t0 = time.perf_counter()
        if keys is None:
            for v in values:
                send(topic, v)
        else:
            for v, k in zip(values, keys, strict=True):
                send(topic, v, k)
        p.flush()
        return time.perf_counter() - t0


def run_kpax_send_many(
    a: argparse.Namespace, values: list[bytes], keys: list[bytes] | None
) -> float:
    import kpax

    with kpax.Producer(
        a.bootstrap, acks=a.acks, compression_type=a.compression, linger_ms=LINGER_MS,
        **_batch_kw(a),
    ) as p:  # fmt: skip
        p.send(a.topic, WARMUP).result(30)
        send_many, topic = p.send_many, a.topic
        spans = range(0, len(values), SEND_MANY_CHUNK)
        chunks = [values[i : i + SEND_MANY_CHUNK] for i in spans]
        key_chunks = [keys[i : i + SEND_MANY_CHUNK] if keys else None for i in spans]
        t0 = time.perf_counter()
        futures = [send_many(topic, c, k) for c, k in zip(chunks, key_chunks, strict=True)]
        p.flush()
        elapsed = time.perf_counter() - t0
        delivered = sum(f.result(30) for f in futures)
        if delivered != len(values):
            raise RuntimeError(f"send_many delivered {delivered} of {len(values)} records")
        return elapsed


def run_kpax_asyncio(a: argparse.Namespace, values: list[bytes], keys: list[bytes] | None) -> float:
    import kpax

    async def main() -> float:
        async with kpax.aio.Producer(
            a.bootstrap, acks=a.acks, compression_type=a.compression, linger_ms=LINGER_MS,
            **_batch_kw(a),
        ) as p:  # fmt: skip
            await p.send_and_wait(a.topic, WARMUP)
            send, topic = p.send, a.topic
            t0 = time.perf_counter()
            if keys is None:
                for v in values:
                    await send(topic, v)
            else:
                for v, k in zip(values, keys, strict=True):
                    await send(topic, v, k)
            await p.flush()
            return time.perf_counter() - t0

    return asyncio.run(main())


def run_kafka_python(a: argparse.Namespace, values: list[bytes], keys: list[bytes] | None) -> float:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    acks: Any = "all" if a.acks == "all" else int(a.acks)
    comp = None if a.compression == "none" else a.compression
    p = KafkaProducer(
        bootstrap_servers=a.bootstrap, acks=acks, compression_type=comp, linger_ms=LINGER_MS,
        **_batch_kw(a),
    )  # fmt: skip
    p.send(a.topic, WARMUP).get(30)
    send, topic = p.send, a.topic
    t0 = time.perf_counter()
    if keys is None:
        for v in values:
            send(topic, v)
    else:
        for v, k in zip(values, keys, strict=True):
            send(topic, v, k)
    p.flush()
    elapsed = time.perf_counter() - t0
    p.close()
    return elapsed


def run_aiokafka(a: argparse.Namespace, values: list[bytes], keys: list[bytes] | None) -> float:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    acks: Any = "all" if a.acks == "all" else int(a.acks)
    comp = None if a.compression == "none" else a.compression

    async def main() -> float:
        p = AIOKafkaProducer(
            bootstrap_servers=a.bootstrap, acks=acks, compression_type=comp,
            linger_ms=LINGER_MS, **_batch_kw(a, "max_batch_size"),
        )  # fmt: skip
        await p.start()
        try:
            await p.send_and_wait(a.topic, WARMUP)
            send, topic = p.send, a.topic
            t0 = time.perf_counter()
            if keys is None:
                for v in values:
                    await send(topic, v)
            else:
                for v, k in zip(values, keys, strict=True):
                    await send(topic, v, key=k)
            await p.flush()
            return time.perf_counter() - t0
        finally:
            await p.stop()

    return asyncio.run(main())


def run_confluent(a: argparse.Namespace, values: list[bytes], keys: list[bytes] | None) -> float:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": a.bootstrap,
        "acks": "all" if a.acks == "all" else a.acks,
        "compression.type": a.compression,
        "linger.ms": LINGER_MS,
        **{k.replace("_", "."): v for k, v in _batch_kw(a).items()},
    }
    p = Producer(conf)
    p.produce(a.topic, WARMUP)
    p.flush(30)
    produce, poll, topic = p.produce, p.poll, a.topic
    t0 = time.perf_counter()
    if keys is None:
        for v in values:
            while True:
                try:
                    produce(topic, v)
                    break
                except BufferError:  # librdkafka's queue is full: serve delivery reports
                    poll(0.005)
    else:
        for v, k in zip(values, keys, strict=True):
            while True:
                try:
                    produce(topic, v, k)
                    break
                except BufferError:
                    poll(0.005)
    p.flush()
    return time.perf_counter() - t0


PEER_FUNCS = {
    "kpax sync": run_kpax_sync,
    "kpax send_many": run_kpax_send_many,
    "kpax asyncio": run_kpax_asyncio,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
}


def peak_rss_mib() -> float | None:
    """This process's peak RSS in MiB (VmHWM of /proc/self/status: getrusage's
    ru_maxrss would start from the RSS of the process that forked this one), or
    None where there is no /proc."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def peer_main(a: argparse.Namespace) -> int:
    values = _values(a.records, a.size)
    keys = _keys(a.records) if a.keyed else None
    if a.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        seconds = PEER_FUNCS[a.peer](a, values, keys)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        seconds = PEER_FUNCS[a.peer](a, values, keys)
    peak = peak_rss_mib()
    h.emit(
        records=a.records,
        nbytes=a.records * a.size,
        seconds=seconds,
        rss_peak_mb=None if peak is None else round(peak, 1),
    )
    return 0


# ------------------------------------------------------------------ Java ProducerPerformance

_JAVA_LINE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.M)
_JAVA_WARM = h.JAVA_DIR / "WarmProducerPerformance.java"
_JAVA_KEYED = h.JAVA_DIR / "KeyedProducerPerf.java"


def _java_parser(size: int) -> Any:
    def parse(stdout: str) -> dict[str, Any]:
        found = _JAVA_LINE.findall(stdout.rpartition("WARM-UP END")[2])
        if not found:
            raise ValueError("no summary line")
        n, rate = found[-1]
        return {"records": int(n), "bytes": int(n) * size, "seconds": int(n) / float(rate)}

    return parse


def java_argv(a: argparse.Namespace, topic: str, sc: Scenario) -> list[str]:
    """ProducerPerformance (warmed) for a keyless scenario, KeyedProducerPerf for a keyed one."""
    props = [
        f"bootstrap.servers={a.bootstrap}",
        f"acks={'-1' if sc.acks == 'all' else sc.acks}",
        f"compression.type={sc.compression}",
        f"linger.ms={LINGER_MS}",
    ]
    if not sc.defaults:
        props.append(f"batch.size={BATCH_SIZE}")
    records = sc.records(a)
    if sc.keyed:
        return [
            "java", "-Xmx512m", "-cp", h.java_classpath(), str(_JAVA_KEYED), str(a.java_warmup),
            topic, str(records), str(a.size), *props,
        ]  # fmt: skip
    return [
        "java", "-Xmx512m", "-cp", h.java_classpath(), str(_JAVA_WARM), str(a.java_warmup),
        "--topic", topic, "--num-records", str(records), "--record-size", str(a.size),
        "--throughput", "-1", "--producer-props", *props,
    ]  # fmt: skip


def franz_argv(a: argparse.Namespace, topic: str, sc: Scenario) -> list[str]:
    """franz-go: fixed batches (linger 5 ms, 16384 bytes), or its defaults (keyed: linger 5 ms)."""
    argv = [
        h.franz_binary(), "produce", "-brokers", a.bootstrap, "-topic", topic,
        "-records", str(sc.records(a)), "-size", str(a.size), "-acks", sc.acks,
        "-compression", sc.compression,
    ]  # fmt: skip
    if not sc.defaults:
        argv += ["-linger-ms", str(LINGER_MS), "-batch-bytes", str(BATCH_SIZE)]
    elif sc.keyed:
        argv += ["-linger-ms", str(LINGER_MS)]
    if sc.keyed:
        argv.append("-keyed")
    return argv


# ------------------------------------------------------------------ driver


def run_one(a: argparse.Namespace, peer: str, sc: Scenario) -> h.Result:
    """One run of ``peer`` on a fresh topic, deleted afterwards."""
    records = sc.records(a)
    try:
        topic = h.make_topic(a.bootstrap, sc.partitions, prefix="bench-producer")
        if a.warm:
            h.warm_topic(a.bootstrap, topic, sc.partitions)
    except Exception as exc:  # a failed setup is a failed run, not a dead benchmark
        return h.make_result(peer, sc.name, records=records, error=repr(exc))
    try:
        return _run_on(a, peer, sc, topic)
    finally:
        h.delete_topic(a.bootstrap, topic)


def _run_on(a: argparse.Namespace, peer: str, sc: Scenario, topic: str) -> h.Result:
    records = sc.records(a)
    try:
        if peer == "java":
            argv = java_argv(a, topic, sc)
            parse = None if sc.keyed else _java_parser(a.size)
            return h.run_peer(argv, peer=peer, scenario=sc.name, records=records,
                              timeout=a.timeout, parse=parse)  # fmt: skip
        if peer == "franz-go":
            argv = franz_argv(a, topic, sc)
        else:
            argv = [
                sys.executable, "-m", "bench.producer", "--peer", peer,
                "--bootstrap", a.bootstrap, "--topic", topic, "--records", str(records),
                "--size", str(a.size), "--acks", sc.acks, "--compression", sc.compression,
            ]  # fmt: skip
            if sc.keyed:
                argv.append("--keyed")
            if sc.defaults:
                argv.append("--defaults")
    except Exception as exc:  # a failed setup is a failed run, not a dead benchmark
        return h.make_result(peer, sc.name, records=records, error=repr(exc))
    return h.run_peer(argv, peer=peer, scenario=sc.name, records=records, timeout=a.timeout)


def best_of(runs: list[h.Result], peers: list[str], scenarios: list[str]) -> list[h.Result]:
    """The fastest run of each (scenario, peer); a failed one when none succeeded."""
    best: dict[tuple[str, str], h.Result] = {}
    for r in runs:
        key = (r["scenario"], r["peer"])
        old = best.get(key)
        if old is None or (r["records_per_s"] or 0) > (old["records_per_s"] or 0):
            best[key] = r
    return [best[(sc, p)] for sc in scenarios for p in peers if (sc, p) in best]


def rss_table(results: list[h.Result], runs: list[h.Result]) -> str:
    """Markdown: each peer's peak RSS (MiB, the highest over its rounds) per scenario,
    for the peers that report it, and kpax's buffer_memory beside it."""
    peak: dict[tuple[str, str], float] = {}
    for r in runs:
        if r.get("rss_peak_mb") is not None and r["error"] is None:
            key = (r["scenario"], r["peer"])
            peak[key] = max(peak.get(key, 0.0), float(r["rss_peak_mb"]))
    if not peak:
        return ""
    lines = [
        "Peak RSS of each client's process (MiB, highest of its rounds; Python peers and "
        f"franz-go; kpax's buffer_memory is {KPAX_BUFFER_MEMORY // 2**20} MiB):",
        "",
        "| scenario | client | peak RSS MiB |",
        "|---|---|---:|",
    ]
    for r in results:
        key = (r["scenario"], r["peer"])
        if key in peak:
            lines.append(f"| {key[0]} | {key[1]} | {peak[key]:.0f} |")
    return "\n".join(lines) + "\n"


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _settings_text(scenarios: list[Scenario]) -> str:
    fixed = [sc for sc in scenarios if not sc.defaults]
    default = [sc for sc in scenarios if sc.defaults]
    parts = []
    if fixed:
        parts.append(
            f"{', '.join(sc.name for sc in fixed)}: every client with linger_ms={LINGER_MS} and "
            f"batch_size={BATCH_SIZE} (franz-go: ProducerLinger 5 ms, ProducerBatchMaxBytes "
            f"{BATCH_SIZE})."
        )
    if default:
        try:
            from confluent_kafka import libversion

            librdkafka = libversion()[0]
        except ImportError:
            librdkafka = "2.x"
        keyed = all(sc.keyed for sc in default)
        franz_linger = " but linger, 5 ms" if keyed else " (linger 10 ms)"
        if not keyed and any(sc.keyed for sc in default):
            franz_linger = " (linger 10 ms; 5 ms in keyed scenarios)"
        parts.append(
            f"{', '.join(sc.name for sc in default)}: "
            + DEFAULT_SETTINGS.format(librdkafka=librdkafka, franz_linger=franz_linger)
            + "."
        )
    return " ".join(parts)


def driver_main(a: argparse.Namespace) -> int:
    if a.quick:
        a.records = min(a.records, 100_000)
        a.keyed_records = min(a.keyed_records or 20_000, 20_000)
        a.rounds = a.rounds or 1
    a.rounds = a.rounds or 2
    suites = [x.strip() for x in a.suite.split(",")] if a.suite else ["fixed"]
    if suites == ["all"]:
        suites = list(SUITES)
    for suite in suites:
        if suite not in SUITES:
            raise SystemExit(f"unknown suite {suite!r}; known: {', '.join(SUITES)}, all")
    plan: list[tuple[str, str, list[Scenario]]] = []  # (results name, how to repeat, scenarios)
    if a.scenarios:
        names = [x.strip() for x in a.scenarios.split(",")]
        out = a.out or "producer"
        plan.append((out, f' --scenarios "{",".join(names)}" --out {out}', []))
    else:
        for suite in suites:
            names = SUITES[suite]
            if a.quick:
                names = [n for n in names if n.startswith(("1p", "100p"))]
            plan.append((a.out or RESULT_NAMES[suite], f" --suite {suite}", []))
            plan[-1][2].extend(Scenario(n) for n in names)
    if a.scenarios:
        plan[0][2].extend(Scenario(n) for n in names)
    peers = h.select_peers(a.peers, PEERS)
    with h.broker() as bootstrap:
        a.bootstrap = bootstrap
        for out, how, scs in plan:
            run_suite(a, out, how, peers, scs)
    return 0


def run_suite(
    a: argparse.Namespace, out: str, how: str, peers: list[str], scs: list[Scenario]
) -> None:
    """Every scenario of one results file: interleaved rounds, best kept, written."""
    runs: list[h.Result] = h.load_partial(out) if a.resume else []
    done = {(r["scenario"], r["peer"], r.get("round")) for r in runs}
    load_start = _loadavg()
    started = time.strftime("%Y-%m-%d %H:%M")
    for sc in scs:
        for rnd in range(1, a.rounds + 1):  # interleaved rounds
            for peer in peers:
                if (sc.name, peer, rnd) in done:
                    continue
                res = run_one(a, peer, sc)
                res["round"] = rnd
                res["loadavg"] = _loadavg()
                rate = res["records_per_s"]
                print(
                    f"{sc.name:<34} {peer:<16} round {rnd}: "
                    + (f"{rate:>12,.0f} rec/s" if rate else f"failed: {res['error']}")
                    + f"   (load {res['loadavg']})",
                    flush=True,
                )
                runs.append(res)
                h.save_partial(out, runs)
    names = [sc.name for sc in scs]
    results = best_of(runs, peers, names)
    table = h.render_table(
        results, baseline="kpax sync", peers=peers, scenarios=names, ratio_to=RATIO_TO
    )
    rss = rss_table(results, runs)
    if rss:
        table += "\n" + rss
    print()
    print(table)
    if "java" not in peers:
        java_note = ""
    elif a.java_warmup > 0:
        java_note = (
            f" Java: ProducerPerformance (keyed: bench/java/KeyedProducerPerf.java) warmed in the "
            f"same JVM by a first, untimed run of {a.java_warmup:,} records "
            "(bench/java/WarmProducerPerformance.java)."
        )
    else:
        java_note = " Java: in a cold JVM (--java-warmup 0)."
    counts = sorted({(sc.keyed, sc.records(a)) for sc in scs})
    records_text = "; ".join(
        (f"{n:,} keyed records (key-<i>)" if keyed else f"{n:,} records (no key)")
        + " of "
        + ", ".join(sc.name for sc in scs if (sc.keyed, sc.records(a)) == (keyed, n))
        for keyed, n in counts
    )
    keyed_arg = f" --keyed-records {a.keyed_records}" if a.keyed_records else ""
    records_arg = "" if all(sc.keyed for sc in scs) else f" --records {a.records}"
    header = (
        f"Records of {a.size} bytes per run: {records_text}. Fresh topic per run"
        + (", each partition written once (untimed) before the run" if a.warm else "")
        + ", one local "
        f"broker; time from first send to all acknowledged. Settings: {_settings_text(scs)} "
        f"Best of {a.rounds} interleaved rounds. kpax send_many: Producer.send_many in "
        f"chunks of {SEND_MANY_CHUNK:,} values. franz-go: bench/franz (franz-go v1.22.2)."
        f"{java_note} Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; load "
        f"average (1/5/15 min) {load_start} at the start ({started}), {_loadavg()} at the end "
        "(each kept run's in the .json). "
        f"Reproduce: `make bench-franz && python -m bench producer{records_arg} "
        f"--rounds {a.rounds}{how}{keyed_arg}{' --warm' if a.warm else ''}`."
    )
    if not a.no_write:
        for path in h.write_results(
            out, table, results, title="Producer throughput (records/s)", header=header,
            peers=peers, scenarios=names,
        ):  # fmt: skip
            print("wrote", path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench producer", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--records", type=int, default=1_000_000, help="records of keyless runs")
    ap.add_argument(
        "--keyed-records", type=int, default=0,
        help="records of every keyed run (default: 100,000; 50,000 to 1,000 partitions)",
    )  # fmt: skip
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument(
        "--quick", action="store_true",
        help="at most 100,000 records (keyed 20,000), 1 or 100 partitions, 1 round",
    )  # fmt: skip
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds, best kept (2)")
    ap.add_argument(
        "--suite", default="",
        help=f"comma-separated: {', '.join(SUITES)} or all (default: fixed)",
    )  # fmt: skip
    ap.add_argument(
        "--java-warmup", type=int, default=200_000, help="records of Java's untimed first run"
    )
    ap.add_argument("--peers", default="", help=f"comma-separated subset of {PEERS}")
    ap.add_argument(
        "--scenarios", default="",
        help="comma-separated, e.g. '1p acks=1 none,1000p acks=all none keyed defaults'",
    )  # fmt: skip
    ap.add_argument("--out", default="", help="results name (bench/results/<out>.*)")
    ap.add_argument(
        "--warm", action="store_true",
        help="write one record to every partition of each fresh topic before the timed run: "
        "the broker's first writes to a partition (its segment and index files) go untimed, "
        "as for a topic in use",
    )  # fmt: skip
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per peer run")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/")
    ap.add_argument(
        "--resume", action="store_true", help="keep the successful runs of an interrupted run"
    )
    # subprocess side
    ap.add_argument("--peer", choices=sorted(PEER_FUNCS), help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--acks", default="1", help=argparse.SUPPRESS)
    ap.add_argument("--compression", default="none", help=argparse.SUPPRESS)
    ap.add_argument("--keyed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--defaults", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.peer:
        return peer_main(a)
    return driver_main(a)


if __name__ == "__main__":
    sys.exit(main())
