"""Producer throughput: kpax (sync and asyncio) vs kafka-python, aiokafka, confluent-kafka
and the Java client's own ProducerPerformance, on one broker, in one run.

Usage::

    python -m bench producer [--records 1000000] [--quick] [--peers kpax-sync,aiokafka]
                             [--scenarios "1p acks=1 none,6p acks=all lz4"] [--resume]

Every peer runs in its own subprocess (bench/harness.py) and produces the same
records -- ``--records`` values of ``--size`` (100) random bytes, no key -- to
a fresh topic per run, after one warm-up record (connections and metadata
ready). The clock runs from the first send to the moment every record is
acknowledged (flush). All clients get the Java 4.x defaults ``linger_ms=5``
and ``batch_size=16384`` so they build comparable batches; everything else is
each client's default (so idempotence is on for kpax and Java with
acks=all, as their defaults say). Scenarios: 1 and 6 partitions x acks=1 and
acks=all x no compression and lz4. ``--quick`` runs 100,000 records and only
the 1-partition scenarios.

Writes bench/results/producer.{md,json,png} and prints the table.

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

PEERS = ["kpax sync", "kpax asyncio", "kafka-python", "aiokafka", "confluent-kafka", "java"]
SCENARIOS = [f"{p}p acks={a} {c}" for c in ("none", "lz4") for a in ("1", "all") for p in (1, 6)]
LINGER_MS = 5
BATCH_SIZE = 16384
WARMUP = b"warm-up"


def _values(n: int, size: int) -> list[bytes]:
    rnd = random.Random(42)
    pool = [rnd.randbytes(size) for _ in range(min(n, 10_000))]
    return [pool[i % len(pool)] for i in range(n)]


def parse_scenario(name: str) -> tuple[int, str, str]:
    m = re.fullmatch(r"(\d+)p acks=(1|all|0) (\w+)", name)
    if m is None:
        raise SystemExit(f"bad scenario {name!r}: expected like '1p acks=1 none'")
    return int(m.group(1)), m.group(2), m.group(3)


# ------------------------------------------------------------------ peers (subprocess side)


def run_kpax_sync(a: argparse.Namespace, values: list[bytes]) -> float:
    import kpax

    with kpax.Producer(
        a.bootstrap, acks=a.acks, compression_type=a.compression, linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
    ) as p:  # fmt: skip
        p.send(a.topic, WARMUP).result(30)
        send, topic = p.send, a.topic
        t0 = time.perf_counter()
        for v in values:
            send(topic, v)
        p.flush()
        return time.perf_counter() - t0


def run_kpax_asyncio(a: argparse.Namespace, values: list[bytes]) -> float:
    import kpax

    async def main() -> float:
        async with kpax.aio.Producer(
            a.bootstrap, acks=a.acks, compression_type=a.compression, linger_ms=LINGER_MS,
            batch_size=BATCH_SIZE,
        ) as p:  # fmt: skip
            await p.send_and_wait(a.topic, WARMUP)
            send, topic = p.send, a.topic
            t0 = time.perf_counter()
            for v in values:
                await send(topic, v)
            await p.flush()
            return time.perf_counter() - t0

    return asyncio.run(main())


def run_kafka_python(a: argparse.Namespace, values: list[bytes]) -> float:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    acks: Any = "all" if a.acks == "all" else int(a.acks)
    comp = None if a.compression == "none" else a.compression
    p = KafkaProducer(
        bootstrap_servers=a.bootstrap, acks=acks, compression_type=comp, linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
    )  # fmt: skip
    p.send(a.topic, WARMUP).get(30)
    send, topic = p.send, a.topic
    t0 = time.perf_counter()
    for v in values:
        send(topic, v)
    p.flush()
    elapsed = time.perf_counter() - t0
    p.close()
    return elapsed


def run_aiokafka(a: argparse.Namespace, values: list[bytes]) -> float:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    acks: Any = "all" if a.acks == "all" else int(a.acks)
    comp = None if a.compression == "none" else a.compression

    async def main() -> float:
        p = AIOKafkaProducer(
            bootstrap_servers=a.bootstrap, acks=acks, compression_type=comp,
            linger_ms=LINGER_MS, max_batch_size=BATCH_SIZE,
        )  # fmt: skip
        await p.start()
        try:
            await p.send_and_wait(a.topic, WARMUP)
            send, topic = p.send, a.topic
            t0 = time.perf_counter()
            for v in values:
                await send(topic, v)
            await p.flush()
            return time.perf_counter() - t0
        finally:
            await p.stop()

    return asyncio.run(main())


def run_confluent(a: argparse.Namespace, values: list[bytes]) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": a.bootstrap,
            "acks": "all" if a.acks == "all" else a.acks,
            "compression.type": a.compression,
            "linger.ms": LINGER_MS,
            "batch.size": BATCH_SIZE,
        }
    )
    p.produce(a.topic, WARMUP)
    p.flush(30)
    produce, poll, topic = p.produce, p.poll, a.topic
    t0 = time.perf_counter()
    for v in values:
        while True:
            try:
                produce(topic, v)
                break
            except BufferError:  # librdkafka's queue is full: serve delivery reports
                poll(0.005)
    p.flush()
    return time.perf_counter() - t0


PEER_FUNCS = {
    "kpax sync": run_kpax_sync,
    "kpax asyncio": run_kpax_asyncio,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
}


def peer_main(a: argparse.Namespace) -> int:
    values = _values(a.records, a.size)
    if a.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        seconds = PEER_FUNCS[a.peer](a, values)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        seconds = PEER_FUNCS[a.peer](a, values)
    h.emit(records=a.records, nbytes=a.records * a.size, seconds=seconds)
    return 0


# ------------------------------------------------------------------ Java ProducerPerformance

_JAVA_LINE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", re.M)


def _parse_java(stdout: str) -> dict[str, Any]:
    found = _JAVA_LINE.findall(stdout)
    if not found:
        raise ValueError("no summary line")
    n, rate, _mbs = found[-1]
    return {"records": int(n), "bytes": int(n) * 100, "seconds": int(n) / float(rate)}


def java_argv(a: argparse.Namespace, topic: str, acks: str, compression: str) -> list[str]:
    props = [
        f"bootstrap.servers={a.bootstrap}",
        f"acks={acks}",
        f"compression.type={compression}",
        f"linger.ms={LINGER_MS}",
        f"batch.size={BATCH_SIZE}",
    ]
    return [
        "java", "-Xmx512m", "-cp", h.java_classpath(),
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(a.records), "--record-size", str(a.size),
        "--throughput", "-1", "--producer-props", *props,
    ]  # fmt: skip


# ------------------------------------------------------------------ driver


def driver_main(a: argparse.Namespace) -> int:
    if a.quick:
        a.records = min(a.records, 100_000)
    scenarios = a.scenarios.split(",") if a.scenarios else (
        [s for s in SCENARIOS if s.startswith("1p")] if a.quick else SCENARIOS
    )  # fmt: skip
    peers = a.peers.split(",") if a.peers else PEERS
    results: list[h.Result] = h.load_partial("producer") if a.resume else []
    done = {(r["scenario"], r["peer"]) for r in results}
    with h.broker() as bootstrap:
        a.bootstrap = bootstrap
        for sc in scenarios:
            parts, acks, comp = parse_scenario(sc)
            for peer in peers:
                if (sc, peer) in done:
                    continue
                try:
                    topic = h.make_topic(bootstrap, parts, prefix="bench-producer")
                except Exception as exc:  # a failed setup is a failed run, not a dead benchmark
                    results.append(h.make_result(peer, sc, records=a.records, error=repr(exc)))
                    continue
                if peer == "java":
                    argv = java_argv(a, topic, "-1" if acks == "all" else acks, comp)
                    res = h.run_peer(argv, peer=peer, scenario=sc, records=a.records,
                                     timeout=a.timeout, parse=_parse_java)  # fmt: skip
                else:
                    argv = [
                        sys.executable, "-m", "bench.producer", "--peer", peer,
                        "--bootstrap", bootstrap, "--topic", topic, "--records", str(a.records),
                        "--size", str(a.size), "--acks", acks, "--compression", comp,
                    ]  # fmt: skip
                    res = h.run_peer(argv, peer=peer, scenario=sc, records=a.records,
                                     timeout=a.timeout)  # fmt: skip
                rate = res["records_per_s"]
                print(
                    f"{sc:<20} {peer:<16} "
                    + (f"{rate:>12,.0f} rec/s" if rate else f"failed: {res['error']}"),
                    flush=True,
                )
                results.append(res)
                h.save_partial("producer", results)
    table = h.render_table(results, baseline="kpax sync", peers=peers, scenarios=scenarios)
    print()
    print(table)
    header = (
        f"{a.records:,} records of {a.size} bytes (no key) per run, fresh topic per run, one "
        f"local broker, every client with linger_ms={LINGER_MS} and batch_size={BATCH_SIZE}; "
        f"time from first send to all acknowledged. Machine: {os.cpu_count()} cores, Python "
        f"{sys.version.split()[0]}. Reproduce: `python -m bench producer --records {a.records}`."
    )
    if not a.no_write:
        for path in h.write_results(
            "producer", table, results, title="Producer throughput (records/s)", header=header,
            peers=peers, scenarios=scenarios,
        ):  # fmt: skip
            print("wrote", path)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench producer", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="100,000 records, 1-partition scenarios")
    ap.add_argument("--peers", default="", help=f"comma-separated subset of {PEERS}")
    ap.add_argument("--scenarios", default="", help="comma-separated, e.g. '1p acks=1 none'")
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
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.peer:
        return peer_main(a)
    return driver_main(a)


if __name__ == "__main__":
    sys.exit(main())
