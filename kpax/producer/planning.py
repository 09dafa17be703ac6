"""Records checked and planned before they are appended (``send`` and ``send_many``).

Role: the record checks ``send`` shares with ``send_many`` (timestamps,
headers) and the whole of ``send_many``'s planning: values and keys
serialized or checked as columns, their cumulative sizes, each record too
large for a request found before anything is buffered, and the records
split into one column per target partition, each in call order
(:func:`plan_many` -> :class:`BulkPlan`, which ``AsyncProducer._try_fill``
appends). Pure functions of the arguments and a :class:`Planner` (the
producer's serializers, partitioner and size limits): no lock, no I/O.

Imports: kpax.producer.{accumulator,fastpath,partitioner,serializers}, kpax.proto, the
standard library.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from typing import Any

from kpax.producer.accumulator import (
    RECORD_FRAME_MAX,
    Column,
    Segment,
    fit,
    header_bytes,
    record_weight,
)
from kpax.producer.fastpath import sendpath
from kpax.producer.partitioner import partition_for_key
from kpax.producer.serializers import as_bytes
from kpax.proto.error_codes import MessageTooLargeError
from kpax.proto.records import Header

__all__ = [
    "BulkPlan",
    "Planner",
    "check_headers",
    "PartitionNotInMetadata",
    "check_partition",
    "explicit_partition",
    "check_timestamp",
    "group",
    "keyed_columns",
    "plan_many",
]

_MAX_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True)
class Planner:
    """What planning needs of its producer (built once, at construction)."""

    value_serializer: Any
    key_serializer: Any
    #: The user's partitioner, None for the default one (murmur2 / sticky).
    custom_partitioner: Any
    #: The largest record a batch may take (estimated bytes).
    max_record: int
    max_request_size: int
    buffer_memory: int


def check_timestamp(timestamp: Any) -> int:
    """A record timestamp as ``send`` takes it: milliseconds since the epoch as an
    int, ``>= 0`` (or -1: no timestamp), below 2**63 -- as the Java client's
    ProducerRecord (which refuses -1 too). A float (``time.time() * 1000``), a
    str or a bool is a TypeError; out of range, a ValueError; both name the field."""
    if type(timestamp) is not int:
        if isinstance(timestamp, (bool, float, str, bytes)) or not hasattr(timestamp, "__index__"):
            hint = " (e.g. int(time.time() * 1000))" if isinstance(timestamp, float) else ""
            raise TypeError(
                "record timestamp must be an int of milliseconds since the epoch, "
                f"not {type(timestamp).__name__} {timestamp!r}{hint}"
            )
        timestamp = timestamp.__index__()
    if (timestamp < 0 and timestamp != -1) or timestamp > _MAX_TIMESTAMP:
        raise ValueError(
            f"record timestamp {timestamp} is out of range: milliseconds since the epoch "
            f"from 0 to 2**63-1, or -1 for none"
        )
    return int(timestamp)


class PartitionNotInMetadata(ValueError):
    """An explicit partition at or beyond the partition count the producer knows
    for its topic: it may have been added since (the producer's sends refresh
    the metadata once before they fail with it)."""


def explicit_partition(partition: Any) -> int | None:
    """The int value of an explicit partition (None for None or a value that is
    not an integer: :func:`check_partition` then says what is wrong)."""
    if partition is None or isinstance(partition, bool):
        return None
    if type(partition) is int:
        return partition
    try:
        return int(partition.__index__())
    except (AttributeError, TypeError, ValueError):
        return None


def check_partition(topic: str, partition: Any, n: int) -> int:
    """An explicit partition as ``send`` takes it: an int (or an integer type such
    as numpy's) from 0 to ``n - 1``. Anything else (a bool, a float, a str "0")
    is a TypeError naming the field; an int out of range a ValueError naming
    the topic's partitions (:class:`PartitionNotInMetadata` when it is
    ``n`` or more)."""
    if type(partition) is not int:
        if isinstance(partition, (bool, float, str, bytes)) or not hasattr(partition, "__index__"):
            raise TypeError(
                f"record partition must be an int, not {type(partition).__name__} {partition!r}"
            )
        partition = partition.__index__()
    if not 0 <= partition < n:
        has = f"{n}: 0..{n - 1}" if n > 0 else "none"
        text = f"topic {topic!r} has no partition {partition} (it has {has})"
        raise (PartitionNotInMetadata if partition >= n else ValueError)(text)
    return int(partition)


def check_headers(headers: Any) -> list[Header] | None:
    """Record headers as ``send`` takes them (pairs or a mapping of str to
    bytes/str/None) as a list of (str, bytes | None); a TypeError names a bad one."""
    if not headers:
        return None
    if isinstance(headers, Mapping):
        headers = list(headers.items())
    out: list[Header] = []
    for item in headers:
        try:
            k, v = item
        except (TypeError, ValueError):
            raise TypeError(f"record headers must be (str, bytes) pairs, got {item!r}") from None
        if not isinstance(k, str):
            raise TypeError(f"record header key must be str, not {type(k).__name__}")
        if v is not None and type(v) is not bytes:
            if isinstance(v, str):
                v = v.encode("utf-8")
            elif isinstance(v, (bytearray, memoryview)):
                v = bytes(v)
            else:
                raise TypeError(
                    f"record header {k!r} value must be bytes, str or None, not {type(v).__name__}"
                )
        out.append((k, v))
    return out


def _column_bytes(items: Sequence[Any], what: str, ser: Any) -> tuple[list[bytes | None], bool]:
    """``items`` as a list of bytes/None (serialized, or checked as ``send``
    does), and whether it holds a None."""
    if ser is not None:
        out = [ser(x) for x in items]
        return out, None in out
    out = items if type(items) is list else list(items)
    types = set(map(type, out))
    if types == _BYTES:
        return out, False
    if not types <= _BYTES_OR_NONE:
        out = [x if x is None or type(x) is bytes else as_bytes(x, what) for x in out]
    return out, None in out


_BYTES = {bytes}
_BYTES_OR_NONE = frozenset({bytes, type(None)})


def _cumulative(
    values: list[bytes | None],
    keys: list[bytes | None] | None,
    headers: Sequence[Header] | None,
) -> list[int]:
    """Cumulative record weights (``cum[0] == 0``; kpax.producer.accumulator's
    ``record_weight`` of each record): one C call where the C send path is
    built, else ``record_weight`` per record."""
    if sendpath is not None:
        cum = sendpath.cumulative_weights(values, keys, header_bytes(headers))
        if cum is not NotImplemented:
            return cum  # type: ignore[no-any-return]
    ks = repeat(None) if keys is None else keys
    return list(accumulate(map(record_weight, ks, values, repeat(headers)), initial=0))


class BulkPlan:
    """A ``send_many`` call resolved into columns, and its progress."""

    __slots__ = ("columns", "headers", "next", "segments", "timestamp", "topic")

    def __init__(
        self, topic: str, columns: list[Column], timestamp: int, headers: list[Header] | None
    ) -> None:
        self.topic = topic
        self.columns = columns
        self.timestamp = timestamp
        self.headers = headers
        self.next = 0  # the first column not fully appended
        self.segments: list[Segment] = []


def plan_many(  # noqa: PLR0917 - the arguments of send_many, then the producer's
    topic: str,
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    n: int,
    planner: Planner,
) -> BulkPlan:
    """Serialize, check and partition a ``send_many`` into columns, one per
    target partition (-1: the sticky partition), each in call order; appends
    nothing (``AsyncProducer._try_fill`` does)."""
    vals, _ = _column_bytes(values, "value", planner.value_serializer)
    count = len(vals)
    ks: list[bytes | None] | None = None
    if keys is not None:
        if len(keys) != count:
            raise ValueError(
                f"send_many: {len(keys)} keys for {count} values (keys must be parallel)"
            )
        ks, _ = _column_bytes(keys, "key", planner.key_serializer)
        if ks.count(None) == count:
            ks = None
    hdrs = check_headers(headers) if headers else None
    timestamp = time.time_ns() // 1_000_000 if timestamp is None else check_timestamp(timestamp)
    cum = _cumulative(vals, ks, hdrs)
    i = 0
    while i < count:  # a few steps: each takes as many records as fit in max_record
        j = fit(cum, RECORD_FRAME_MAX, i, count, planner.max_record)
        if j == i:
            raise MessageTooLargeError(
                f"a record of about {cum[i + 1] - cum[i] + RECORD_FRAME_MAX + 61} bytes for topic "
                f"{topic!r} is larger than max_request_size="
                f"{planner.max_request_size} / buffer_memory="
                f"{planner.buffer_memory} (nothing of this send_many was sent)"
            )
        i = j
    if partition is not None:
        partition = check_partition(topic, partition, n)
        columns = [Column(partition, vals, ks, cum)]
    elif planner.custom_partitioner is not None:
        part = planner.custom_partitioner.partition
        targets = [part(topic, None if ks is None else ks[i], vals[i], n) for i in range(count)]
        for p in set(targets):
            if not 0 <= p < n:
                raise ValueError(
                    f"partitioner returned partition {p} for {topic!r} with {n} partitions"
                )
        columns = group(targets, vals, ks, hdrs, 0)
    elif ks is None:
        columns = [Column(0 if n == 1 else -1, vals, None, cum)]
    elif n == 1:
        columns = [Column(0, vals, ks, cum)]
    else:
        columns = keyed_columns(ks, vals, hdrs, n)
    return BulkPlan(topic, columns, timestamp, hdrs)


def keyed_columns(
    ks: list[bytes | None],
    vals: list[bytes | None],
    hdrs: Sequence[Header] | None,
    n: int,
) -> list[Column]:
    """Default partitioning of keyed records: murmur2 per distinct key; a
    run of None keys goes to the sticky partitioner, after the records
    before it and before those after it (so every partition keeps call order).
    One C call when every key is bytes and the C send path is built."""
    if sendpath is not None:
        split = sendpath.key_columns(vals, ks, n)
        if split is not NotImplemented:
            if len(split) == 1:
                return [Column(split[0][0], vals, ks, _cumulative(vals, ks, hdrs))]
            return [
                Column(p, v, k, _cumulative(v, k, hdrs), positions=pos) for p, v, k, pos in split
            ]
    hashes: dict[bytes, int] = {}
    targets: list[int] = []
    add = targets.append
    for k in ks:
        if k is None:
            add(-1)
            continue
        p = hashes.get(k)
        if p is None:
            p = hashes[k] = partition_for_key(k, n)
        add(p)
    if -1 not in targets:
        return group(targets, vals, ks, hdrs, 0)
    columns: list[Column] = []
    start, keyed = 0, targets[0] != -1
    for i in range(1, len(targets) + 1):
        if i == len(targets) or (targets[i] != -1) != keyed:
            if keyed:
                columns += group(targets[start:i], vals[start:i], ks[start:i], hdrs, start)
            else:
                sub = vals[start:i]
                columns.append(Column(-1, sub, None, _cumulative(sub, None, hdrs), base=start))
            if i < len(targets):
                start, keyed = i, not keyed
    return columns


def group(
    targets: list[int],
    vals: list[bytes | None],
    ks: list[bytes | None] | None,
    hdrs: Sequence[Header] | None,
    base: int,
) -> list[Column]:
    """One column per target partition, each in call order (``hdrs``: the
    records' headers)."""
    first = targets[0] if targets else 0
    if targets.count(first) == len(targets):
        return [Column(first, vals, ks, _cumulative(vals, ks, hdrs), base=base)]
    idx: dict[int, list[int]] = {}
    for i, p in enumerate(targets):
        lst = idx.get(p)
        if lst is None:
            idx[p] = [i]
        else:
            lst.append(i)
    columns = []
    for p in sorted(idx):
        pos = idx[p]
        v = [vals[i] for i in pos]
        k = None if ks is None else [ks[i] for i in pos]
        columns.append(Column(p, v, k, _cumulative(v, k, hdrs), positions=[base + i for i in pos]))
    return columns
