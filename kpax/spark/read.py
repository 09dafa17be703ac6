"""Executor side of a "kpax" read: offset ranges -> Arrow record batches.

Role: read ``start <= offset < end`` of one partition (or of several, one
after the other: :func:`read_ranges`) with the Python worker's
``kpax.Consumer`` (kpax.spark.clients; no group: assign + seek + poll), and
turn each poll's records into one ``pyarrow.RecordBatch`` in the data source's
schema (columns built in C: ``map(itemgetter(i), records)`` then
``pyarrow.array``). Stops at ``end`` even when the last offsets are gaps
(compaction, transaction markers): the consumer's position is checked when a
poll comes back short.

Imports: kpax (TopicPartition, errors), kpax.spark.options,
kpax.spark.planning; kpax.spark.clients, pyarrow and pyspark only inside
:func:`read_range`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from kpax.errors import KafkaTimeoutError
from kpax.spark.options import ReadOptions
from kpax.spark.planning import OffsetRange
from kpax.structs import TopicPartition

log = logging.getLogger("kpax.spark")

__all__ = ["SCHEMA_FIELDS", "arrow_schema", "read_range", "read_ranges"]

#: (name, Spark type name) of the source's columns, Spark's Kafka source order.
SCHEMA_FIELDS = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "long"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
]

#: Records per poll (= per Arrow batch at most).
MAX_RECORDS = 20000

#: The read tasks' Fetch long-poll (kafka.fetch.max.wait.ms overrides it).
FETCH_MAX_WAIT_MS = 20


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema Spark expects for the source's Spark schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from kpax.spark.schema import spark_schema

    return to_arrow_schema(spark_schema(include_headers), timezone="UTC")


_OFFSET = itemgetter(2)
_TS = itemgetter(3)
_TS_TYPE = itemgetter(4)
_KEY = itemgetter(5)
_VALUE = itemgetter(6)
_HEADERS = itemgetter(7)


def _to_batch(records: list[Any], topic: str, partition: int, schema: Any, headers: bool) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(records)
    # ConsumerRecord fields: topic, partition, offset, timestamp, timestamp_type, key,
    # value, headers, leader_epoch. One C-level pass per column (zip(*records) is
    # ~20x slower with thousands of records).
    offsets = list(map(_OFFSET, records))
    timestamps = list(map(_TS, records))
    ts_types = list(map(_TS_TYPE, records))
    keys = list(map(_KEY, records))
    values = list(map(_VALUE, records))
    ts = pc.multiply(pa.array(timestamps, pa.int64()), 1000).view(schema.field("timestamp").type)
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        ts,
        pa.array(ts_types, pa.int32()),
    ]
    if headers:
        arrays.append(pa.array(list(map(_HEADERS, records)), schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def consumer_config(opts: ReadOptions) -> dict[str, Any]:
    cfg = dict(opts.client)
    cfg.update(
        enable_auto_commit=False,
        auto_offset_reset="none" if opts.fail_on_data_loss else "earliest",
        isolation_level=opts.isolation_level,
        max_poll_records=MAX_RECORDS,
    )
    # Named after the consumer group, as the JVM source's consumers ("consumer-<group>"):
    # they carry the id but never join the group or commit to it.
    cfg.setdefault("client_id", f"consumer-{opts.group_id}" if opts.group_id else "kpax-spark")
    cfg.setdefault("fetch_buffer_chunks", 4)
    # A task knows the offsets it reads up to: a Fetch long-polling for more (500 ms,
    # Java's default) only holds back the next task of this Python worker, whose
    # Fetch waits behind it on the connection (measured: 0.2-0.4 s per task).
    cfg.setdefault("fetch_max_wait_ms", FETCH_MAX_WAIT_MS)
    return cfg


def read_ranges(opts: ReadOptions, ranges: list[OffsetRange]) -> Iterator[Any]:
    """Yield the record batches of each range, one range after the other."""
    for r in ranges:
        yield from read_range(opts, r)


def read_range(opts: ReadOptions, r: OffsetRange) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch`` es of every record of ``r`` (none if it is empty)."""
    if r.size <= 0:
        return
    from kpax.spark.clients import consumer_for, warn_if_pure_python

    warn_if_pure_python()
    schema = arrow_schema(opts.include_headers)
    tp = TopicPartition(r.topic, r.partition)
    with consumer_for(consumer_config(opts)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        end = r.end
        timeout = opts.poll_timeout_ms / 1000
        last_progress = time.monotonic()
        first = True
        while True:
            records = consumer.poll(0.2, MAX_RECORDS)
            if records:
                if first and records[0].offset > r.start:
                    _data_loss(opts, r, records[0].offset)
                first = False
                last_progress = time.monotonic()
                if records[-1].offset >= end:
                    records = [rec for rec in records if rec.offset < end]
                    if records:
                        yield _to_batch(records, r.topic, r.partition, schema, opts.include_headers)
                    return
                yield _to_batch(records, r.topic, r.partition, schema, opts.include_headers)
                if records[-1].offset == end - 1:
                    return
                if len(records) >= MAX_RECORDS:
                    continue
            # A short poll: gaps (compaction, control records) may end the range early.
            if consumer.position(tp) >= end:
                return
            if time.monotonic() - last_progress > timeout:
                raise KafkaTimeoutError(
                    f"kpax spark: no records from {r.topic}-{r.partition} for {timeout:g}s "
                    f"(kafkaConsumer.pollTimeoutMs) while reading offsets {r.start}..{end - 1}"
                )


def _data_loss(opts: ReadOptions, r: OffsetRange, first: int) -> None:
    """The first record is after the range start: records were deleted (retention) or
    the range starts in a gap. Only the former matters, and only ``failOnDataLoss``
    would have raised through the consumer (auto_offset_reset="none")."""
    if not opts.fail_on_data_loss:
        log.warning(
            "kpax spark: %s-%d: offsets %d..%d were not available (deleted?); continuing at %d",
            r.topic,
            r.partition,
            r.start,
            first - 1,
            first,
        )
