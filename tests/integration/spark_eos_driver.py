"""The driver of the exactly-once kill test (test_spark_exactly_once.py), run as a
process of its own so that the test can kill it (and restart it from its checkpoint).

``python -m tests.integration.spark_eos_driver --bootstrap B --src S --dst D
--checkpoint DIR --signals DIR --master URL [--available-now]``: a streaming query
reads S with "kpax" and writes each record's value and key to D with "kpax",
``deliveryGuarantee=exactly-once``, through a sink wrapped for the test. The test
arms a kill point by creating a file in the signals directory; the task (or the
driver's commit) that reaches the point first takes the file, writes where it
is (its pid, the batch) and waits there to be killed:

- ``arm-midwrite``: a write task, after sending part of its rows (before its
  transaction is flushed and prepared);
- ``arm-aftercommit``: the driver's commit, after every task's transaction is
  committed and before Spark writes the batch to its commit log.

Without ``--available-now`` the query runs until killed (a trigger every 300 ms);
with it, it reads what is there and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.integration.spark_helpers import session_config

WAIT = 180.0  # how long a task or commit waits at its point to be killed


def take(signals: Path, arm: str) -> bool:
    """Take the armed point ``arm`` (exactly one taker wins)."""
    try:
        os.rename(signals / f"arm-{arm}", signals / f"taken-{arm}-{os.getpid()}")
    except OSError:
        return False
    return True


def reached(signals: Path, what: str) -> None:
    """Say where this process is waiting, then wait to be killed."""
    tmp = signals / f".{what}.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.rename(signals / what)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and not (signals / "release").exists():
        time.sleep(0.05)


def build(signals: Path) -> Any:
    from kpax.spark.source import KpaxDataSource
    from kpax.spark.write import KpaxStreamWriter

    class PausingWriter(KpaxStreamWriter):
        def write(self, iterator: Iterator[Any]) -> Any:
            from pyspark import TaskContext

            tc = TaskContext.get()
            assert tc is not None
            batch = tc.getLocalProperty("streaming.sql.batchId")

            def rows() -> Iterator[Any]:
                for i, b in enumerate(iterator):
                    yield b
                    if i == 0 and take(signals, "midwrite"):
                        time.sleep(0.3)  # the rows sent so far reach the broker
                        reached(signals, f"midwrite-{batch}-{tc.partitionId()}-{os.getpid()}")

            return super().write(rows())

        def commit(self, messages: list[Any], batchId: int) -> None:
            super().commit(messages, batchId)
            if take(signals, "aftercommit"):
                reached(signals, f"aftercommit-{batchId}-{os.getpid()}")

    class KillTestSink(KpaxDataSource):
        @classmethod
        def name(cls) -> str:
            return "kpaxkilltest"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            w = super().streamWriter(schema, overwrite)
            return PausingWriter(w.opts, schema)

    return KillTestSink


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "src", "dst", "checkpoint", "signals", "master"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--available-now", action="store_true")
    ap.add_argument("--max-per-trigger", default="500")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kpax.spark

    mode = "local" if args.master.startswith("local") else "standalone"
    builder = SparkSession.builder
    for k, v in session_config(mode, "kpax-eos-kill", master=args.master).items():
        builder = builder.config(k, v)
    # Several Arrow batches per write task, so a task can stop in the middle of its rows.
    builder = builder.config("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)
    signals = Path(args.signals)
    spark.dataSource.register(build(signals))
    query = (
        spark.readStream.format("kpax")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_per_trigger)
        .load()
        .selectExpr("key", "value")
        .writeStream.format("kpaxkilltest")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.dst)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        q = query.trigger(availableNow=True).start()
    else:
        q = query.trigger(processingTime="300 milliseconds").start()
    (signals / f"started-{os.getpid()}").write_text(spark.sparkContext.applicationId)
    q.awaitTermination()
    if q.exception() is not None:
        print(f"query failed: {q.exception()}", file=sys.stderr)
        sys.exit(1)
    spark.stop()


if __name__ == "__main__":
    main()
