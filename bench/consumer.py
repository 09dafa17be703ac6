"""Consumer throughput: kpax (sync and asyncio) vs kafka-python, aiokafka, confluent-kafka
and the Java client's own ConsumerPerformance, on one broker, in one run.

Usage::

    python -m bench consumer [--records 1000000] [--quick] [--peers kpax-sync,aiokafka]
                             [--scenarios "1p none,6p lz4"]

For each scenario (1 and 6 partitions x no compression and lz4) one fresh
topic is filled once with ``--records`` values of ``--size`` (100) random
bytes (confluent-kafka producer, linger.ms=5, batch.size=16384: Java's
defaults), then every peer, in its own subprocess (bench/harness.py), reads
the whole topic from the beginning with manually assigned partitions (no
group, no commits), touching every record's value. The clock starts after
the client is connected and the partitions are assigned, just before the
first poll, and stops when the last record arrives. Python peers use their
batch APIs (kpax sync: iteration; kpax asyncio and kafka-python: poll;
aiokafka: getmany; confluent-kafka: consume(1000)). Java's
ConsumerPerformance joins a group; its ``fetch.nMsg.sec`` (rate excluding
the group join) is reported. ``--quick``: 200,000 records, 1 partition.

Writes bench/results/consumer.{md,json,png} and prints the table.

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

PEERS = ["kpax sync", "kpax asyncio", "kafka-python", "aiokafka", "confluent-kafka", "java"]
SCENARIOS = [f"{p}p {c}" for c in ("none", "lz4") for p in (1, 6)]


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


PEER_FUNCS = {
    "kpax sync": run_kpax_sync,
    "kpax asyncio": run_kpax_asyncio,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
}


def peer_main(a: argparse.Namespace) -> int:
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
    argv = [
        sys.executable, "-m", "bench.consumer", "--peer", peer, "--bootstrap", a.bootstrap,
        "--topic", topic, "--records", str(a.records), "--partitions", str(parts),
    ]  # fmt: skip
    return h.run_peer(argv, peer=peer, scenario=sc, records=a.records, timeout=a.timeout)


def driver_main(a: argparse.Namespace) -> int:
    if a.quick:
        a.records = min(a.records, 200_000)
    scenarios = a.scenarios.split(",") if a.scenarios else (
        [s for s in SCENARIOS if s.startswith("1p")] if a.quick else SCENARIOS
    )  # fmt: skip
    peers = a.peers.split(",") if a.peers else PEERS
    results: list[h.Result] = []
    with h.broker() as bootstrap:
        a.bootstrap = bootstrap
        for sc in scenarios:
            parts, comp = parse_scenario(sc)
            topic = h.make_topic(bootstrap, parts, prefix="bench-consumer")
            t0 = time.monotonic()
            fill(bootstrap, topic, a.records, a.size, parts, comp)
            print(f"{sc}: {a.records:,} records written in {time.monotonic() - t0:.1f}s")
            best: dict[str, h.Result] = {}
            for rnd in range(a.rounds):  # interleaved rounds, best of each peer kept
                for peer in peers:
                    res = run_one(a, peer, sc, topic, parts)
                    rate = res["records_per_s"]
                    print(
                        f"{sc:<10} {peer:<16} round {rnd + 1}: "
                        + (f"{rate:>12,.0f} rec/s" if rate else f"failed: {res['error']}"),
                        flush=True,
                    )
                    old = best.get(peer)
                    if old is None or (rate or 0) > (old["records_per_s"] or 0):
                        best[peer] = res
            results.extend(best[p] for p in peers)
    table = h.render_table(results, baseline="kpax sync", peers=peers, scenarios=scenarios)
    print()
    print(table)
    header = (
        f"{a.records:,} pre-produced records of {a.size} bytes (no key) per scenario, read "
        "from the beginning by each client in its own process (assigned partitions, no "
        "group; Java: ConsumerPerformance in a group, its fetch rate). One local broker. "
        f"Best of {a.rounds} interleaved rounds. Machine: {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}. "
        f"Reproduce: `python -m bench consumer --records {a.records}`."
    )
    if not a.no_write:
        for path in h.write_results(
            "consumer", table, results, title="Consumer throughput (records/s)", header=header,
            peers=peers, scenarios=scenarios,
        ):  # fmt: skip
            print("wrote", path)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench consumer", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="200,000 records, 1 partition")
    ap.add_argument("--peers", default="", help=f"comma-separated subset of {PEERS}")
    ap.add_argument("--scenarios", default="", help="comma-separated, e.g. '1p none,6p lz4'")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (best kept)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per peer run")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/")
    # subprocess side
    ap.add_argument("--peer", choices=sorted(PEER_FUNCS), help=argparse.SUPPRESS)
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
