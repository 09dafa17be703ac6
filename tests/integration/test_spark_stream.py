"""The "kpax" Spark data source: batch and streaming writes read back equal, and a
streaming read stopped and restarted from its checkpoint sees every record once
(maxOffsetsPerTrigger respected, new partitions picked up). On the shared local[2]
session; test_spark_cluster.py runs some on the standalone cluster."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import kpax
from kpax.testing.pytest_plugin import create_topic
from tests.integration.spark_helpers import produce
from tests.wait import eventually

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _consume_all(bootstrap: str, topic: str, expect: int, timeout: float = 30) -> list[Any]:
    with kpax.Admin(bootstrap) as admin:
        n = len(admin.describe_topics([topic])[topic].partitions)
    out: list[Any] = []
    with kpax.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(topic, p) for p in range(n)])
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            out.extend(c.poll(0.5))
        out.extend(c.poll(0.5))  # nothing more should come
    return out


def test_batch_write_reads_back_equal(spark: Any, kafka: Any) -> None:
    from pyspark.sql import Row

    topic = create_topic(kafka, 3)
    rows = [
        Row(
            key=f"k{i}".encode() if i % 5 else None,
            value=f"value-{i}",
            partition=i % 3,
            headers=[Row(key="i", value=str(i).encode())] if i % 2 else [],
        )
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows,
        "key binary, value string, partition int, headers array<struct<key:string,value:binary>>",
    ).repartition(2)
    df.write.format("kpax").option("kafka.bootstrap.servers", kafka.bootstrap).option(
        "topic", topic
    ).option("kafka.linger.ms", "1").mode("append").save()
    got = _consume_all(kafka.bootstrap, topic, 300)
    assert len(got) == 300
    by_value = {r.value: r for r in got}
    for i in range(300):
        r = by_value[f"value-{i}".encode()]
        assert r.partition == i % 3
        assert r.key == (f"k{i}".encode() if i % 5 else None)
        assert list(r.headers) == ([("i", str(i).encode())] if i % 2 else [])

    # Spark's own reader ("kpax") reads the same back.
    back = (
        spark.read.format("kpax")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert sorted(r["value"] for r in back.collect()) == sorted(r.value for r in got)


def test_batch_write_topic_column(spark: Any, kafka: Any) -> None:
    t1, t2 = create_topic(kafka, 1), create_topic(kafka, 2)
    df = spark.createDataFrame(
        [(t1 if i % 3 else t2, f"v{i}".encode()) for i in range(90)], "topic string, value binary"
    )
    df.write.format("kpax").option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()
    assert len(_consume_all(kafka.bootstrap, t1, 60)) == 60
    assert len(_consume_all(kafka.bootstrap, t2, 30)) == 30


def test_write_errors_are_clear(spark: Any, kafka: Any) -> None:
    topic = create_topic(kafka, 1)
    base = spark.createDataFrame([(b"k", b"v")], "key binary, value binary")

    def save(df: Any, **opts: str) -> None:
        w = df.write.format("kpax").option("kafka.bootstrap.servers", kafka.bootstrap)
        for k, v in opts.items():
            w = w.option(k, v)
        w.mode("append").save()

    with pytest.raises(Exception) as info:
        save(base.select("key"), topic=topic)
    assert "a 'value' column (binary or string) is required" in str(info.value)
    with pytest.raises(Exception) as info:
        save(base)
    assert "set the 'topic' option or write a 'topic' column" in str(info.value)
    with pytest.raises(Exception) as info:
        save(base.selectExpr("key", "1.5 AS value"), topic=topic)
    assert "column 'value' must be binary or string" in str(info.value)
    # A failing task reports its error: partition 7 of a 1-partition topic.
    with pytest.raises(Exception) as info:
        save(
            base.selectExpr("value", "7 AS partition"),
            topic=topic,
            **{
                "kafka.max.block.ms": "3000",
                "kafka.delivery.timeout.ms": "4000",
                "kafka.request.timeout.ms": "3000",
            },
        )
    assert topic in str(info.value)


def _stream(
    spark: Any, bootstrap: str, topic: str, checkpoint: Path, sink: list[Any], **opts: str
) -> None:
    reader = (
        spark.readStream.format("kpax")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in opts.items():
        reader = reader.option(k, v)

    def each(batch: Any, batch_id: int) -> None:
        sink.append(
            (batch_id, [(r["partition"], r["offset"], r["value"]) for r in batch.collect()])
        )

    q = (
        reader.load()
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    q.stop()


def test_stream_restart_reads_every_record_once(spark: Any, kafka: Any, tmp_path: Path) -> None:
    topic = create_topic(kafka, 3)
    produce(
        kafka.bootstrap, topic, [(i % 3, None, f"a{i}".encode(), None, None) for i in range(90)]
    )
    sink: list[Any] = []
    _stream(spark, kafka.bootstrap, topic, tmp_path / "ck", sink, maxOffsetsPerTrigger="40")
    first = [rec for _, recs in sink for rec in recs]
    assert len(first) == 90
    assert all(len(recs) <= 40 for _, recs in sink) and len(sink) >= 3

    # More records, and a new partition, while the query is down.
    with kpax.Admin(kafka.bootstrap) as admin:
        admin.create_partitions({topic: 4}).raise_for_errors()

        def has_leader() -> bool:
            parts = admin.describe_topics([topic])[topic].partitions
            return len(parts) == 4 and all(p.leader >= 0 for p in parts)

        eventually(has_leader, timeout=30)  # the new partition takes records
    produce(
        kafka.bootstrap, topic, [(i % 4, None, f"b{i}".encode(), None, None) for i in range(40)]
    )
    sink2: list[Any] = []
    _stream(spark, kafka.bootstrap, topic, tmp_path / "ck", sink2, maxOffsetsPerTrigger="40")
    second = [rec for _, recs in sink2 for rec in recs]
    assert min(b for b, _ in sink2) > max(b for b, _ in sink)  # batch ids go on
    everything = first + second
    assert Counter(v for _, _, v in everything) == Counter(
        [f"a{i}".encode() for i in range(90)] + [f"b{i}".encode() for i in range(40)]
    )
    assert {p for p, _, v in second} == {0, 1, 2, 3}
    # offsets within each partition are contiguous: no gap, no duplicate
    for p in range(4):
        offs = sorted(o for q, o, _ in everything if q == p)
        assert offs == list(range(len(offs)))


def test_stream_fail_on_data_loss(spark: Any, kafka: Any, tmp_path: Path) -> None:
    topic = create_topic(kafka, 1)
    produce(kafka.bootstrap, topic, [(0, None, f"x{i}".encode(), None, None) for i in range(20)])
    sink: list[Any] = []
    _stream(spark, kafka.bootstrap, topic, tmp_path / "ck", sink)
    produce(kafka.bootstrap, topic, [(0, None, f"y{i}".encode(), None, None) for i in range(20)])
    with kpax.Admin(kafka.bootstrap) as admin:  # records 20..29 deleted before being read
        admin.delete_records({kpax.TopicPartition(topic, 0): 30}).raise_for_errors()
    with pytest.raises(Exception) as info:
        _stream(spark, kafka.bootstrap, topic, tmp_path / "ck", [])
    assert topic in str(info.value)
    sink3: list[Any] = []
    _stream(spark, kafka.bootstrap, topic, tmp_path / "ck", sink3, failOnDataLoss="false")
    assert sorted(o for _, recs in sink3 for _, o, _ in recs) == list(range(30, 40))


def test_stream_write_reads_back_equal(spark: Any, kafka: Any, tmp_path: Path) -> None:
    src, dst = create_topic(kafka, 2), create_topic(kafka, 2)
    produce(
        kafka.bootstrap,
        src,
        [(i % 2, f"k{i}".encode(), f"s{i}".encode(), None, None) for i in range(100)],
    )
    q = (
        spark.readStream.format("kpax")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(cast(value AS string)) AS value")
        .writeStream.format("kpax")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckw"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    got = _consume_all(kafka.bootstrap, dst, 100)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (f"k{i}".encode(), f"S{i}".encode()) for i in range(100)
    )


def test_progress_reports_latest_offset_and_offsets_behind(
    spark: Any, kafka: Any, tmp_path: Path
) -> None:
    """Spark's progress shows the source's latestOffset (reportLatestOffset);
    kpax.spark.source_progress names the topics and adds the JVM Kafka source's
    offsets-behind-latest metrics."""
    import json

    import kpax.spark

    topic = create_topic(kafka, 3)
    produce(kafka.bootstrap, topic, [(i % 3, None, b"m", None, None) for i in range(90)])
    q = (
        spark.readStream.format("kpax")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    first = next(p for p in q.recentProgress if p["numInputRows"] > 0)
    source = first["sources"][0]
    assert json.loads(source["latestOffset"]) == {topic: {"0": 30, "1": 30, "2": 30}}
    end = json.loads(source["endOffset"])[topic]
    assert sum(end.values()) == 40
    (filled,) = kpax.spark.source_progress(first)
    assert filled["description"] == f"kpax[{topic}]"
    behind = sorted(30 - o for o in end.values())
    assert filled["metrics"] == {
        "minOffsetsBehindLatest": str(behind[0]),
        "maxOffsetsBehindLatest": str(behind[-1]),
        "avgOffsetsBehindLatest": str(sum(behind) / 3),
    }
    assert source["description"].startswith("org.apache.spark")  # what Spark itself says
