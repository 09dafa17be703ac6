"""Streaming reads through the "kpax" data source (micro-batches).

Role: the stream's offsets are Spark's Kafka offset JSON,
``{topic: {"partition": next_offset}}``. ``initialOffset`` resolves
``startingOffsets`` (default latest); ``latestOffset`` looks for new
partitions (read from their earliest offset) and caps the batch at
``maxOffsetsPerTrigger`` (split over partitions by their backlog);
``partitions`` turns ``start..end`` into offset ranges read on executors by
:func:`kpax.spark.read.read_range`. A restarted query gets its offsets back
from the checkpoint, so it resumes exactly where it stopped. Records deleted
before they were read fail the batch (``failOnDataLoss=true``, the default)
or are skipped with a warning. ``Trigger.AvailableNow`` is supported.

The driver-side Admin client is made on first use and never pickled.

Imports: pyspark.sql.datasource / pyspark.sql.streaming.datasource,
kpax.spark.options, kpax.spark.planning, kpax.spark.source, kpax.errors,
kpax.structs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kpax.errors import ConfigError
from kpax.spark.options import ReadOptions
from kpax.spark.planning import (
    OffsetRange,
    Planner,
    offsets_from_json,
    offsets_json,
    split_ranges,
)
from kpax.spark.source import RangePartition
from kpax.structs import TopicPartition

log = logging.getLogger("kpax.spark")

__all__ = ["KpaxStreamReader", "cap_offsets"]


def cap_offsets(
    start: dict[TopicPartition, int], latest: dict[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets reading at most ``limit`` records, shared by backlog (as Spark does)."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    given = 0
    for tp in sorted(latest):
        share = backlog[tp] * limit // total
        out[tp] = start.get(tp, latest[tp]) + share
        given += share
    # Hand out what rounding left, one record at a time, to partitions with backlog.
    for tp in sorted(latest):
        if given >= limit:
            break
        extra = min(limit - given, latest[tp] - out[tp])
        out[tp] += extra
        given += extra
    return out


class KpaxStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._planner: Planner | None = None
        self._target: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_planner": None, "_target": None}

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.opts)
        return self._planner

    # ------------------------------------------------------------ offsets

    def initialOffset(self) -> dict[str, Any]:
        tps = self.planner.partitions()
        if not tps and self.opts.pattern is None:
            raise ConfigError("kpax stream: no partitions to read")
        starts = self.planner.resolve(
            self.opts.starting, tps, name="startingOffsets", default="latest"
        )
        return offsets_json(starts)

    def _latest(self) -> dict[TopicPartition, int]:
        tps = self.planner.partitions(strict=False)
        return self.planner.list_offsets(dict.fromkeys(tps, "latest"))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._target if self._target is not None else self._latest()
        new = [tp for tp in latest if tp not in begin]
        if new:
            earliest = self.planner.list_offsets(dict.fromkeys(new, "earliest"))
            log.info("kpax stream: new partitions %s, read from earliest", new)
            begin = {**begin, **earliest}
        gone = [tp for tp in begin if tp not in latest]
        if gone:
            msg = f"kpax stream: partitions {sorted(gone)} are gone (topic deleted?)"
            if self.opts.fail_on_data_loss:
                raise ConfigError(msg + " (set failOnDataLoss=false to go on without them)")
            log.warning("%s; going on without them", msg)
        for tp, off in latest.items():
            if off < begin[tp]:
                msg = (
                    f"kpax stream: {tp.topic}-{tp.partition} ends at {off}, before the stream's "
                    f"offset {begin[tp]} (records lost?)"
                )
                if self.opts.fail_on_data_loss:
                    raise ConfigError(msg + " (set failOnDataLoss=false to go on)")
                log.warning("%s; going on from %d", msg, off)
        if isinstance(limit, ReadMaxRows):
            latest = cap_offsets(begin, latest, limit.max_rows)
        return offsets_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin = {**begin, **self.planner.list_offsets(dict.fromkeys(new, "earliest"))}
        ranges = [
            OffsetRange(tp.topic, tp.partition, begin[tp], stop[tp])
            for tp in sorted(stop)
            if stop[tp] > begin[tp]
        ]
        return [RangePartition(r) for r in split_ranges(ranges, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kpax.spark.read import read_range

        assert isinstance(partition, RangePartition)
        yield from read_range(self.opts, partition.range)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets (Kafka gets no commits)."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
