"""Example pipeline: events -> Kafka -> Spark (through "kpax") -> aggregate -> another topic.

Run with ``make demo-spark`` (or ``python examples/spark_pipeline.py``; set
``KPAX_BOOTSTRAP=host:port`` to use an existing Kafka instead of a local one).

1. A kpax.Producer writes page-view events (JSON: user, page, ms) to ``events``.
2. A Spark job reads ``events`` with ``spark.read.format("kpax")`` — no JVM
   Kafka connector, no ``--packages`` — parses the JSON, counts views and
   distinct users per page, and writes one JSON record per page to
   ``page-stats`` with ``df.write.format("kpax")`` (key = the page).
3. The same aggregation runs as a streaming query (``readStream`` /
   ``writeStream``, ``Trigger.AvailableNow``, a checkpoint) into
   ``page-stats-stream``.
4. A kpax.Consumer reads both result topics back and prints them.

Imports: kpax, kpax.spark, kpax.testing (a local broker), pyspark.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from typing import Any

import kpax
import kpax.spark

PAGES = ["/", "/search", "/cart", "/checkout", "/help"]
EVENTS = 20_000


def produce_events(bootstrap: str, topic: str) -> None:
    rnd = random.Random(7)
    now = int(time.time() * 1000)
    with kpax.Producer(bootstrap, value_serializer="json", key_serializer="str") as p:
        for i in range(EVENTS):
            user = f"u{rnd.randrange(500)}"
            event = {"user": user, "page": rnd.choice(PAGES), "ms": now + i}
            p.send(topic, event, key=user)
        p.flush(60)
    print(f"1. produced {EVENTS} events to {topic!r}")


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kpax-example")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)  # the "kpax" data source
    return spark


def aggregate(events: Any) -> Any:
    """Kafka rows -> one (key, value) row per page."""
    from pyspark.sql import functions as F

    schema = "user string, page string, ms long"
    parsed = events.select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select(
        "e.*"
    )
    stats = parsed.groupBy("page").agg(
        F.count("*").alias("views"), F.approx_count_distinct("user").alias("users")
    )
    return stats.select(
        F.col("page").alias("key"),
        F.to_json(F.struct("page", "views", "users")).alias("value"),
    )


def batch_job(spark: Any, bootstrap: str, src: str, dst: str) -> None:
    events = (
        spark.read.format("kpax")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
    )
    aggregate(events).write.format("kpax").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", dst
    ).mode("append").save()
    print(f"2. batch job: read {src!r} through 'kpax', wrote per-page stats to {dst!r}")


def streaming_job(spark: Any, bootstrap: str, src: str, dst: str, checkpoint: str) -> None:
    events = (
        spark.readStream.format("kpax")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
    )
    query = (
        aggregate(events)
        .writeStream.outputMode("complete")
        .format("kpax")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    print(f"3. streaming job: {src!r} -> {dst!r} in micro-batches of <= 5000 events")


def show(bootstrap: str, topic: str) -> None:
    latest: dict[str, Any] = {}
    with kpax.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(topic, 0)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            recs = c.poll(0.5)
            if not recs and latest:
                break
            for r in recs:
                latest[r.key.decode()] = json.loads(r.value)  # the last update per page wins
    print(f"4. {topic}:")
    for page in sorted(latest):
        s = latest[page]
        print(f"     {page:<10} views={s['views']:>6} users~{s['users']}")
    total = sum(s["views"] for s in latest.values())
    assert total == EVENTS, f"{topic}: {total} views counted, {EVENTS} produced"


def main() -> None:
    with ExitStack() as stack:
        bootstrap = os.environ.get("KPAX_BOOTSTRAP")
        if not bootstrap:
            from kpax.testing import start_kafka

            cluster = start_kafka(1)
            stack.callback(cluster.stop)
            bootstrap = cluster.bootstrap
        suffix = f"{int(time.time())}"
        src, dst, dst2 = f"events-{suffix}", f"page-stats-{suffix}", f"page-stats-stream-{suffix}"
        with kpax.Admin(bootstrap) as admin:
            admin.create_topics(
                [kpax.NewTopic(src, 3, 1), kpax.NewTopic(dst, 1, 1), kpax.NewTopic(dst2, 1, 1)]
            ).raise_for_errors()
        produce_events(bootstrap, src)
        spark = spark_session()
        stack.callback(spark.stop)
        batch_job(spark, bootstrap, src, dst)
        checkpoint = stack.enter_context(tempfile.TemporaryDirectory(prefix="kpax-ck-"))
        streaming_job(spark, bootstrap, src, dst2, checkpoint)
        show(bootstrap, dst)
        show(bootstrap, dst2)
        print("done: events -> Kafka -> Spark ('kpax') -> aggregate -> Kafka")


if __name__ == "__main__":
    main()
