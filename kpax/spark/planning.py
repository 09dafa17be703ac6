"""Driver-side planning for the "kpax" data source: partitions and offset ranges.

Role: find the Kafka partitions a read covers (subscribe / subscribePattern /
assign), resolve offset specs (earliest, latest, JSON with -2/-1, timestamps,
with ``startingOffsetsByTimestampStrategy`` when a starting timestamp matches
no record) to numbers with one ``kpax.Admin.list_offsets`` call per spec,
retrying a failed lookup as ``fetchOffset.numRetries`` /
``fetchOffset.retryIntervalMs`` say, and cut the result into
:class:`OffsetRange` s (split for ``maxRecordsPerPartition`` and
``minPartitions``), grouped into Spark partitions (small ranges packed
together up to ``minRecordsPerPartition`` records).

Imports: kpax.errors, kpax.proto.error_families, kpax.structs, kpax.spark.options;
kpax.admin (Admin) on first use.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.errors import ConfigError, KafkaError
from kpax.proto.error_families import UNKNOWN_TOPIC_ERRORS
from kpax.spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions
from kpax.structs import TopicPartition

if TYPE_CHECKING:
    from kpax.admin import Admin

log = logging.getLogger("kpax.spark")

__all__ = ["OffsetRange", "Planner", "pack_ranges", "plan_tasks", "spec_name", "split_ranges"]

T = TypeVar("T")


@dataclass(frozen=True)
class OffsetRange:
    """Records ``start <= offset < end`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


class Planner:
    """Partition discovery and offset resolution with one Admin client."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._admin: Admin | None = None

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            from kpax.admin import Admin
            from kpax.spark.options import admin_options

            self._admin = Admin(**admin_options(self.opts.client))
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, tried ``fetchOffset.numRetries`` times in all with
        ``fetchOffset.retryIntervalMs`` between tries, as the JVM source fetches
        offsets; a configuration error is not retried."""
        attempts = max(1, self.opts.fetch_offset_attempts)
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except ConfigError:
                raise
            except KafkaError as exc:
                if attempt >= attempts:
                    raise
                log.warning(
                    "kpax spark: %s failed (attempt %d of %d, fetchOffset.numRetries): %s",
                    what,
                    attempt,
                    attempts,
                    exc,
                )
                time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------ partitions

    def partitions(self, *, strict: bool = True) -> list[TopicPartition]:
        """Every partition the read covers, sorted."""
        return self._retrying("finding the partitions", lambda: self._partitions(strict))

    def _partitions(self, strict: bool) -> list[TopicPartition]:
        opts = self.opts
        if opts.assign is not None:
            return sorted(TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps)
        if opts.subscribe is not None:
            topics = list(opts.subscribe)
        else:
            assert opts.pattern is not None
            rx = re.compile(opts.pattern)
            topics = [t for t in self.admin.list_topics() if rx.fullmatch(t)]
            if not topics:
                return []
        described = self.admin.describe_topics(topics)
        out: list[TopicPartition] = []
        for topic in topics:
            try:
                desc = described[topic]
            except KafkaError as exc:
                if strict:
                    why = (
                        "does not exist"
                        if isinstance(exc, UNKNOWN_TOPIC_ERRORS)
                        else f"cannot be described: {exc.message}"
                    )
                    raise ConfigError(f"option 'subscribe': topic {topic!r} {why}") from exc
                continue
            out.extend(TopicPartition(topic, p.partition) for p in desc.partitions)
        return sorted(out)

    # ------------------------------------------------------------ offsets

    def list_offsets(self, specs: Mapping[TopicPartition, str | int]) -> dict[TopicPartition, int]:
        if not specs:
            return {}

        def call() -> dict[TopicPartition, int]:
            result = self.admin.list_offsets(specs, isolation_level=self.opts.isolation_level)
            return {tp: result[tp].offset for tp in specs}

        return self._retrying("fetching offsets", call)

    def resolve(
        self,
        spec: OffsetSpec,
        tps: list[TopicPartition],
        *,
        name: str,
        default: str,
        latest: Mapping[TopicPartition, int] | None = None,
        starting: bool = True,
    ) -> dict[TopicPartition, int]:
        """Offsets for ``tps`` per ``spec`` (partitions a JSON spec leaves out get ``default``).

        A timestamp no record is at or after: for a starting spec, an error or the
        partition's end (``startingOffsetsByTimestampStrategy``); for an ending one,
        the partition's end (as the JVM source)."""
        wanted: dict[TopicPartition, str | int] = {}
        if isinstance(spec, str):
            wanted = dict.fromkeys(tps, spec)
        elif isinstance(spec, tuple):
            kind, value = spec
            if kind == "timestamp":
                wanted = dict.fromkeys(tps, int(value))
            else:
                self._check_known(value, tps, name)
                for tp in tps:
                    ts = value.get(tp.topic, {}).get(tp.partition)
                    if ts is None:
                        raise ConfigError(
                            f"option {name!r}: no timestamp for {tp.topic}-{tp.partition} (give "
                            f"one for every partition read, as Spark's Kafka source)"
                        )
                    wanted[tp] = int(ts)
        else:
            self._check_known(spec, tps, name)
            for tp in tps:
                off = spec.get(tp.topic, {}).get(tp.partition)
                if off is None:
                    wanted[tp] = default
                elif off == EARLIEST:
                    wanted[tp] = "earliest"
                elif off == LATEST:
                    wanted[tp] = "latest"
                else:
                    wanted[tp] = off  # a plain offset, resolved below
        lookups: dict[TopicPartition, str | int] = {}
        out: dict[TopicPartition, int] = {}
        for tp, w in wanted.items():
            if isinstance(w, int) and not isinstance(spec, tuple):
                out[tp] = w
            else:
                lookups[tp] = w
        found = self.list_offsets(lookups)
        missing = sorted(tp for tp, off in found.items() if off < 0)
        if missing:
            if starting and self.opts.timestamp_strategy == "error":
                shown = ", ".join(
                    f"{tp.topic}-{tp.partition} at {lookups[tp]}" for tp in missing[:5]
                )
                raise ConfigError(
                    f"option {name!r}: no offset matched the timestamp of {shown}"
                    f"{' ...' if len(missing) > 5 else ''} (no record at or after it; set "
                    f"startingOffsetsByTimestampStrategy=latest to start at the end)"
                )
            ends = (
                dict(latest)
                if latest is not None
                else self.list_offsets(dict.fromkeys(missing, "latest"))
            )
            for tp in missing:
                found[tp] = ends[tp]
        out.update(found)
        return out

    @staticmethod
    def _check_known(spec: Mapping[str, Any], tps: list[TopicPartition], name: str) -> None:
        known = set(tps)
        for topic, parts in spec.items():
            for p in parts:
                if TopicPartition(topic, p) not in known:
                    raise ConfigError(
                        f"option {name!r}: {topic}-{p} is not among the partitions read "
                        f"({len(tps)} partitions)"
                    )

    def batch_ranges(self) -> list[OffsetRange]:
        tps = self.partitions()
        ending_name = spec_name(self.opts.ending, "ending")
        starting_name = spec_name(self.opts.starting, "starting")
        ends = self.resolve(
            self.opts.ending, tps, name=ending_name, default="latest", starting=False
        )
        starts = self.resolve(
            self.opts.starting, tps, name=starting_name, default="earliest", latest=ends
        )
        explicit = isinstance(self.opts.ending, dict) and any(
            off >= 0 for parts in self.opts.ending.values() for off in parts.values()
        )
        if explicit:
            latest = self.list_offsets(dict.fromkeys(tps, "latest"))
            for tp in tps:
                if ends[tp] > latest[tp]:
                    raise ConfigError(
                        f"option 'endingOffsets': {ends[tp]} for {tp.topic}-{tp.partition} is "
                        f"after the partition's end {latest[tp]}"
                    )
        ranges: list[OffsetRange] = []
        for tp in tps:
            s, e = starts[tp], ends[tp]
            if s > e:
                msg = (
                    f"{starting_name} {s} of {tp.topic}-{tp.partition} is after its ending "
                    f"offset {e} ({ending_name})"
                )
                if self.opts.fail_on_data_loss:
                    raise ConfigError(msg + " (set failOnDataLoss=false to read nothing there)")
                log.warning("%s: nothing read from that partition", msg)
                s = e
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        return ranges

    def batch_tasks(self) -> list[list[OffsetRange]]:
        """The ranges of a batch read, grouped into Spark partitions (plan_tasks)."""
        return plan_tasks(self.batch_ranges(), self.opts)


def spec_name(spec: OffsetSpec, which: str) -> str:
    """The option a resolved spec came from, for messages."""
    if isinstance(spec, tuple):
        return f"{which}Timestamp" if spec[0] == "timestamp" else f"{which}OffsetsByTimestamp"
    return f"{which}Offsets"


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None = None
) -> list[OffsetRange]:
    """Cut ranges so none holds more than ``max_records`` records and there are at
    least ``min_partitions`` (big ranges get more pieces), as Spark's
    KafkaOffsetRangeCalculator: no gap, no overlap, order kept."""
    if max_records:
        pieces: list[OffsetRange] = []
        for r in ranges:
            parts = max(1, -(-r.size // max_records))
            pieces.extend(_even(r, parts))
        ranges = pieces
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    # Largest-remainder apportionment of min_partitions pieces by size (>= 1 each).
    quotas = [r.size * min_partitions / total for r in ranges]
    counts = [max(1, int(q)) for q in quotas]
    short = min_partitions - sum(counts)
    if short > 0:
        order = sorted(range(len(ranges)), key=lambda i: quotas[i] - int(quotas[i]), reverse=True)
        for i in order[:short]:
            counts[i] += 1
    out: list[OffsetRange] = []
    for r, count in zip(ranges, counts, strict=True):
        out.extend(_even(r, min(count, max(1, r.size))))
    return out


def pack_ranges(
    ranges: list[OffsetRange], min_records: int, max_records: int | None = None
) -> list[list[OffsetRange]]:
    """Group consecutive ranges into Spark partitions of at least ``min_records``
    records (a range that big stays alone; the last group may hold fewer), never
    more than ``max_records``: fewer, larger tasks when Kafka partitions hold few
    records each (a task's set-up costs more than reading thousands of records).
    Empty ranges are dropped; ``min_records`` 0 keeps one range per partition."""
    groups: list[list[OffsetRange]] = []
    current: list[OffsetRange] = []
    size = 0
    for r in ranges:
        if r.size <= 0:
            continue
        if current and (
            size >= min_records or (max_records is not None and size + r.size > max_records)
        ):
            groups.append(current)
            current, size = [], 0
        current.append(r)
        size += r.size
    if current:
        groups.append(current)
    return groups


def plan_tasks(ranges: list[OffsetRange], opts: ReadOptions) -> list[list[OffsetRange]]:
    """The Spark partitions of a read: ranges split for ``maxRecordsPerPartition`` and
    ``minPartitions`` (as the JVM source), then, unless ``minPartitions`` asks for
    a number of partitions, small ranges packed together up to
    ``minRecordsPerPartition`` records (kpax's; 0: one per Kafka partition, the JVM
    source's mapping)."""
    pieces = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    if opts.min_partitions or not opts.min_records_per_partition:
        return [[r] for r in pieces if r.size > 0]
    return pack_ranges(pieces, opts.min_records_per_partition, opts.max_records_per_partition)


def _even(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in ``parts`` pieces whose sizes differ by at most one."""
    step, extra = divmod(r.size, parts)
    out: list[OffsetRange] = []
    start = r.start
    for i in range(parts):
        end = start + step + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """``{topic: {"0": offset}}``: Spark's offset JSON (also the stream's offsets)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(obj: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}
