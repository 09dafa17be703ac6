"""Consumer throughput and commit cost: kpax (sync and asyncio) vs kafka-python, aiokafka,
confluent-kafka, franz-go and the Java client's own ConsumerPerformance, on one broker, in
one run.

Usage::

    python -m bench consumer [--records 1000000] [--quick] [--rounds 2] [--warmup 15]
                             [--peers "kpax sync,aiokafka"]
                             [--scenarios "1p none,6p lz4,commit latency,commit per poll"]
                             [--commits 200] [--commit-records 100000] [--commit-rounds 5]

Throughput scenarios (1 and 6 partitions x no compression and lz4): one
fresh topic is filled once with ``--records`` values of ``--size`` (100)
random bytes (confluent-kafka producer, linger.ms=5, batch.size=16384: Java's
defaults), then every peer, in its own subprocess (bench/harness.py), reads
the whole topic from the beginning with manually assigned partitions (no
group, no commits), touching every record's value. The clock starts after
the client is connected and the partitions are assigned, just before the
first poll, and stops when the last record arrives. Python peers use their
batch APIs (kpax sync: iteration; kpax asyncio and kafka-python: poll;
aiokafka: getmany; confluent-kafka: consume(1000)); franz-go (bench/franz,
a Go program) polls its fetches. Java's ConsumerPerformance joins a group;
its ``fetch.nMsg.sec`` (rate excluding the group join) is reported.

Commit scenarios (no Java peer), each on a fresh 1-partition topic, every
peer a member of its own fresh group (subscribe, auto commit off, each
client's default fetch max wait, 500 ms; max_poll_records=500 or the peer's
equivalent):

- ``commit latency``: the member polls the topic's ``max(1000, --commits)``
  records, stays idle for 1 s (caught up: a client that fetches in the
  background -- kpax, confluent-kafka, aiokafka, franz-go -- then holds a
  long-poll fetch), then makes ``--commits`` (200) synchronous commits back
  to back, each of a new offset (its position minus commits-1, ..., its
  position, so that no client can skip one as unchanged); every commit's
  latency is kept, the rounds pooled, and p50 / p99 reported.
- ``commit per poll``: at-least-once consumption of ``--commit-records``
  (100,000) records: poll at most 500 records (confluent-kafka:
  consume(num_messages=500)), touch them, commit the position synchronously,
  repeat. The clock starts after the first non-empty poll and its commit
  (group join, offset fetch and first fetch excluded for every client) and
  stops at the last record's commit.

Targets printed with the commit tables: kpax's commit p50 within 2x
confluent-kafka's; kpax's commit-per-poll rate at least 1.0x
confluent-kafka's.

Before a throughput scenario's rounds, its topic is read whole again and again,
untimed, for ``--warmup`` seconds (15, ``--quick`` 0; by franz-go when it is a
peer, else the first peer): a fresh broker's JIT compiler otherwise compiles
its fetch path during the first rounds, on the cores the timed client needs
(an ad hoc measurement of the broker's threads in /proc: its C2 compiler took
0.25-0.5 s of CPU during each of the first four 1-partition reads, about 0.01 s
after ten untimed reads).

Rounds are interleaved (every peer once per round: ``--rounds``, 2, for
throughput; ``--commit-rounds``, 5, for the short commit runs); the best
round of each peer is kept (commit latency: all rounds' samples pooled).
``--quick``: 200,000 records, 1 partition, the commit scenarios with 50
commits and 50,000 records, 1 round.

Writes bench/results/consumer.{md,json,png} (throughput; ``--out NAME``:
NAME.{md,json,png}) and
bench/results/consumer-commit.{md,json,png} (commits), and prints the tables.

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
import uuid
from typing import Any

from bench import harness as h

PEERS = [
    "kpax sync",
    "kpax asyncio",
    "kafka-python",
    "aiokafka",
    "confluent-kafka",
    "franz-go",
    "java",
]
SCENARIOS = [f"{p}p {c}" for c in ("none", "lz4") for p in (1, 6)]
COMMIT_LATENCY = "commit latency"
COMMIT_PER_POLL = "commit per poll"
COMMIT_SCENARIOS = [COMMIT_LATENCY, COMMIT_PER_POLL]
COMMIT_PEERS = [
    "kpax sync",
    "kpax asyncio",
    "confluent-kafka",
    "kafka-python",
    "aiokafka",
    "franz-go",
]
COMMIT_REFERENCE = "confluent-kafka"
POLL_RECORDS = 500
IDLE_S = 1.0


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def commit_offsets(records: int, commits: int) -> range:
    """The offsets of the commit-latency run: a new one each time, the last its position."""
    return range(records - commits + 1, records + 1)


def parse_scenario(name: str) -> tuple[int, str]:
    m = re.fullmatch(r"(\d+)p (\w+)", name)
    if m is None:
        raise SystemExit(f"bad scenario {name!r}: expected like '1p none'")
    return int(m.group(1)), m.group(2)


# ------------------------------------------------------------------ peers (subprocess side)


def run_kpax_sync(a: argparse.Namespace) -> tuple[int, int, float]:
    import kpax

    c = kpax.Consumer(a.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([kpax.TopicPartition(a.topic, p) for p in range(a.partitions)])
    n = nbytes = 0
    want = a.records
    t0 = time.perf_counter()
    for rec in c:
        nbytes += len(rec.value)
        n += 1
        if n >= want:
            break
    elapsed = time.perf_counter() - t0
    c.close()
    return n, nbytes, elapsed


def run_kpax_asyncio(a: argparse.Namespace) -> tuple[int, int, float]:
    import kpax

    async def main() -> tuple[int, int, float]:
        async with kpax.aio.Consumer(
            a.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        ) as c:
            await c.assign([kpax.TopicPartition(a.topic, p) for p in range(a.partitions)])
            n = nbytes = 0
            t0 = time.perf_counter()
            while n < a.records:
                for rec in await c.poll(1.0, max_records=10_000):
                    nbytes += len(rec.value)
                    n += 1
            return n, nbytes, time.perf_counter() - t0

    return asyncio.run(main())


def run_kafka_python(a: argparse.Namespace) -> tuple[int, int, float]:
    import warnings

    from kafka import KafkaConsumer, TopicPartition

    warnings.simplefilter("ignore")
    c = KafkaConsumer(
        bootstrap_servers=a.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    c.assign([TopicPartition(a.topic, p) for p in range(a.partitions)])
    n = nbytes = 0
    t0 = time.perf_counter()
    while n < a.records:
        for recs in c.poll(timeout_ms=1000, max_records=10_000).values():
            for rec in recs:
                nbytes += len(rec.value)
                n += 1
    elapsed = time.perf_counter() - t0
    c.close()
    return n, nbytes, elapsed


def run_aiokafka(a: argparse.Namespace) -> tuple[int, int, float]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> tuple[int, int, float]:
        c = AIOKafkaConsumer(
            bootstrap_servers=a.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await c.start()
        try:
            c.assign([TopicPartition(a.topic, p) for p in range(a.partitions)])
            n = nbytes = 0
            t0 = time.perf_counter()
            while n < a.records:
                batches = await c.getmany(timeout_ms=1000, max_records=10_000)
                for recs in batches.values():
                    for rec in recs:
                        nbytes += len(rec.value)
                        n += 1
            return n, nbytes, time.perf_counter() - t0
        finally:
            await c.stop()

    return asyncio.run(main())


def run_confluent(a: argparse.Namespace) -> tuple[int, int, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": "bench-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in range(a.partitions)])
    n = nbytes = 0
    t0 = time.perf_counter()
    while n < a.records:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                nbytes += len(m.value())
                n += 1
    elapsed = time.perf_counter() - t0
    c.close()
    return n, nbytes, elapsed


# ------------------------------------------------------------------ commits (subprocess side)
# Each commit_* function returns what its RESULT line reports: records, nbytes, seconds,
# and latencies_ms (commit latency) or first_records_s (commit per poll: from subscribe to
# the first records, the group join included).

Commit = dict[str, Any]


def _latency_result(lat: list[float]) -> Commit:
    return {"records": len(lat), "nbytes": 0, "seconds": sum(lat) / 1000, "latencies_ms": lat}


def _loop_result(n: int, nbytes: int, t0: float, first_s: float) -> Commit:
    seconds = time.perf_counter() - t0
    return {"records": n, "nbytes": nbytes, "seconds": seconds, "first_records_s": first_s}


def commit_kpax_sync(a: argparse.Namespace) -> Commit:
    import kpax

    c = kpax.Consumer(
        a.bootstrap, group_id=a.group, auto_offset_reset="earliest", enable_auto_commit=False,
        max_poll_records=POLL_RECORDS,
    )  # fmt: skip
    try:
        t_sub = time.perf_counter()
        c.subscribe([a.topic])
        if a.mode == "commit-latency":
            n = 0
            while n < a.records:
                n += len(c.poll(1.0))
            time.sleep(IDLE_S)
            tp = kpax.TopicPartition(a.topic, 0)
            lat = []
            for off in commit_offsets(a.records, a.commits):
                t = time.perf_counter()
                c.commit({tp: off})
                lat.append((time.perf_counter() - t) * 1000)
            return _latency_result(lat)
        first = []
        while not first:
            first = c.poll(1.0)
        first_s = time.perf_counter() - t_sub
        c.commit()
        n = nbytes = 0
        t0 = time.perf_counter()
        while len(first) + n < a.records:
            recs = c.poll(1.0)
            if recs:
                for rec in recs:
                    nbytes += len(rec.value)
                n += len(recs)
                c.commit()
        return _loop_result(n, nbytes, t0, first_s)
    finally:
        c.close()


def commit_kpax_asyncio(a: argparse.Namespace) -> Commit:
    import kpax

    async def main() -> Commit:
        async with kpax.aio.Consumer(
            a.bootstrap, group_id=a.group, auto_offset_reset="earliest",
            enable_auto_commit=False, max_poll_records=POLL_RECORDS,
        ) as c:  # fmt: skip
            t_sub = time.perf_counter()
            await c.subscribe([a.topic])
            if a.mode == "commit-latency":
                n = 0
                while n < a.records:
                    n += len(await c.poll(1.0))
                await asyncio.sleep(IDLE_S)
                tp = kpax.TopicPartition(a.topic, 0)
                lat = []
                for off in commit_offsets(a.records, a.commits):
                    t = time.perf_counter()
                    await c.commit({tp: off})
                    lat.append((time.perf_counter() - t) * 1000)
                return _latency_result(lat)
            first = []
            while not first:
                first = await c.poll(1.0)
            first_s = time.perf_counter() - t_sub
            await c.commit()
            n = nbytes = 0
            t0 = time.perf_counter()
            while len(first) + n < a.records:
                recs = await c.poll(1.0)
                if recs:
                    for rec in recs:
                        nbytes += len(rec.value)
                    n += len(recs)
                    await c.commit()
            return _loop_result(n, nbytes, t0, first_s)

    return asyncio.run(main())


def commit_kafka_python(a: argparse.Namespace) -> Commit:
    import warnings

    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]

    warnings.simplefilter("ignore")
    t_sub = time.perf_counter()
    c = KafkaConsumer(
        a.topic, bootstrap_servers=a.bootstrap, group_id=a.group, auto_offset_reset="earliest",
        enable_auto_commit=False, max_poll_records=POLL_RECORDS,
    )  # fmt: skip
    try:

        def poll() -> list[Any]:
            return [r for recs in c.poll(timeout_ms=1000).values() for r in recs]

        if a.mode == "commit-latency":
            n = 0
            while n < a.records:
                n += len(poll())
            time.sleep(IDLE_S)
            tp = TopicPartition(a.topic, 0)
            lat = []
            for off in commit_offsets(a.records, a.commits):
                t = time.perf_counter()
                c.commit({tp: OffsetAndMetadata(off, None, -1)})
                lat.append((time.perf_counter() - t) * 1000)
            return _latency_result(lat)
        first: list[Any] = []
        while not first:
            first = poll()
        first_s = time.perf_counter() - t_sub
        c.commit()
        n = nbytes = 0
        t0 = time.perf_counter()
        while len(first) + n < a.records:
            recs = poll()
            if recs:
                for rec in recs:
                    nbytes += len(rec.value)
                n += len(recs)
                c.commit()
        return _loop_result(n, nbytes, t0, first_s)
    finally:
        c.close()


def commit_aiokafka(a: argparse.Namespace) -> Commit:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> Commit:
        t_sub = time.perf_counter()
        c = AIOKafkaConsumer(
            a.topic, bootstrap_servers=a.bootstrap, group_id=a.group,
            auto_offset_reset="earliest", enable_auto_commit=False,
            max_poll_records=POLL_RECORDS,
        )  # fmt: skip
        await c.start()
        try:

            async def poll() -> list[Any]:
                got = await c.getmany(timeout_ms=1000, max_records=POLL_RECORDS)
                return [r for recs in got.values() for r in recs]

            if a.mode == "commit-latency":
                n = 0
                while n < a.records:
                    n += len(await poll())
                await asyncio.sleep(IDLE_S)
                tp = TopicPartition(a.topic, 0)
                lat = []
                for off in commit_offsets(a.records, a.commits):
                    t = time.perf_counter()
                    await c.commit({tp: off})
                    lat.append((time.perf_counter() - t) * 1000)
                return _latency_result(lat)
            first: list[Any] = []
            while not first:
                first = await poll()
            first_s = time.perf_counter() - t_sub
            await c.commit()
            n = nbytes = 0
            t0 = time.perf_counter()
            while len(first) + n < a.records:
                recs = await poll()
                if recs:
                    for rec in recs:
                        nbytes += len(rec.value)
                    n += len(recs)
                    await c.commit()
            return _loop_result(n, nbytes, t0, first_s)
        finally:
            await c.stop()

    return asyncio.run(main())


def commit_confluent(a: argparse.Namespace) -> Commit:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": a.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        t_sub = time.perf_counter()
        c.subscribe([a.topic])

        def poll() -> list[Any]:
            msgs = c.consume(num_messages=POLL_RECORDS, timeout=1.0)
            for m in msgs:
                if m.error() is not None:
                    raise KafkaException(m.error())
            return msgs

        if a.mode == "commit-latency":
            n = 0
            while n < a.records:
                n += len(poll())
            time.sleep(IDLE_S)
            lat = []
            for off in commit_offsets(a.records, a.commits):
                t = time.perf_counter()
                c.commit(offsets=[TopicPartition(a.topic, 0, off)], asynchronous=False)
                lat.append((time.perf_counter() - t) * 1000)
            return _latency_result(lat)
        first: list[Any] = []
        while not first:
            first = poll()
        first_s = time.perf_counter() - t_sub
        c.commit(asynchronous=False)
        n = nbytes = 0
        t0 = time.perf_counter()
        while len(first) + n < a.records:
            msgs = poll()
            if msgs:
                for m in msgs:
                    nbytes += len(m.value())
                n += len(msgs)
                c.commit(asynchronous=False)
        return _loop_result(n, nbytes, t0, first_s)
    finally:
        c.close()


COMMIT_FUNCS = {
    "kpax sync": commit_kpax_sync,
    "kpax asyncio": commit_kpax_asyncio,
    "kafka-python": commit_kafka_python,
    "aiokafka": commit_aiokafka,
    "confluent-kafka": commit_confluent,
}


PEER_FUNCS = {
    "kpax sync": run_kpax_sync,
    "kpax asyncio": run_kpax_asyncio,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
}


def peer_main(a: argparse.Namespace) -> int:
    if a.mode != "read":
        h.emit(**COMMIT_FUNCS[a.peer](a))
        return 0
    if a.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        n, nbytes, seconds = PEER_FUNCS[a.peer](a)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        n, nbytes, seconds = PEER_FUNCS[a.peer](a)
    h.emit(records=n, nbytes=nbytes, seconds=seconds)
    return 0


# ------------------------------------------------------------------ pre-produce


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int, comp: str) -> None:
    from confluent_kafka import Producer

    rnd = random.Random(42)
    pool = [rnd.randbytes(size) for _ in range(1000)]
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": comp,
            "linger.ms": 5,
            "batch.size": 16384,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for i in range(records):
        while True:
            try:
                p.produce(topic, pool[i % 1000], partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 50_000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("pre-produce did not finish")


# ------------------------------------------------------------------ Java ConsumerPerformance


def _parse_java(stdout: str) -> dict[str, Any]:
    rows = [line for line in stdout.splitlines() if line.count(",") >= 9 and line[:1].isdigit()]
    if not rows:
        raise ValueError("no summary line")
    f = [x.strip() for x in rows[-1].split(",")]
    n = int(f[4])
    fetch_rate = float(f[9])
    return {"records": n, "bytes": int(float(f[2]) * 1024 * 1024), "seconds": n / fetch_rate}


def java_argv(a: argparse.Namespace, topic: str) -> list[str]:
    return [
        "java", "-Xmx512m", "-cp", h.java_classpath(),
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server", a.bootstrap, "--topic", topic,
        "--num-records", str(a.records), "--group", "bench-java-" + uuid.uuid4().hex[:8],
        "--timeout", "60000",
    ]  # fmt: skip


# ------------------------------------------------------------------ driver


def run_one(a: argparse.Namespace, peer: str, sc: str, topic: str, parts: int) -> h.Result:
    if peer == "java":
        return h.run_peer(java_argv(a, topic), peer=peer, scenario=sc, records=a.records,
                          timeout=a.timeout, parse=_parse_java)  # fmt: skip
    if peer == "franz-go":
        try:
            argv = [
                h.franz_binary(), "consume", "-brokers", a.bootstrap, "-topic", topic,
                "-records", str(a.records), "-partitions", str(parts),
            ]  # fmt: skip
        except Exception as exc:
            return h.make_result(peer, sc, records=a.records, error=str(exc))
        return h.run_peer(argv, peer=peer, scenario=sc, records=a.records, timeout=a.timeout)
    argv = [
        sys.executable, "-m", "bench.consumer", "--peer", peer, "--bootstrap", a.bootstrap,
        "--topic", topic, "--records", str(a.records), "--partitions", str(parts),
    ]  # fmt: skip
    return h.run_peer(argv, peer=peer, scenario=sc, records=a.records, timeout=a.timeout)


def run_commit(a: argparse.Namespace, peer: str, sc: str, topic: str, records: int) -> h.Result:
    mode = "commit-latency" if sc == COMMIT_LATENCY else "commit-loop"
    group = f"bench-commit-{uuid.uuid4().hex[:10]}"
    if peer == "franz-go":
        try:
            argv = [
                h.franz_binary(), mode, "-brokers", a.bootstrap, "-topic", topic,
                "-records", str(records), "-commits", str(a.commits), "-group", group,
            ]  # fmt: skip
        except Exception as exc:
            return h.make_result(peer, sc, records=records, error=str(exc))
    else:
        argv = [
            sys.executable, "-m", "bench.consumer", "--peer", peer, "--mode", mode,
            "--bootstrap", a.bootstrap, "--topic", topic, "--records", str(records),
            "--commits", str(a.commits), "--group", group,
        ]  # fmt: skip
    return h.run_peer(argv, peer=peer, scenario=sc, records=records, timeout=a.timeout)


def _report(sc: str, peer: str, rnd: int, res: h.Result) -> None:
    if res["error"]:
        figure = f"failed: {res['error']}"
    elif "latencies_ms" in res:
        lat = res["latencies_ms"]
        figure = f"commit p50 {h.percentile(lat, 50):.2f} ms, p99 {h.percentile(lat, 99):.2f} ms"
    else:
        figure = f"{res['records_per_s']:>12,.0f} rec/s"
    print(f"{sc:<16} {peer:<16} round {rnd}: {figure}", flush=True)


def best_rate(runs: list[h.Result]) -> h.Result:
    """The fastest of one peer's runs (a failed one if none succeeded)."""
    return max(runs, key=lambda r: r["records_per_s"] or 0)


def pooled_latency(peer: str, runs: list[h.Result]) -> h.Result:
    """One commit-latency Result from all rounds' samples (p50, p99, mean, max in ms)."""
    ok = [r for r in runs if r["error"] is None]
    if not ok:
        return runs[-1]
    lat = [x for r in ok for x in r["latencies_ms"]]
    return h.make_result(
        peer, COMMIT_LATENCY, records=len(lat), seconds=sum(lat) / 1000,
        p50_ms=round(h.percentile(lat, 50) or 0, 3), p99_ms=round(h.percentile(lat, 99) or 0, 3),
        mean_ms=round(sum(lat) / len(lat), 3), max_ms=round(max(lat), 3),
        rounds_p50_ms=[round(h.percentile(r["latencies_ms"], 50) or 0, 3) for r in ok],
        rounds=len(ok),
    )  # fmt: skip


def _ratio(x: float | None, ref: float | None) -> str:
    return f"{x / ref:.2f}x" if x and ref else ""


def render_commit_tables(results: list[h.Result], peers: list[str]) -> str:
    """Markdown: the commit-latency table and the commit-per-poll table, ratios vs
    confluent-kafka and the targets' verdicts on the kpax rows."""
    by_key = {(r["scenario"], r["peer"]): r for r in results}
    out: list[str] = []
    notes: list[str] = []
    ref = by_key.get((COMMIT_LATENCY, COMMIT_REFERENCE))
    if any(sc == COMMIT_LATENCY for sc, _ in by_key):
        ref_p50 = ref.get("p50_ms") if ref else None
        out += [
            "Commit latency (ms), idle member, a new offset each commit:",
            "",
            "| client | commits | p50 ms | p99 ms | mean ms | p50 / confluent-kafka p50 "
            "| target: p50 ≤ 2x confluent-kafka |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for peer in peers:
            r = by_key.get((COMMIT_LATENCY, peer))
            if r is None:
                continue
            if r["error"]:
                out.append(f"| {peer} | failed | | | | | |")
                notes.append(f"- {COMMIT_LATENCY} / {peer}: {r['error'][:300]}")
                continue
            ratio = r["p50_ms"] / ref_p50 if ref_p50 else None
            verdict = ""
            if peer.startswith("kpax") and ratio is not None:
                verdict = "met" if ratio <= 2.0 else "**not met**"
            out.append(
                f"| {peer} | {r['records']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
                f"| {r['mean_ms']:.2f} | {_ratio(r['p50_ms'], ref_p50)} | {verdict} |"
            )
        out.append("")
    if any(sc == COMMIT_PER_POLL for sc, _ in by_key):
        ref = by_key.get((COMMIT_PER_POLL, COMMIT_REFERENCE))
        ref_rate = ref["records_per_s"] if ref else None
        out += [
            f"Commit after each poll ({POLL_RECORDS} records a poll, synchronous commit), "
            "records/s:",
            "",
            "| client | records/s | client / confluent-kafka | target: ≥ 1.0x confluent-kafka "
            "| first records after (s) |",
            "|---|---:|---:|---|---:|",
        ]
        for peer in peers:
            r = by_key.get((COMMIT_PER_POLL, peer))
            if r is None:
                continue
            rate = r["records_per_s"]
            if r["error"]:
                notes.append(f"- {COMMIT_PER_POLL} / {peer}: {r['error'][:300]}")
            verdict = ""
            if peer.startswith("kpax") and rate and ref_rate:
                verdict = "met" if rate >= ref_rate else "**not met**"
            shown = "failed" if rate is None else f"{rate:,.0f}"
            first = r.get("first_records_s")
            first_shown = "" if first is None else f"{first:.2f}"
            out.append(
                f"| {peer} | {shown} | {_ratio(rate, ref_rate)} | {verdict} | {first_shown} |"
            )
        out.append("")
    if notes:
        out += ["Failed runs:", *notes, ""]
    return "\n".join(out)


def warm_broker(a: argparse.Namespace, peers: list[str], sc: str, topic: str, parts: int) -> None:
    """Read ``topic`` whole, untimed, for ``--warmup`` seconds (franz-go when it is a
    peer, the quickest reader, else the first peer): the broker's JIT compiles its
    fetch path before any round is timed, instead of in the first rounds, on the
    cores the timed client needs."""
    if a.warmup <= 0 or not peers:
        return
    peer = "franz-go" if "franz-go" in peers else peers[0]
    t0 = time.monotonic()
    reads = 0
    while time.monotonic() - t0 < a.warmup:
        res = run_one(a, peer, sc, topic, parts)
        reads += 1
        if res.get("error"):
            print(f"{sc}: warm-up read by {peer} failed: {res['error']}")
            return
    print(f"{sc}: broker warmed up by {reads} untimed reads ({peer}, {a.warmup:g}s)")


def driver_main(a: argparse.Namespace) -> int:
    if a.warmup is None:
        a.warmup = 0.0 if a.quick else 15.0
    if a.quick:
        a.records = min(a.records, 200_000)
        a.commits = min(a.commits, 50)
        a.commit_records = min(a.commit_records, 50_000)
        a.rounds = a.rounds or 1
        a.commit_rounds = a.commit_rounds or a.rounds
    a.rounds = a.rounds or 2
    a.commit_rounds = a.commit_rounds or 5
    if a.scenarios:
        chosen = [sc.strip() for sc in a.scenarios.split(",")]
    else:
        chosen = [s for s in SCENARIOS if s.startswith("1p")] if a.quick else list(SCENARIOS)
        chosen += COMMIT_SCENARIOS
    scenarios = [sc for sc in chosen if sc not in COMMIT_SCENARIOS]
    for sc in scenarios:
        parse_scenario(sc)
    commit_scenarios = [sc for sc in chosen if sc in COMMIT_SCENARIOS]
    peers = h.select_peers(a.peers, PEERS)
    commit_peers = [p for p in COMMIT_PEERS if p in peers]
    results: list[h.Result] = []
    commit_results: list[h.Result] = []
    load_start = _loadavg()
    with h.broker() as bootstrap:
        a.bootstrap = bootstrap
        for sc in scenarios:
            parts, comp = parse_scenario(sc)
            topic = h.make_topic(bootstrap, parts, prefix="bench-consumer")
            t0 = time.monotonic()
            fill(bootstrap, topic, a.records, a.size, parts, comp)
            print(f"{sc}: {a.records:,} records written in {time.monotonic() - t0:.1f}s")
            warm_broker(a, peers, sc, topic, parts)
            runs: dict[str, list[h.Result]] = {p: [] for p in peers}
            for rnd in range(1, a.rounds + 1):  # interleaved rounds
                for peer in peers:
                    res = run_one(a, peer, sc, topic, parts)
                    _report(sc, peer, rnd, res)
                    runs[peer].append(res)
            results.extend(best_rate(runs[p]) for p in peers)
            h.delete_topic(bootstrap, topic)
        for sc in commit_scenarios:
            records = max(1000, a.commits) if sc == COMMIT_LATENCY else a.commit_records
            topic = h.make_topic(bootstrap, 1, prefix="bench-commit")
            fill(bootstrap, topic, records, a.size, 1, "none")
            print(f"{sc}: {records:,} records written")
            runs = {p: [] for p in commit_peers}
            for rnd in range(1, a.commit_rounds + 1):
                for peer in commit_peers:
                    res = run_commit(a, peer, sc, topic, records)
                    _report(sc, peer, rnd, res)
                    runs[peer].append(res)
            h.delete_topic(bootstrap, topic)
            for peer in commit_peers:
                if sc == COMMIT_LATENCY:
                    commit_results.append(pooled_latency(peer, runs[peer]))
                else:
                    commit_results.append(best_rate(runs[peer]))
    machine = f"Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}."
    if scenarios:
        table = h.render_table(
            results, baseline="kpax sync", peers=peers, scenarios=scenarios,
            ratio_to=["confluent-kafka", "franz-go"],
        )  # fmt: skip
        print()
        print(table)
        out_arg = f" --out {a.out}" if a.out != "consumer" else ""
        header = (
            f"{a.records:,} pre-produced records of {a.size} bytes (no key) per scenario, read "
            "from the beginning by each client in its own process (assigned partitions, no "
            "group; franz-go: bench/franz; Java: ConsumerPerformance in a group, its fetch "
            "rate), every record's value touched (len(value); franz-go: len(Value); Java: its "
            f"byte count). One local broker, warmed up by {a.warmup:g}s of untimed reads per "
            f"scenario. Best of {a.rounds} interleaved rounds. {machine} "
            f"Load average (1/5/15 min) {load_start} at the start, {_loadavg()} at the end. "
            f"Reproduce: `python -m bench consumer --records {a.records} --rounds {a.rounds} "
            f"--warmup {a.warmup:g} "
            f'--scenarios "{",".join(scenarios)}"{out_arg}`.'
        )
        if not a.no_write:
            for path in h.write_results(
                a.out, table, results, title="Consumer throughput (records/s)",
                header=header, peers=peers, scenarios=scenarios,
            ):  # fmt: skip
                print("wrote", path)
    if commit_scenarios:
        table = render_commit_tables(commit_results, commit_peers)
        print()
        print(table)
        header = (
            "Every client in its own process, a member of its own fresh group on a fresh "
            "1-partition topic (subscribe, auto commit off, fetch max wait 500 ms, at most "
            f"{POLL_RECORDS} records a poll). Commit latency: {a.commits} synchronous commits "
            f"back to back per round after the member has read the topic's "
            f"{max(1000, a.commits):,} records and idled {IDLE_S:g} s (kpax, confluent-kafka, "
            "aiokafka and franz-go then hold a long-poll fetch), each of a new offset; samples "
            f"of {a.commit_rounds} interleaved round(s) pooled. Commit per poll: "
            f"{a.commit_records:,} records of {a.size} bytes, poll / touch values / commit "
            f"position, timed after the first poll and its commit (first records after: from "
            "subscribe to the first non-empty poll, group join included); best of "
            f"{a.commit_rounds} interleaved round(s). "
            f"One local broker. {machine} Reproduce: `python -m bench consumer --commit-rounds "
            f"{a.commit_rounds} --commits {a.commits} --commit-records {a.commit_records} "
            f'--scenarios "{",".join(commit_scenarios)}"`.'
        )
        if not a.no_write:
            rated = [sc for sc in commit_scenarios if sc == COMMIT_PER_POLL]
            for path in h.write_results(
                "consumer-commit", table, commit_results, title="Consumer commits",
                header=header, peers=commit_peers, scenarios=rated, chart=bool(rated),
            ):  # fmt: skip
                print("wrote", path)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench consumer", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument(
        "--quick", action="store_true",
        help="200,000 records, 1 partition; 50 commits, 50,000 commit-per-poll records; 1 round",
    )  # fmt: skip
    ap.add_argument("--peers", default="", help=f"comma-separated subset of {PEERS}")
    ap.add_argument(
        "--scenarios", default="",
        help=f"comma-separated, e.g. '1p none,6p lz4,{COMMIT_LATENCY},{COMMIT_PER_POLL}'",
    )  # fmt: skip
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds, best kept (2)")
    ap.add_argument(
        "--warmup", type=float, default=None,
        help="seconds of untimed reads per throughput scenario before its rounds (15; "
        "--quick: 0)",
    )  # fmt: skip
    ap.add_argument(
        "--commit-rounds",
        type=int,
        default=0,
        help="interleaved rounds of the commit scenarios (5)",
    )
    ap.add_argument("--commits", type=int, default=200, help="commits a commit-latency run")
    ap.add_argument(
        "--commit-records", type=int, default=100_000, help="records of the commit-per-poll run"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per peer run")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/")
    ap.add_argument(
        "--out", default="consumer", help="results name of the throughput table (<out>.*)"
    )
    # subprocess side
    ap.add_argument("--peer", choices=sorted(PEER_FUNCS), help=argparse.SUPPRESS)
    ap.add_argument(
        "--mode", choices=["read", "commit-latency", "commit-loop"], default="read",
        help=argparse.SUPPRESS,
    )  # fmt: skip
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--partitions", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.peer:
        return peer_main(a)
    return driver_main(a)


if __name__ == "__main__":
    sys.exit(main())
