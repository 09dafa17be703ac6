"""One partition's log: RecordBatch v2 bytes with offsets, as a Kafka leader keeps them.

Role: storage and reads of one partition, sans I/O. :meth:`PartitionLog.append`
takes the batches a producer sent, checks each (magic 2, CRC-32C, size, codec;
the producer's epoch and sequence through :mod:`kpax.testing.fake.producers`),
assigns offsets as Kafka does -- it rewrites the batch's base offset and
partition leader epoch, keeps the producer id, epoch and sequence, and stores a
compressed batch as it was sent (with ``LogAppendTime`` the max timestamp and
the CRC are rewritten) -- and returns the base offset. A retried batch that is a
duplicate gets the offset it was first written at.

Reads: :meth:`PartitionLog.read` returns whole stored batches from the one that
holds an offset, up to a byte budget (the first batch of a response always
goes, KIP-74) and an upper bound (the high watermark, or the last stable
offset for ``read_committed``), with :meth:`aborted_in` the aborted
transactions a ``read_committed`` consumer needs. Offsets by timestamp, the
leader epoch history (OffsetForLeaderEpoch) and DeleteRecords (the log start
offset) are here too. Replication is instant: the high watermark is the log
end offset.

Imports: kpax.testing.fake.{codes,producers}, kpax.proto (crc, records) and the
standard library.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from kpax.proto import crc as _crc
from kpax.proto.errors import CorruptRecordError
from kpax.proto.records import ControlRecord, decode_batches, encode_batch
from kpax.testing.fake import codes
from kpax.testing.fake.producers import ProducerStates

__all__ = ["AppendResult", "PartitionLog", "StoredBatch"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_U32 = struct.Struct(">I")
_CRC_AT = 17
_CRC_FROM = 21
_ATTR_AT = 21
_MAX_TS_AT = 35
_CODEC_MASK = 0x07
_TS_TYPE = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


@dataclass(slots=True)
class StoredBatch:
    """A batch in the log: its bytes (offsets assigned) and the header fields reads need."""

    base_offset: int
    last_offset: int
    data: bytes
    leader_epoch: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: bool

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(slots=True)
class AppendResult:
    """A partition's answer to a Produce: the base offset or an error code."""

    error: int = codes.NONE
    base_offset: int = -1
    log_append_time: int = -1
    message: str | None = None


@dataclass(slots=True)
class _Parsed:
    data: bytearray
    attributes: int
    last_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int


@dataclass
class PartitionLog:
    """The batches of one partition and its offsets (see the module docstring)."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    batches: list[StoredBatch] = field(default_factory=list)
    #: (leader epoch, its first offset), oldest first: the leader epoch cache.
    epochs: list[tuple[int, int]] = field(default_factory=list)
    #: producer id -> first offset of its open transaction in this partition.
    ongoing: dict[int, int] = field(default_factory=dict)
    #: (producer id, first offset, marker offset) of aborted transactions, oldest first.
    aborted: list[tuple[int, int, int]] = field(default_factory=list)
    producers: ProducerStates = field(default_factory=ProducerStates)
    _bases: list[int] = field(default_factory=list)
    _bytes: int = 0

    # ------------------------------------------------------------ offsets

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        if self.ongoing:
            return min(self.ongoing.values())
        return self.log_end_offset

    @property
    def size_in_bytes(self) -> int:
        return self._bytes

    def new_leader_epoch(self, epoch: int) -> None:
        """A leader with ``epoch`` starts writing at the log end offset."""
        if self.epochs and self.epochs[-1][1] == self.log_end_offset:
            self.epochs[-1] = (epoch, self.log_end_offset)
        else:
            self.epochs.append((epoch, self.log_end_offset))

    def end_offset_for_epoch(self, epoch: int, current: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= ``epoch``, its end offset), or
        (-1, -1) when ``epoch`` is older than every epoch the log knows."""
        if epoch == current:
            return current, self.log_end_offset
        best = None
        for i, (e, _start) in enumerate(self.epochs):
            if e > epoch:
                if best is None:
                    return -1, -1
                return self.epochs[best][0], self.epochs[i][1]
            best = i
        if best is None:
            return -1, -1
        return self.epochs[best][0], self.log_end_offset

    def epoch_at(self, offset: int) -> int:
        """The leader epoch the record at ``offset`` was written in (-1: unknown)."""
        out = -1
        for e, start in self.epochs:
            if start > offset:
                break
            out = e
        return out

    # ------------------------------------------------------------ append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        max_message_bytes: int,
        log_append_time: bool = False,
        timestamp_after_max_ms: int | None = None,
    ) -> AppendResult:
        """Append the batches of one partition's Produce data (see the module docstring)."""
        try:
            parsed = list(self._parse(records, max_message_bytes))
        except _Refused as refused:
            return AppendResult(refused.code, message=refused.message)
        if not parsed:
            return AppendResult(codes.CORRUPT_MESSAGE, message="no record batch in the request")
        if timestamp_after_max_ms is not None:
            for p in parsed:
                if p.max_timestamp > now_ms + timestamp_after_max_ms:
                    return AppendResult(
                        codes.INVALID_TIMESTAMP,
                        message=f"timestamp {p.max_timestamp} is more than "
                        f"{timestamp_after_max_ms} ms after the broker's time {now_ms}",
                    )
        first = parsed[0]
        if first.producer_id >= 0:
            if len(parsed) > 1:
                return AppendResult(
                    codes.INVALID_RECORD, message="an idempotent Produce carries one batch"
                )
            verdict = self.producers.check(
                first.producer_id, first.producer_epoch, first.base_sequence, first.count
            )
            if verdict.error != codes.NONE:
                return AppendResult(verdict.error, message=verdict.message)
            if verdict.duplicate_offset is not None:
                return AppendResult(base_offset=verdict.duplicate_offset)
        base = self.log_end_offset
        append_time = -1
        for p in parsed:
            if log_append_time:
                append_time = now_ms
                _set_log_append_time(p.data, now_ms)
                p.max_timestamp = now_ms
            self._store(p, leader_epoch)
        if first.producer_id >= 0:
            self.producers.record(
                first.producer_id, first.producer_epoch, first.base_sequence, first.count, base
            )
            if first.attributes & _TRANSACTIONAL and first.producer_id not in self.ongoing:
                self.ongoing[first.producer_id] = base
        return AppendResult(base_offset=base, log_append_time=append_time)

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        coordinator_epoch: int,
        leader_epoch: int,
        now_ms: int,
    ) -> int:
        """Write a transaction marker (a control batch) and close the producer's open
        transaction here; an abort is added to the aborted-transactions index.
        Returns the marker's offset."""
        kind = 1 if commit else 0
        data = encode_batch(
            [ControlRecord(kind, coordinator_epoch, timestamp=now_ms)],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=True,
            base_timestamp=now_ms,
        )
        p = self._parse_one(bytearray(data), 0)
        offset = self.log_end_offset
        self._store(p, leader_epoch)
        first = self.ongoing.pop(producer_id, None)
        if not commit and first is not None:
            self.aborted.append((producer_id, first, offset))
        self.producers.marker(producer_id, producer_epoch)
        return offset

    def _parse(
        self, records: bytes | bytearray | memoryview, max_message_bytes: int
    ) -> Iterator[_Parsed]:
        data = bytes(records)
        pos = 0
        while pos < len(data):
            if len(data) - pos < HEADER_SIZE:
                raise _Refused(codes.CORRUPT_MESSAGE, f"{len(data) - pos} bytes are not a batch")
            (length,) = _I.unpack_from(data, pos + 8)
            end = pos + 12 + length
            if length < HEADER_SIZE - 12 or end > len(data):
                raise _Refused(codes.CORRUPT_MESSAGE, f"batch at byte {pos}: bad length {length}")
            if 12 + length > max_message_bytes:
                raise _Refused(
                    codes.MESSAGE_TOO_LARGE,
                    f"a batch of {12 + length} bytes is larger than max.message.bytes "
                    f"({max_message_bytes})",
                )
            yield self._parse_one(bytearray(data[pos:end]), pos)
            pos = end

    @staticmethod
    def _parse_one(buf: bytearray, pos: int) -> _Parsed:
        (
            _base,
            _length,
            _epoch,
            magic,
            crc,
            attributes,
            last_delta,
            _first_ts,
            max_ts,
            pid,
            pepoch,
            bseq,
            count,
        ) = _HEADER.unpack_from(buf, 0)
        if magic != 2:
            raise _Refused(codes.CORRUPT_MESSAGE, f"batch at byte {pos}: magic {magic}, not 2")
        if _crc.crc32c(memoryview(buf)[_CRC_FROM:]) != crc:
            raise _Refused(codes.CORRUPT_MESSAGE, f"batch at byte {pos} fails its CRC-32C check")
        if attributes & _CODEC_MASK > 4:
            raise _Refused(
                codes.UNSUPPORTED_COMPRESSION_TYPE,
                f"batch at byte {pos}: unknown codec {attributes & _CODEC_MASK}",
            )
        if count <= 0 or last_delta < 0:
            raise _Refused(codes.INVALID_RECORD, f"batch at byte {pos} has no records")
        return _Parsed(buf, attributes, last_delta, max_ts, pid, pepoch, bseq, count)

    def _store(self, p: _Parsed, leader_epoch: int) -> None:
        base = self.log_end_offset
        _Q.pack_into(p.data, 0, base)
        _I.pack_into(p.data, 12, leader_epoch)
        stored = StoredBatch(
            base_offset=base,
            last_offset=base + p.last_delta,
            data=bytes(p.data),
            leader_epoch=leader_epoch,
            max_timestamp=p.max_timestamp,
            producer_id=p.producer_id,
            producer_epoch=p.producer_epoch,
            base_sequence=p.base_sequence,
            transactional=bool(p.attributes & _TRANSACTIONAL),
            control=bool(p.attributes & _CONTROL),
        )
        self.batches.append(stored)
        self._bases.append(base)
        self._bytes += stored.size
        self.log_end_offset = stored.last_offset + 1

    # ------------------------------------------------------------ reads

    def index_of(self, offset: int) -> int:
        """The index of the batch holding ``offset`` (or the first one after it)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        if self.batches[i].last_offset < offset:
            return i + 1
        return i

    def read(
        self, offset: int, max_bytes: int, upper: int, *, at_least_one: bool
    ) -> tuple[list[bytes], int]:
        """Stored batches from the one holding ``offset``, each starting below
        ``upper``, while they fit in ``max_bytes`` (the first always does when
        ``at_least_one``). Returns (batch bytes, total size)."""
        out: list[bytes] = []
        size = 0
        for i in range(self.index_of(offset), len(self.batches)):
            b = self.batches[i]
            if b.base_offset >= upper:
                break
            if size + b.size > max_bytes and not (at_least_one and not out):
                break
            out.append(b.data)
            size += b.size
        return out, size

    def bytes_between(self, offset: int, upper: int) -> int:
        """The size of the batches a read from ``offset`` below ``upper`` would return."""
        total = 0
        for i in range(self.index_of(offset), len(self.batches)):
            b = self.batches[i]
            if b.base_offset >= upper:
                break
            total += b.size
        return total

    def aborted_in(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions with records in [start, end)."""
        return [(pid, first) for pid, first, last in self.aborted if last >= start and first < end]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int]:
        """(offset, timestamp, leader epoch) of the first record at or after
        ``timestamp``, or (-1, -1, -1) when there is none."""
        for i in range(self.index_of(self.log_start_offset), len(self.batches)):
            b = self.batches[i]
            if b.max_timestamp < timestamp:
                continue
            for rec in _records(b):
                off, ts = rec
                if off >= self.log_start_offset and ts >= timestamp:
                    return off, ts, b.leader_epoch
        return -1, -1, -1

    def max_timestamp_offset(self) -> tuple[int, int, int]:
        """(offset, timestamp, leader epoch) of the record with the largest timestamp."""
        best = (-1, -1, -1)
        for i in range(self.index_of(self.log_start_offset), len(self.batches)):
            b = self.batches[i]
            if b.max_timestamp <= best[1]:
                continue
            for off, ts in _records(b):
                if ts > best[1] and off >= self.log_start_offset:
                    best = (off, ts, b.leader_epoch)
        return best

    def delete_before(self, offset: int) -> None:
        """DeleteRecords: the log starts at ``offset``; whole batches below it go."""
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        keep = self.index_of(offset)
        for b in self.batches[:keep]:
            self._bytes -= b.size
        del self.batches[:keep]
        del self._bases[:keep]


def _records(b: StoredBatch) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of a stored batch."""
    try:
        batch = next(decode_batches(b.data))
    except (StopIteration, CorruptRecordError):
        return []
    return [(row[0], row[1]) for row in batch.tuples()]


def _set_log_append_time(buf: bytearray, now_ms: int) -> None:
    (attributes,) = _H.unpack_from(buf, _ATTR_AT)
    _H.pack_into(buf, _ATTR_AT, attributes | _TS_TYPE)
    _Q.pack_into(buf, _MAX_TS_AT, now_ms)
    _U32.pack_into(buf, _CRC_AT, _crc.crc32c(memoryview(buf)[_CRC_FROM:]))


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
