"""Producer throughput: kpax (sync, sync ``send_many`` and asyncio) vs kafka-python,
aiokafka, confluent-kafka, franz-go and the Java client's own ProducerPerformance, on one
broker, in one run.

Usage::

    python -m bench producer [--records 1000000] [--quick] [--rounds 2]
                             [--peers "kpax sync,franz-go"] [--java-warmup 200000]
                             [--scenarios "1p acks=1 none,6p acks=all lz4"] [--resume]

Every peer runs in its own subprocess (bench/harness.py) and produces the same
records -- ``--records`` values of ``--size`` (100) random bytes, no key -- to
a fresh topic per run, after one warm-up record (connections and metadata
ready). The clock runs from the first send to the moment every record is
acknowledged (flush). All clients get the Java 4.x defaults ``linger_ms=5``
and ``batch_size=16384`` (franz-go: ``ProducerBatchMaxBytes(16384)``) so they
build comparable batches; everything else is each client's default (so
idempotence is on for kpax, franz-go and Java with acks=all, as their defaults
say; acks=1 needs it off). Scenarios: 1 and 6 partitions x acks=1 and acks=all
x no compression and lz4.

Peers: ``kpax sync`` calls ``send`` per record; ``kpax send_many`` hands the
values to ``Producer.send_many`` in chunks of 10,000 (one BulkFuture each,
all checked); ``franz-go`` is the Go program bench/franz (built with ``go
build``; ``make bench`` builds it); ``java`` is Apache Kafka's
ProducerPerformance, run by bench/java/WarmProducerPerformance.java twice in
one JVM: a warm-up run of ``--java-warmup`` records (200,000 by default, same
topic and settings, not reported), then the timed run, so its figure is not a
cold-JIT one. (ProducerPerformance's own ``--warmup-records`` is not used: its
steady-state clock starts when the last warm-up record is queued, not sent,
so it also counts the time to drain the warm-up backlog.)

Rounds are interleaved (round 1: every peer, round 2: every peer, ...) and
the best round of each peer is kept. ``--quick``: 100,000 records, the
1-partition scenarios, 1 round. The table gives each client's records/s, MB/s,
kpax sync / client, and client / confluent-kafka and client / franz-go.

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
RATIO_TO = ["confluent-kafka", "franz-go"]
LINGER_MS = 5
BATCH_SIZE = 16384
SEND_MANY_CHUNK = 10_000
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


def run_kpax_send_many(a: argparse.Namespace, values: list[bytes]) -> float:
    import kpax

    with kpax.Producer(
        a.bootstrap, acks=a.acks, compression_type=a.compression, linger_ms=LINGER_MS,
        batch_size=BATCH_SIZE,
    ) as p:  # fmt: skip
        p.send(a.topic, WARMUP).result(30)
        send_many, topic = p.send_many, a.topic
        chunks = [values[i : i + SEND_MANY_CHUNK] for i in range(0, len(values), SEND_MANY_CHUNK)]
        t0 = time.perf_counter()
        futures = [send_many(topic, chunk) for chunk in chunks]
        p.flush()
        elapsed = time.perf_counter() - t0
        delivered = sum(f.result(30) for f in futures)
        if delivered != len(values):
            raise RuntimeError(f"send_many delivered {delivered} of {len(values)} records")
        return elapsed


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
    "kpax send_many": run_kpax_send_many,
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

_JAVA_LINE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.M)
_JAVA_WARM = h.JAVA_DIR / "WarmProducerPerformance.java"


def _java_parser(size: int) -> Any:
    def parse(stdout: str) -> dict[str, Any]:
        found = _JAVA_LINE.findall(stdout.rpartition("WARM-UP END")[2])
        if not found:
            raise ValueError("no summary line")
        n, rate = found[-1]
        return {"records": int(n), "bytes": int(n) * size, "seconds": int(n) / float(rate)}

    return parse


def java_argv(a: argparse.Namespace, topic: str, acks: str, compression: str) -> list[str]:
    props = [
        f"bootstrap.servers={a.bootstrap}",
        f"acks={acks}",
        f"compression.type={compression}",
        f"linger.ms={LINGER_MS}",
        f"batch.size={BATCH_SIZE}",
    ]
    return [
        "java", "-Xmx512m", "-cp", h.java_classpath(), str(_JAVA_WARM), str(a.java_warmup),
        "--topic", topic, "--num-records", str(a.records), "--record-size", str(a.size),
        "--throughput", "-1", "--producer-props", *props,
    ]  # fmt: skip


def franz_argv(a: argparse.Namespace, topic: str, acks: str, compression: str) -> list[str]:
    return [
        h.franz_binary(), "produce", "-brokers", a.bootstrap, "-topic", topic,
        "-records", str(a.records), "-size", str(a.size), "-acks", acks,
        "-compression", compression,
    ]  # fmt: skip


# ------------------------------------------------------------------ driver


def run_one(a: argparse.Namespace, peer: str, sc: str) -> h.Result:
    """One run of ``peer`` on a fresh topic, deleted afterwards."""
    parts, acks, comp = parse_scenario(sc)
    try:
        topic = h.make_topic(a.bootstrap, parts, prefix="bench-producer")
    except Exception as exc:  # a failed setup is a failed run, not a dead benchmark
        return h.make_result(peer, sc, records=a.records, error=repr(exc))
    try:
        return _run_on(a, peer, sc, topic, acks, comp)
    finally:
        h.delete_topic(a.bootstrap, topic)


def _run_on(
    a: argparse.Namespace, peer: str, sc: str, topic: str, acks: str, comp: str
) -> h.Result:
    try:
        if peer == "java":
            argv = java_argv(a, topic, "-1" if acks == "all" else acks, comp)
            return h.run_peer(argv, peer=peer, scenario=sc, records=a.records,
                              timeout=a.timeout, parse=_java_parser(a.size))  # fmt: skip
        if peer == "franz-go":
            argv = franz_argv(a, topic, acks, comp)
        else:
            argv = [
                sys.executable, "-m", "bench.producer", "--peer", peer,
                "--bootstrap", a.bootstrap, "--topic", topic, "--records", str(a.records),
                "--size", str(a.size), "--acks", acks, "--compression", comp,
            ]  # fmt: skip
    except Exception as exc:  # a failed setup is a failed run, not a dead benchmark
        return h.make_result(peer, sc, records=a.records, error=repr(exc))
    return h.run_peer(argv, peer=peer, scenario=sc, records=a.records, timeout=a.timeout)


def best_of(runs: list[h.Result], peers: list[str], scenarios: list[str]) -> list[h.Result]:
    """The fastest run of each (scenario, peer); a failed one when none succeeded."""
    best: dict[tuple[str, str], h.Result] = {}
    for r in runs:
        key = (r["scenario"], r["peer"])
        old = best.get(key)
        if old is None or (r["records_per_s"] or 0) > (old["records_per_s"] or 0):
            best[key] = r
    return [best[(sc, p)] for sc in scenarios for p in peers if (sc, p) in best]


def driver_main(a: argparse.Namespace) -> int:
    if a.quick:
        a.records = min(a.records, 100_000)
        a.rounds = a.rounds or 1
    a.rounds = a.rounds or 2
    scenarios = a.scenarios.split(",") if a.scenarios else (
        [s for s in SCENARIOS if s.startswith("1p")] if a.quick else SCENARIOS
    )  # fmt: skip
    for sc in scenarios:
        parse_scenario(sc)
    peers = h.select_peers(a.peers, PEERS)
    runs: list[h.Result] = h.load_partial("producer") if a.resume else []
    done = {(r["scenario"], r["peer"], r.get("round")) for r in runs}
    with h.broker() as bootstrap:
        a.bootstrap = bootstrap
        for sc in scenarios:
            for rnd in range(1, a.rounds + 1):  # interleaved rounds
                for peer in peers:
                    if (sc, peer, rnd) in done:
                        continue
                    res = run_one(a, peer, sc)
                    res["round"] = rnd
                    rate = res["records_per_s"]
                    print(
                        f"{sc:<20} {peer:<16} round {rnd}: "
                        + (f"{rate:>12,.0f} rec/s" if rate else f"failed: {res['error']}"),
                        flush=True,
                    )
                    runs.append(res)
                    h.save_partial("producer", runs)
    results = best_of(runs, peers, scenarios)
    table = h.render_table(
        results, baseline="kpax sync", peers=peers, scenarios=scenarios, ratio_to=RATIO_TO
    )
    print()
    print(table)
    if "java" not in peers:
        java_note = ""
    elif a.java_warmup > 0:
        java_note = (
            f" Java: ProducerPerformance warmed in the same JVM by a first, untimed run of "
            f"{a.java_warmup:,} records (bench/java/WarmProducerPerformance.java)."
        )
    else:
        java_note = " Java: ProducerPerformance in a cold JVM (--java-warmup 0)."
    scenario_arg = f' --scenarios "{",".join(scenarios)}"' if a.scenarios else ""
    header = (
        f"{a.records:,} records of {a.size} bytes (no key) per run, fresh topic per run, one "
        f"local broker, every client with linger_ms={LINGER_MS} and batch_size={BATCH_SIZE}; "
        f"time from first send to all acknowledged. Best of {a.rounds} interleaved rounds. "
        f"kpax send_many: Producer.send_many in chunks of {SEND_MANY_CHUNK:,} values. "
        f"franz-go: bench/franz (franz-go v1.22.2).{java_note} "
        f"Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}. "
        f"Reproduce: `make bench-franz && python -m bench producer --records {a.records} "
        f"--rounds {a.rounds}{scenario_arg}`."
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
    ap.add_argument(
        "--quick", action="store_true", help="100,000 records, 1-partition scenarios, 1 round"
    )
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds, best kept (2)")
    ap.add_argument(
        "--java-warmup", type=int, default=200_000, help="records of Java's untimed first run"
    )
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
