"""Several "kpax" streaming queries in one Spark application at once, on local[2]
and on the 2-core standalone cluster (test_spark_cluster.py: two 1-core
executors): each completes every micro-batch and reads and writes every record
(issue 31 saw two kpax queries complete no micro-batch in ~100 s beside two JVM
Kafka queries)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import kpax
from kpax.testing.pytest_plugin import create_topic
from tests.integration.spark_helpers import produce
from tests.wait import eventually

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _count(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> int:
    with kpax.Admin(bootstrap) as admin:
        ends = admin.list_offsets(
            {kpax.TopicPartition(topic, p): "latest" for p in range(2)},
            isolation_level=isolation,
        )
    return sum(v.offset for v in ends.values())


@pytest.mark.timeout(600)
def test_four_kpax_queries_at_once(spark: Any, kafka: Any, tmp_path: Path) -> None:
    src = create_topic(kafka, 2)
    outs = [create_topic(kafka, 2) for _ in range(2)]
    n = 1500  # three micro-batches of 500 per query: each query keeps triggering
    produce(kafka.bootstrap, src, [(i % 2, None, f"r{i}".encode(), None, None) for i in range(n)])
    seen: list[int] = []

    def read() -> Any:
        return (
            spark.readStream.format("kpax")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "500")
            .load()
        )

    def to_kpax(df: Any, topic: str, name: str, **opts: str) -> Any:
        w = (
            df.selectExpr("value")
            .writeStream.format("kpax")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("topic", topic)
            .option("checkpointLocation", str(tmp_path / name))
        )
        for k, v in opts.items():
            w = w.option(k, v)
        return w.trigger(availableNow=True).start()

    spark_restarts: list[str] = []

    def started(make: Any) -> Any:
        """Start a query and wait until its source is initialised, then the next one
        starts (they run side by side). Spark gives a query's new streaming-source
        Python worker a hard-coded 10 s to connect back
        (PythonWorkerFactory.createSimpleWorker), which a loaded 2-core machine
        can miss: the query then fails at initialisation, before reading anything,
        with "Python worker failed to connect back" (Spark's, not kpax's: it is
        restarted, at most twice, and counted)."""
        for _attempt in range(3):
            q = make()
            eventually(
                lambda q=q: not q.isActive or q.status["message"] != "Initializing sources",
                timeout=120,
            )
            exc = None if q.isActive else q.exception()
            if exc is None or "Python worker failed to connect back" not in str(exc):
                return q
            spark_restarts.append(str(q.id))
        return q

    started_at = time.monotonic()
    queries = [
        started(
            lambda: (
                read()
                .writeStream.format("parquet")
                .option("path", str(tmp_path / "parquet"))
                .option("checkpointLocation", str(tmp_path / "ck-parquet"))
                .trigger(availableNow=True)
                .start()
            )
        ),
        started(lambda: to_kpax(read(), outs[0], "ck-kpax")),
        started(lambda: to_kpax(read(), outs[1], "ck-eos", deliveryGuarantee="exactly-once")),
        started(
            lambda: (
                read()
                .writeStream.foreachBatch(lambda df, _id: seen.append(df.count()))
                .option("checkpointLocation", str(tmp_path / "ck-each"))
                .trigger(availableNow=True)
                .start()
            )
        ),
    ]
    for q in queries:
        assert q.awaitTermination(400), f"query {q.id} did not finish: {q.status}"
        assert q.exception() is None
    elapsed = time.monotonic() - started_at
    assert spark.read.parquet(str(tmp_path / "parquet")).count() == n
    assert _count(kafka.bootstrap, outs[0]) == n
    assert _count(kafka.bootstrap, outs[1], "read_committed") >= n  # + commit markers
    assert sum(seen) == n and len(seen) >= n // 500
    print(f"four kpax queries at once: {elapsed:.1f}s; connect-back restarts: {spark_restarts}")
