"""kpax.proto.records -- Kafka record formats: RecordBatch v2 and MessageSet v0/v1.

Public API (other layers depend on it exactly)::

    from kpax.proto.records import Record, encode_batch, decode_batches
    data = encode_batch([Record(b"v", key=b"k", headers=[("h", b"v")], timestamp=1700000000000)],
                        base_offset=0, compression="lz4")
    for batch in decode_batches(data):          # v2 and legacy v0/v1 alike
        for rec in batch: rec.offset, rec.timestamp, rec.key, rec.value, rec.headers

Hot paths:
- ``batch.tuples()`` -> ``[(offset, timestamp, key, value, headers), ...]`` and
  ``batch.columns()`` -> ``(offsets, timestamps, keys, values, headers)`` lists:
  the consumer's and the Spark source's bulk decoders (no per-record objects
  besides the tuple and the key/value bytes; ``headers`` is a shared empty tuple
  when a record has none).
- ``BatchBuilder`` (producer accumulator) and ``encode_columns`` (column input).
- ``rewrite_producer_state`` for idempotent retries after an epoch bump.

Imports: the standard library and kpax.proto.* only (see the submodules; kpax.proto.accel
for the C walk over fetched batches).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any, Final

from kpax.proto.accel import speedups as _speedups
from kpax.proto.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from kpax.proto.errors import CorruptRecordError
from kpax.proto.records.builder import BatchBuilder, encode_columns, rewrite_producer_state
from kpax.proto.records.control import ABORT, COMMIT, ControlRecord
from kpax.proto.records.legacy import LegacyBatch
from kpax.proto.records.v2 import (
    HEADER_SIZE,
    DecodedRecord,
    Header,
    RecordBatchV2,
    RecordTuple,
)

__all__ = [
    "ABORT",
    "COMMIT",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "BatchBuilder",
    "ControlRecord",
    "DecodedRecord",
    "Header",
    "LegacyBatch",
    "Record",
    "RecordBatch",
    "RecordBatchV2",
    "RecordTuple",
    "decode_batches",
    "walk_many",
    "encode_batch",
    "encode_columns",
    "rewrite_producer_state",
]

CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1
NO_TIMESTAMP_TYPE: Final = -1

#: A decoded batch of either format.
RecordBatch = RecordBatchV2 | LegacyBatch

_I32 = struct.Struct(">i")
_TIMESTAMP = attrgetter("timestamp")
_KEY = attrgetter("key")
_VALUE = attrgetter("value")
_HEADERS = attrgetter("headers")
_LEGACY_MIN: Final = {0: 14, 1: 22}
#: The C walk over the good v2 batches (see decode_batches), or None without the C module.
_walk_batches: Any = None if _speedups is None else _speedups.walk_batches
#: The same over several partitions at once (see walk_many).
_walk_many: Any = None if _speedups is None else _speedups.walk_many


class Record:
    """A record to encode: value, key, headers ((str, bytes | None) pairs), timestamp (ms)."""

    __slots__ = ("headers", "key", "timestamp", "value")

    def __init__(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] | None = None,
        timestamp: int | None = None,
    ) -> None:
        self.value = value
        self.key = key
        self.headers = headers
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (
            f"Record({self.value!r}, key={self.key!r}, headers={self.headers!r}, "
            f"timestamp={self.timestamp!r})"
        )


def encode_batch(
    records: Iterable[Record | ControlRecord],
    *,
    base_offset: int = 0,
    compression: str | None = None,
    magic: int = 2,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    control: bool = False,
    base_timestamp: int | None = None,
) -> bytes:
    """Encode records as one RecordBatch v2 (or a v0/v1 message set for magic 0/1).

    ``ControlRecord`` items make a control batch. A record without a timestamp
    gets ``base_timestamp`` (or -1: this layer reads no clock).
    """
    recs = list(records)
    timestamps: list[int | None] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[Sequence[Header] | None] = []
    if set(map(type, recs)) == {Record}:  # the common case: columns made in C
        timestamps = list(map(_TIMESTAMP, recs))
        keys = list(map(_KEY, recs))
        values = list(map(_VALUE, recs))
        headers = list(map(_HEADERS, recs))
        recs = []
    for r in recs:
        if isinstance(r, ControlRecord):
            control = True
            timestamps.append(r.timestamp if r.timestamp >= 0 else None)
            keys.append(r.encode_key())
            values.append(r.encode_value())
            headers.append(None)
        else:
            timestamps.append(r.timestamp)
            keys.append(r.key)
            values.append(r.value)
            headers.append(r.headers)
    return encode_columns(
        timestamps,
        keys,
        values,
        headers,
        base_offset=base_offset,
        compression=compression,
        magic=magic,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        partition_leader_epoch=partition_leader_epoch,
        control=control,
        base_timestamp=base_timestamp,
    )


def walk_many(
    datas: list[bytes | bytearray | memoryview],
    min_offsets: list[int | None],
    *,
    validate_crc: bool = True,
    check_records: bool = False,
    borrow: bool = False,
) -> list[tuple[Any, list[int], int]] | None:
    """The C walk of :func:`decode_batches` over several partitions' bytes in one
    call (each one's ``walked``), with the GIL released once for them all when
    they are large (256 KiB and more); None without the C accelerator."""
    if _walk_many is None:
        return None
    result: list[tuple[Any, list[int], int]] = _walk_many(
        datas, min_offsets, validate_crc, check_records, borrow
    )
    return result


def decode_batches(
    data: bytes | bytearray | memoryview,
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    validate_crc: bool = True,
    allow_partial: bool = True,
    check_records: bool = False,
    min_offset: int | None = None,
    borrow: bool = False,
    walked: tuple[Any, list[int], int] | None = None,
) -> Iterator[RecordBatch]:
    """Yield each whole batch in ``data`` (v2 ``RecordBatchV2`` or legacy ``LegacyBatch``).

    A partial batch at the end (as fetch responses end) is ignored unless
    ``allow_partial`` is False. Corrupt data raises CorruptRecordError naming the
    byte offset; a compressed batch may not decompress to more than
    ``max_decompressed_size`` bytes.

    With the C accelerator, the good v2 batches from the start are framed and
    CRC-checked in one C call (``walk_batches``; the rest, from
    the first batch it does not take, is walked here, raising what it always
    raised); ``check_records`` also scans the records of the uncompressed ones
    there, which :meth:`RecordBatchV2.checked_rows` with the same ``min_offset``
    then need not do again (the consumer's I/O thread: kpax.consumer.fetcher).

    The batches read ``data`` as bytes, copied once unless it is bytes already;
    ``borrow`` (a memoryview of bytes nothing writes to any more, such as the
    consumer's own response frame) lets the C walk's batches read the view
    itself, with no copy: they then keep its whole buffer alive. ``walked`` is
    what :func:`walk_many` gave for ``data`` with the same arguments (the C walk
    done already).
    """
    pos = 0
    if walked is not None or _walk_batches is not None:
        if walked is None:
            walked = _walk_batches(data, validate_crc, check_records, min_offset, borrow)
        buf, found, pos = walked
        it = iter(found)
        for start, kept in zip(it, it, strict=True):
            batch = RecordBatchV2(buf, start, max_decompressed_size)
            if kept >= 0:
                batch.checked = (min_offset, kept)
            yield batch
    else:
        buf = data if isinstance(data, bytes) else bytes(data)
    n = len(buf)
    while n - pos >= 17:
        (length,) = _I32.unpack_from(buf, pos + 8)
        magic = buf[pos + 16]
        if magic == 2:
            if length < HEADER_SIZE - 12:
                raise CorruptRecordError(
                    f"batch at byte {pos} has a bad length {length} (at least {HEADER_SIZE - 12})"
                )
        elif magic in (0, 1):
            if length < _LEGACY_MIN[magic]:
                raise CorruptRecordError(
                    f"message at byte {pos} has a bad size {length} (magic {magic})"
                )
        else:
            raise CorruptRecordError(f"batch at byte {pos} has unknown magic {magic}")
        end = pos + 12 + length
        if end > n:
            break  # partial trailing batch
        if magic == 2:
            batch = RecordBatchV2(buf, pos, max_decompressed_size)
            if validate_crc:
                batch.validate_crc()
            yield batch
        else:
            if not isinstance(buf, bytes):
                buf = bytes(buf)  # a borrowed view: legacy messages are read from bytes
            yield LegacyBatch(
                buf, pos, end, validate_crc=validate_crc, max_size=max_decompressed_size
            )
        pos = end
    if pos < n and not allow_partial:
        raise CorruptRecordError(
            f"data ends inside a batch: {n - pos} bytes at byte {pos} are not a whole batch"
        )
