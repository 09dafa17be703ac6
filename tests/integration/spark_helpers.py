"""Shared pieces of the Spark tests: a local[2] SparkSession with "kpax" registered,
and producing known records with kpax.Producer."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import kpax


def make_spark(app: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kpax.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)
    return spark


def spark_session(app: str) -> Iterator[Any]:
    spark = make_spark(app)
    try:
        yield spark
    finally:
        spark.stop()


def produce(
    bootstrap: str, topic: str, rows: list[tuple[int, bytes | None, bytes, Any, int]]
) -> list[Any]:
    """rows: (partition, key, value, headers, timestamp_ms) -> their RecordMetadata."""
    with kpax.Producer(bootstrap, linger_ms=2) as p:
        futs = [
            p.send(topic, v, key=k, partition=part, headers=h, timestamp=ts)
            for part, k, v, h, ts in rows
        ]
        p.flush(30)
        return [f.result(10) for f in futs]
