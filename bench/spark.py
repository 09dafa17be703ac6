"""Benchmark: the "kpax" PySpark data source vs Spark's built-in Kafka source, in one run.

``python -m bench.spark [--records N] [--rounds R] [--scenarios a,b]``: one local
broker (or ``KPAX_TEST_BOOTSTRAP``), Spark ``local[2]``, the JVM connector
spark-sql-kafka-0-10_2.13 (``--kafka-version``, default 4.2.0: Maven Central has
no 4.3.x) with its own token provider, resolved from Maven Central with
``spark.jars.packages`` (``--packages``). Scenarios, each timed around the Spark
action, best of R interleaved rounds (kpax first in even rounds, the JVM
connector first in odd ones):

- ``first write``: a new SparkSession (its own Python process and JVM, one per
  peer per round), then its first action, writing 10,000 rows (100-byte values)
  to a fresh 6-partition topic; the time of that write alone. A third peer,
  ``python no-op sink`` (bench/spark_noop.py), is a Python data source whose
  tasks discard their rows: what any Python sink pays on a first write;
- ``stream 20k micro-batches``: a streaming query reading 200,000 records of a
  6-partition topic in micro-batches of 20,000 (``maxOffsetsPerTrigger``,
  ``Trigger.AvailableNow``) into the ``noop`` sink: rows / time from
  ``start()`` to the end; ``... after the first`` is the same query from the
  second batch's trigger on (its rows / that time: the steady state, without
  the query's start and its first batch);
- ``read 6p count()`` / ``read 6p groupBy(partition).count()``: N 100-byte
  records of a 6-partition topic (after a small warm-up read and write per
  source, in the shared session);
- ``write 6p``: N rows (100-byte binary ``value``) to a fresh 6-partition topic.

Results: bench/results/spark.{md,json,png} (shared harness, bench/harness.py).

Imports: bench.harness, kpax, pyspark (in main and the peer processes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from bench import harness as h

PEERS = ["kpax", "spark kafka (JVM)"]
NOOP = "python no-op sink"
FORMATS = {"kpax": "kpax", "spark kafka (JVM)": "kafka", NOOP: "pynoop"}
SIZE = 100
FIRST_WRITE_ROWS = 10_000
STREAM_ROWS = 200_000
STREAM_BATCH = 20_000
SCENARIOS = [
    "first write",
    "stream 20k micro-batches",
    "stream 20k micro-batches after the first",
    "read 6p count()",
    "read 6p groupBy(partition).count()",
    "write 6p",
]


def _produce(bootstrap: str, topic: str, n: int) -> None:
    import kpax

    value = b"x" * SIZE
    with kpax.Producer(bootstrap, linger_ms=20, batch_size=262144) as p:
        send = p.send
        for _ in range(n):
            send(topic, value)
        p.flush(300)


def _session(fmt_needed: set[str], kafka_version: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kpax.spark

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("kpax-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
    )
    if "kafka" in fmt_needed:
        builder = builder.config(
            "spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{kafka_version}"
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)
    if "pynoop" in fmt_needed:
        from bench.spark_noop import NoopDataSource

        spark.dataSource.register(NoopDataSource)
    return spark


def _read(spark: Any, fmt: str, bootstrap: str, topic: str) -> Any:
    return (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )


def _rows(spark: Any, n: int, partitions: int = 2) -> Any:
    return spark.range(n, numPartitions=partitions).selectExpr(
        f"cast(concat(lpad(cast(id AS string), 12, '0'), repeat('x', {SIZE - 12}))"
        " AS binary) AS value"
    )


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def first_write_peer(args: argparse.Namespace) -> None:
    """In a process of its own: a new session, then its first write, timed."""
    fmt = FORMATS[args.peer]
    if fmt == "pynoop":  # Spark's Python workers import bench.spark_noop
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p
        )
    spark = _session({fmt}, args.kafka_version)
    df = _rows(spark, FIRST_WRITE_ROWS)
    t, _ = _timed(
        lambda: (
            df.write.format(fmt)
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.topic)
            .mode("append")
            .save()
        )
    )
    spark.stop()
    h.emit(records=FIRST_WRITE_ROWS, nbytes=FIRST_WRITE_ROWS * SIZE, seconds=t)


def _stream(spark: Any, fmt: str, bootstrap: str, topic: str) -> tuple[float, int, float, int]:
    """Time and rows of the whole query, then of its batches after the first (from
    the second batch's trigger to the end)."""
    ck = tempfile.mkdtemp(prefix="kpax-bench-ck-")
    try:
        t0 = time.perf_counter()
        started = time.time()
        q = (
            spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(STREAM_BATCH))
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", ck)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        elapsed = time.perf_counter() - t0
        end = time.time()
        if q.exception() is not None:
            raise RuntimeError(f"{fmt} stream failed: {q.exception()}")
        progress = [p for p in q.recentProgress if p["numInputRows"]]
        rows = sum(p["numInputRows"] for p in progress)
        later = progress[1:]
        steady = end - _epoch(later[0]["timestamp"]) if later else 0.0
        first = _epoch(progress[0]["timestamp"]) if progress else end
        print(
            f"{fmt} stream: {elapsed:.2f}s, {first - started:.2f}s from start() to the "
            f"first batch's trigger, {steady:.2f}s for the batches after the first",
            file=sys.stderr,
        )
        return elapsed, rows, steady, sum(p["numInputRows"] for p in later)
    finally:
        shutil.rmtree(ck, ignore_errors=True)


def _epoch(timestamp: str) -> float:
    """A progress timestamp (``2026-11-26T19:11:34.546Z``) as seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument(
        "--kafka-version",
        default="4.2.0",
        help="spark-sql-kafka-0-10_2.13 version (Maven Central here has none for 4.3.x)",
    )
    ap.add_argument("--no-write", action="store_true", help="leave bench/results/ alone")
    # one peer's first write, in a process of its own (run by main)
    ap.add_argument("--first-write-peer", dest="peer", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        first_write_peer(args)
        return
    h.compile_sources()  # Spark's Python workers import kpax: from bytecode, as installed
    wanted = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenarios {unknown}; choose from {SCENARIOS}")
    pair = ["stream 20k micro-batches", "stream 20k micro-batches after the first"]
    if any(s in wanted for s in pair):
        wanted.extend(pair)  # (both come out of one query)
    scenarios = [s for s in SCENARIOS if s in wanted]
    n = args.records
    best: dict[tuple[str, str], h.Result] = {}

    def keep(res: h.Result) -> None:
        key = (res["peer"], res["scenario"])
        old = best.get(key)
        if old is None or old["error"] or (not res["error"] and res["seconds"] < old["seconds"]):
            best[key] = res

    with h.broker() as bootstrap:
        big = stream_topic = None
        if any(s.startswith("read") for s in scenarios):
            big = h.make_topic(bootstrap, partitions=6)
            t, _ = _timed(lambda: _produce(bootstrap, big, n))
            print(f"produced {n} records in {t:.1f}s", file=sys.stderr)
        if "stream 20k micro-batches" in scenarios:
            stream_topic = h.make_topic(bootstrap, partitions=6)
            _produce(bootstrap, stream_topic, STREAM_ROWS)
        for rnd in range(args.rounds):
            order = PEERS if rnd % 2 == 0 else PEERS[::-1]
            if "first write" in scenarios:
                for peer in [*order, NOOP]:
                    topic = h.make_topic(bootstrap, partitions=6)
                    keep(
                        h.run_peer(
                            [
                                sys.executable,
                                "-m",
                                "bench.spark",
                                "--first-write-peer",
                                peer,
                                "--bootstrap",
                                bootstrap,
                                "--topic",
                                topic,
                                "--kafka-version",
                                args.kafka_version,
                            ],
                            peer=peer,
                            scenario="first write",
                            records=FIRST_WRITE_ROWS,
                            timeout=900,
                        )
                    )
            print(f"round {rnd}: first write done", file=sys.stderr)
        shared = [
            s
            for s in scenarios
            if s not in ("first write", "stream 20k micro-batches after the first")
        ]
        if shared:
            spark = _session({"kpax", "kafka"}, args.kafka_version)
            small = h.make_topic(bootstrap, partitions=2)
            _produce(bootstrap, small, 1000)
            for peer in PEERS:  # warm-up: classes, Python workers, connections
                fmt = FORMATS[peer]
                _read(spark, fmt, bootstrap, small).count()
                spark.range(100).selectExpr("cast(id AS string) AS value").write.format(fmt).option(
                    "kafka.bootstrap.servers", bootstrap
                ).option("topic", small).mode("append").save()
            src = _rows(spark, n)
            for rnd in range(args.rounds):
                for peer in PEERS if rnd % 2 == 0 else PEERS[::-1]:
                    fmt = FORMATS[peer]
                    for sc in shared:
                        for res in _run_shared(
                            spark, sc, peer, fmt, bootstrap, big, stream_topic, src, n
                        ):
                            keep(res)
                    print(f"round {rnd} {peer}: done", file=sys.stderr)
            spark.stop()
    results = list(best.values())
    md = h.render_table(
        results,
        baseline="kpax",
        peers=[*PEERS, NOOP],
        scenarios=scenarios,
        ratio_to=["spark kafka (JVM)"],
    )
    print(md)
    if args.no_write:
        return
    import pyspark

    h.write_results(
        "spark",
        md,
        results,
        title="PySpark data source: kpax vs built-in Kafka source",
        header=(
            f"`python -m bench spark --records {n} --rounds {args.rounds}`: pyspark "
            f"{pyspark.__version__} with spark-sql-kafka {args.kafka_version} and its token "
            f"provider (--packages from Maven Central; there is no {pyspark.__version__} "
            f"connector there), local[2], one broker, 100-byte values, best of "
            f"{args.rounds} interleaved rounds. first write: a new session per run, its "
            f"first action ({FIRST_WRITE_ROWS:,} rows), also for a Python data source that "
            f"discards its rows ({NOOP}); stream: {STREAM_ROWS:,} records in "
            f"micro-batches of {STREAM_BATCH:,} to the noop sink, the whole query and its "
            f"batches after the first.\n\n"
        ),
        peers=[*PEERS, NOOP],
        scenarios=scenarios,
    )


def _run_shared(
    spark: Any,
    scenario: str,
    peer: str,
    fmt: str,
    bootstrap: str,
    big: str | None,
    stream_topic: str | None,
    src: Any,
    n: int,
) -> list[h.Result]:
    try:
        if scenario == "stream 20k micro-batches":
            assert stream_topic is not None
            t, rows, steady, later = _stream(spark, fmt, bootstrap, stream_topic)
            assert rows == STREAM_ROWS, (peer, rows)
            return [
                h.make_result(peer, scenario, records=rows, nbytes=rows * SIZE, seconds=t),
                h.make_result(
                    peer,
                    f"{scenario} after the first",
                    records=later,
                    nbytes=later * SIZE,
                    seconds=steady,
                ),
            ]
        if scenario == "read 6p count()":
            assert big is not None
            t, count = _timed(lambda: _read(spark, fmt, bootstrap, big).count())
            assert count == n, (peer, count)
        elif scenario == "read 6p groupBy(partition).count()":
            assert big is not None
            t, rows = _timed(
                lambda: _read(spark, fmt, bootstrap, big).groupBy("partition").count().collect()
            )
            assert sum(r["count"] for r in rows) == n, (peer, rows)
        else:
            out = h.make_topic(bootstrap, partitions=6)
            t, _ = _timed(
                lambda: (
                    src.write.format(fmt)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", out)
                    .mode("append")
                    .save()
                )
            )
        return [h.make_result(peer, scenario, records=n, nbytes=n * SIZE, seconds=t)]
    except Exception as exc:
        return [h.make_result(peer, scenario, records=n, error=f"{type(exc).__name__}: {exc}")]


if __name__ == "__main__":
    main()
