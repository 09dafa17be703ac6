"""Benchmark: the "kpax" PySpark data source vs Spark's built-in Kafka source, in one run.

``python -m bench.spark [--records N] [--rounds R]``: one local broker (or
``KPAX_TEST_BOOTSTRAP``), one SparkSession ``local[2]`` with both sources
(spark-sql-kafka-0-10_2.13 of the installed Spark version from Maven Central
via ``spark.jars.packages``). Scenarios, each timed around the Spark action,
best of R interleaved rounds, after a small warm-up read/write per source
(JVM classes, Python workers):

- read N 100-byte records from a 6-partition topic, ``count()``;
- the same, ``groupBy("partition").count()``;
- write N rows (100-byte binary ``value``) to a fresh 6-partition topic.

Results: bench/results/spark.{md,json,png} (shared harness, bench/harness.py).

Imports: bench.harness, kpax, pyspark (in main).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import harness as h

PEERS = ["kpax", "spark kafka (JVM)"]
FORMATS = {"kpax": "kpax", "spark kafka (JVM)": "kafka"}
SIZE = 100


def _produce(bootstrap: str, topic: str, n: int) -> None:
    import kpax

    value = b"x" * SIZE
    with kpax.Producer(bootstrap, linger_ms=20, batch_size=262144) as p:
        send = p.send
        for _ in range(n):
            send(topic, value)
        p.flush(300)


def _token_provider_jar(version: str) -> str:
    """spark-token-provider-kafka from Maven Central through Maven (the Maven Central
    mirror reachable here lacks recent versions, so an older one is fetched on its own)."""
    name = "spark-token-provider-kafka-0-10_2.13"
    jar = Path.home() / f".m2/repository/org/apache/spark/{name}/{version}/{name}-{version}.jar"
    if not jar.exists():
        subprocess.run(
            [
                "mvn",
                "-q",
                "dependency:get",
                f"-Dartifact=org.apache.spark:{name}:{version}",
                "-Dtransitive=false",
            ],
            check=True,
        )
    return str(jar)


def _session(kafka_version: str, token_version: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kpax.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kpax-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "2")
        .config(
            "spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{kafka_version}"
        )
        .config("spark.jars.excludes", "org.apache.spark:spark-token-provider-kafka-0-10_2.13")
        .config("spark.jars", _token_provider_jar(token_version))
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)
    return spark


def _read(spark: Any, fmt: str, bootstrap: str, topic: str) -> Any:
    return (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--kafka-version",
        default="4.2.0",
        help="spark-sql-kafka-0-10_2.13 version (Maven Central here has none for 4.3.x)",
    )
    ap.add_argument("--token-provider-version", default="4.0.0")
    args = ap.parse_args()
    n = args.records
    results: list[h.Result] = []
    scenarios = ["read 6p count()", "read 6p groupBy(partition).count()", "write 6p"]
    with h.broker() as bootstrap:
        topic = h.make_topic(bootstrap, partitions=6)
        t, _ = _timed(lambda: _produce(bootstrap, topic, n))
        print(f"produced {n} records in {t:.1f}s", file=sys.stderr)
        small = h.make_topic(bootstrap, partitions=2)
        _produce(bootstrap, small, 1000)
        spark = _session(args.kafka_version, args.token_provider_version)
        src = spark.range(n, numPartitions=2).selectExpr(
            f"cast(concat(lpad(cast(id AS string), 12, '0'), repeat('x', {SIZE - 12}))"
            " AS binary) AS value"
        )
        for peer in PEERS:  # warm-up: classes, Python workers, connections
            fmt = FORMATS[peer]
            _read(spark, fmt, bootstrap, small).count()
            spark.range(100).selectExpr("cast(id AS string) AS value").write.format(fmt).option(
                "kafka.bootstrap.servers", bootstrap
            ).option("topic", small).mode("append").save()
        best: dict[tuple[str, str], float] = {}
        for rnd in range(args.rounds):
            for peer in PEERS:
                fmt = FORMATS[peer]
                t, count = _timed(lambda: _read(spark, fmt, bootstrap, topic).count())  # noqa: B023
                assert count == n, (peer, count)
                best[(peer, scenarios[0])] = min(best.get((peer, scenarios[0]), 1e9), t)
                t, rows = _timed(
                    lambda: (
                        _read(spark, fmt, bootstrap, topic)  # noqa: B023
                        .groupBy("partition")
                        .count()
                        .collect()
                    )
                )
                assert sum(r["count"] for r in rows) == n, (peer, rows)
                best[(peer, scenarios[1])] = min(best.get((peer, scenarios[1]), 1e9), t)
                out = h.make_topic(bootstrap, partitions=6)
                t, _ = _timed(
                    lambda: (
                        src.write.format(fmt)  # noqa: B023
                        .option("kafka.bootstrap.servers", bootstrap)
                        .option("topic", out)  # noqa: B023
                        .mode("append")
                        .save()
                    )
                )
                best[(peer, scenarios[2])] = min(best.get((peer, scenarios[2]), 1e9), t)
                print(f"round {rnd} {peer}: done", file=sys.stderr)
        spark.stop()
    for (peer, scenario), secs in best.items():
        results.append(h.make_result(peer, scenario, records=n, nbytes=n * SIZE, seconds=secs))
    md = h.render_table(results, baseline="kpax", peers=PEERS, scenarios=scenarios)
    print(md)
    import pyspark

    h.write_results(
        "spark",
        md,
        results,
        title=f"PySpark data source: kpax vs built-in Kafka source ({n:,} records)",
        header=(
            f"`python -m bench.spark --records {n} --rounds {args.rounds}`: pyspark "
            f"{pyspark.__version__} with spark-sql-kafka {args.kafka_version} (token provider "
            f"{args.token_provider_version}; Maven Central here has no {pyspark.__version__} "
            f"connector), local[2], one broker, 100-byte values, best of "
            f"{args.rounds} interleaved rounds after a warm-up.\n\n"
        ),
        peers=PEERS,
        scenarios=scenarios,
    )


if __name__ == "__main__":
    main()
