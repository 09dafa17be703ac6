"""Streaming reads through the "kpax" data source (micro-batches).

Role: the stream's offsets are Spark's Kafka offset JSON, ``{topic:
{"partition": next_offset}}``. ``initialOffset`` resolves ``startingOffsets``
(default latest) or the starting timestamps; ``latestOffset`` looks for new
partitions (read from their earliest offset), caps the batch at
``maxOffsetsPerTrigger`` (split over partitions by their backlog) and holds it
back while fewer than ``minOffsetsPerTrigger`` records wait, at most
``maxTriggerDelay`` since the last batch (as the JVM source);
``reportLatestOffset`` gives Spark's progress the latest offsets seen;
``partitions`` turns ``start..end`` into offset ranges read on executors by
:func:`kpax.spark.read.read_ranges` (small ranges packed into one task). A
restarted query gets its offsets back from the checkpoint, so it resumes
exactly where it stopped. Records deleted before they were read fail the batch
(``failOnDataLoss=true``, the default) or are skipped with a warning.
``Trigger.AvailableNow`` is supported.

The driver-side Admin client is made on first use and never pickled.

Imports: pyspark.sql.datasource / pyspark.sql.streaming.datasource,
kpax.spark.options, kpax.spark.planning, kpax.spark.source, kpax.errors,
kpax.structs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from kpax.errors import ConfigError
from kpax.spark.options import ReadOptions
from kpax.spark.planning import (
    OffsetRange,
    Planner,
    offsets_from_json,
    offsets_json,
    plan_tasks,
    spec_name,
)
from kpax.spark.source import RangePartition, user_errors
from kpax.structs import TopicPartition

log = logging.getLogger("kpax.spark")

__all__ = ["KpaxStreamReader", "behind_latest", "cap_offsets"]


def behind_latest(
    end: dict[TopicPartition, int], latest: dict[TopicPartition, int]
) -> dict[str, str]:
    """The JVM Kafka source's progress metrics: how far a batch's end offsets are
    behind the latest ones (min, avg, max over partitions), as strings like Spark's."""
    behind = [max(0, latest[tp] - end.get(tp, latest[tp])) for tp in latest]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(float(sum(behind)) / len(behind)),
    }


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
        #: The latest offsets the last latestOffset call saw (reportLatestOffset).
        self._seen: dict[TopicPartition, int] | None = None
        #: When the last batch was let through (minOffsetsPerTrigger / maxTriggerDelay).
        self._last_trigger = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {
            "opts": self.opts,
            "_planner": None,
            "_target": None,
            "_seen": None,
            "_last_trigger": 0.0,
        }

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.opts)
        return self._planner

    # ------------------------------------------------------------ offsets

    @user_errors
    def initialOffset(self) -> dict[str, Any]:
        tps = self.planner.partitions()
        if not tps and self.opts.pattern is None:
            raise ConfigError("kpax stream: no partitions to read")
        starts = self.planner.resolve(
            self.opts.starting,
            tps,
            name=spec_name(self.opts.starting, "starting"),
            default="latest",
        )
        return offsets_json(starts)

    def _latest(self) -> dict[TopicPartition, int]:
        tps = self.planner.partitions(strict=False)
        return self.planner.list_offsets(dict.fromkeys(tps, "latest"))

    @user_errors
    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The latest offsets the last trigger saw: Spark's progress shows them as the
        source's ``latestOffset``."""
        return offsets_json(self._seen) if self._seen is not None else None

    def _hold_back(
        self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int]
    ) -> bool:
        """minOffsetsPerTrigger: wait while fewer records than that are new, unless
        maxTriggerDelay passed since the last batch (the JVM source's rule; never
        with Trigger.AvailableNow, which must reach its target)."""
        need = self.opts.min_offsets_per_trigger
        if need is None or self._target is not None:
            return False
        now = time.time()
        if (now - self._last_trigger) * 1000 >= self.opts.max_trigger_delay_ms:
            self._last_trigger = now
            return False
        new = sum(max(0, off - begin.get(tp, 0)) for tp, off in latest.items())
        if new < need:
            log.debug("kpax stream: %d new records < minOffsetsPerTrigger %d: waiting", new, need)
            return True
        self._last_trigger = now
        return False

    @user_errors
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._target if self._target is not None else self._latest()
        self._seen = latest
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
        end = latest
        if not isinstance(limit, ReadAllAvailable):
            if self._hold_back(begin, latest):
                return start
            max_rows = (
                limit.max_rows
                if isinstance(limit, ReadMaxRows)
                else self.opts.max_offsets_per_trigger
            )
            if max_rows is not None:
                end = cap_offsets(begin, latest, max_rows)
        if log.isEnabledFor(logging.INFO):
            metrics = behind_latest(end, latest)
            log.info(
                "kpax stream %s: batch up to %s; offsets behind latest: min %s, avg %s, max %s",
                self.opts.topics_description(),
                offsets_json(end),
                metrics.get("minOffsetsBehindLatest"),
                metrics.get("avgOffsetsBehindLatest"),
                metrics.get("maxOffsetsBehindLatest"),
            )
        return offsets_json(end)

    @user_errors
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
        return [RangePartition(t) for t in plan_tasks(ranges, self.opts)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kpax.spark.read import read_ranges

        if isinstance(partition, RangePartition):  # (Spark's stand-in when there is none: no rows)
            yield from read_ranges(self.opts, partition.ranges)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets (Kafka gets no commits)."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
