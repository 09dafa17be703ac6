"""One partition of a ShareFetch response turned into the records the member acquired.

Role: pure (no I/O). A ShareFetch partition holds record batches as the log
has them and the ranges of offsets this member acquired, each with its
delivery count. :func:`decode_acquired` returns the acquired records as
:class:`~kpax.consumer.record.ShareConsumerRecord` (records outside the
ranges are not this member's and are dropped), and what the consumer must
acknowledge by itself, as the Java client does:

- an acquired offset with no record to show (a control record, an offset
  compacted away) is acknowledged as a GAP;
- a batch that fails to decode (CRC, lengths, decompression cap) is REJECTed
  for all its acquired offsets (the bytes will not get better), and the error
  follows the records before it;
- a record whose deserializer fails is RELEASEd (another member, or a fixed
  deserializer, may read it), and the error follows the records before it.

Whole batches inside one acquired range (the usual case) are built by the
record loop in C (``batch.rows``), like the consumer's records.

Imports: kpax.proto, kpax.consumer.record, kpax.consumer.share.acks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kpax.consumer.record import ShareConsumerRecord
from kpax.consumer.share.acks import GAP, AcknowledgeType
from kpax.proto.errors import CorruptRecordError, KafkaError, SerializationError
from kpax.proto.records import decode_batches

__all__ = ["Acquired", "DecodedPartition", "decode_acquired"]

#: Where the record loop puts offset, timestamp, key, value and headers.
_ROW_SLOTS = (2, 3, 5, 6, 7)

Deserializer = Callable[[bytes], Any] | None


@dataclass(frozen=True)
class Acquired:
    """An acquired range: offsets ``first`` to ``last`` (inclusive), delivered
    ``delivery_count`` times (this delivery included)."""

    first: int
    last: int
    delivery_count: int


@dataclass
class DecodedPartition:
    """What one partition of a ShareFetch response gave this member."""

    records: list[ShareConsumerRecord] = field(default_factory=list)
    #: Acknowledgements the consumer makes itself: {offset: type}.
    auto_acks: dict[int, int] = field(default_factory=dict)
    #: A bad batch or record after ``records`` (their acknowledgements are in ``auto_acks``).
    error: KafkaError | None = None


def decode_acquired(
    topic: str,
    partition: int,
    data: bytes | memoryview | None,
    acquired: Sequence[Acquired],
    *,
    check_crcs: bool = True,
    max_decompressed: int,
    key_deserializer: Deserializer = None,
    value_deserializer: Deserializer = None,
) -> DecodedPartition:
    """The acquired records of one partition (see the module docstring)."""
    out = DecodedPartition()
    if not acquired:
        return out
    ranges = sorted(acquired, key=lambda a: a.first)
    seen: set[int] = set()  # acquired offsets that held a record (shown or acknowledged)
    #: After a bad batch: acquired offsets past it are released, not taken as gaps.
    release_after: int | None = None
    if data:
        try:
            for batch in decode_batches(
                data, max_decompressed_size=max_decompressed, validate_crc=check_crcs
            ):
                if batch.last_offset < ranges[0].first:
                    continue
                if batch.base_offset > ranges[-1].last:
                    break
                if batch.magic == 2 and batch.is_control:
                    continue  # its acquired offsets become gaps below
                try:
                    _take_batch(out, seen, topic, partition, batch, ranges)
                except KafkaError as exc:  # the batch itself is bad
                    _reject(out, seen, ranges, batch.base_offset, batch.last_offset)
                    out.error = _named(exc, topic, partition)
                    release_after = batch.last_offset
                    break
        except KafkaError as exc:  # a batch failing its CRC, or one that does not even frame
            first = exc.offset if isinstance(exc, CorruptRecordError) else None
            after = exc.next_offset if isinstance(exc, CorruptRecordError) else None
            known = first is not None and after is not None and after > first
            out.error = _named(exc, topic, partition, rejected=known)
            if first is not None and after is not None and known:
                _reject(out, seen, ranges, first, after - 1)  # the batch its header names
                release_after = after - 1
            else:  # where the bad bytes end is not known: release, do not reject
                release_after = ranges[0].first - 1
    if key_deserializer is not None or value_deserializer is not None:
        _deserialize(out, seen, topic, partition, key_deserializer, value_deserializer)
    for r in ranges:
        for offset in range(r.first, r.last + 1):
            if offset not in seen:
                late = release_after is not None and offset > release_after
                out.auto_acks[offset] = int(AcknowledgeType.RELEASE) if late else GAP
    return out


def _take_batch(  # noqa: PLR0917
    out: DecodedPartition,
    seen: set[int],
    topic: str,
    partition: int,
    batch: Any,
    ranges: Sequence[Acquired],
) -> None:
    epoch = batch.partition_leader_epoch if batch.magic == 2 else -1
    ts_type = batch.timestamp_type
    first, last = batch.base_offset, batch.last_offset
    whole = next((r for r in ranges if r.first <= first and last <= r.last), None)
    if whole is not None and batch.magic == 2:
        template = ShareConsumerRecord(
            topic, partition, 0, 0, ts_type, None, None, (), epoch, whole.delivery_count
        )
        rows = batch.rows(template, _ROW_SLOTS)
        out.records.extend(rows)
        seen.update(r.offset for r in rows)
        return
    for offset, ts, key, value, headers in batch.tuples():
        for r in ranges:
            if r.first <= offset <= r.last:
                out.records.append(
                    ShareConsumerRecord(
                        topic,
                        partition,
                        offset,
                        ts,
                        ts_type,
                        key,
                        value,
                        headers,
                        epoch,
                        r.delivery_count,
                    )
                )
                seen.add(offset)
                break


def _reject(
    out: DecodedPartition, seen: set[int], ranges: Sequence[Acquired], first: int, last: int
) -> None:
    for r in ranges:
        for offset in range(max(r.first, first), min(r.last, last) + 1):
            out.auto_acks[offset] = int(AcknowledgeType.REJECT)
            seen.add(offset)


def _named(exc: KafkaError, topic: str, partition: int, rejected: bool = True) -> KafkaError:
    how = (
        "the batch's acquired records were rejected (they will not be delivered again)"
        if rejected
        else "the acquired records from there on were released (delivered again, up to the "
        "group's delivery count limit)"
    )
    err = type(exc)(f"share fetch of {topic}-{partition}: {exc.message}; {how}")
    if isinstance(exc, CorruptRecordError) and isinstance(err, CorruptRecordError):
        err.topic_partition = (topic, partition)
        err.offset = exc.offset
        err.next_offset = exc.next_offset
    return err


def _deserialize(  # noqa: PLR0917
    out: DecodedPartition,
    seen: set[int],
    topic: str,
    partition: int,
    kd: Deserializer,
    vd: Deserializer,
) -> None:
    """Deserialize keys and values in place; at the first failure keep the records
    before it, RELEASE the failing one and everything after it (they were never
    shown), and set the error."""
    done: list[ShareConsumerRecord] = []
    for i, rec in enumerate(out.records):
        which = "key"
        try:
            key = rec.key if kd is None or rec.key is None else kd(rec.key)
            which = "value"
            value = rec.value if vd is None or rec.value is None else vd(rec.value)
        except Exception as exc:  # any deserializer failure
            err = SerializationError(
                f"{which} deserializer failed on {topic}-{partition} at offset {rec.offset}: "
                f"{exc!r}; the record was released (it is delivered again, up to the group's "
                "delivery count limit)"
            )
            err.__cause__ = exc
            err.topic_partition = (topic, partition)
            err.offset = rec.offset
            for later in out.records[i:]:
                out.auto_acks[later.offset] = int(AcknowledgeType.RELEASE)
                seen.add(later.offset)
            out.records = done
            if out.error is None:
                out.error = err
            return
        done.append(rec._replace(key=key, value=value))
    out.records = done
