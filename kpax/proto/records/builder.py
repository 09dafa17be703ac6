"""Batch encoding: columns to batch bytes, the producer's incremental BatchBuilder,
and rewrite_producer_state for idempotent retries.

Role: the producer-side hot path. ``encode_columns`` is the single encoder behind
``encode_batch`` and ``BatchBuilder.build``; the builder only appends to four
lists per record (plus a size estimate) and encodes the whole batch at once on
``build`` (column-at-a-time, see kpax.proto.records.v2).

Size estimate: ``size_estimate`` is the header plus, per record, key + value +
headers + a fixed overhead, an upper bound of the uncompressed size (21 bytes
per v2 record, like the Java client's MAX_RECORD_OVERHEAD). ``append`` refuses a
record (returns None) when the estimate with it would pass ``batch_size``; the
first record always fits. With compression the estimate is scaled by
``compression_ratio_estimate`` (1.0 by default, i.e. no credit for compression),
which the producer may tune per topic as the Java client does.

Imports: the standard library and kpax.proto (errors, crc, compression, records.v2,
records.legacy).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

from kpax.proto import crc as _crc
from kpax.proto.compression import (
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_ZSTD,
    LZ4_FRAME_HEADER,
    codec_id,
    compress,
)
from kpax.proto.errors import ConfigError, CorruptRecordError
from kpax.proto.records.legacy import encode_message_set
from kpax.proto.records.v2 import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    Header,
    assemble_batch,
    encode_batch,
    encode_batch_lz4,
    encode_records,
)

__all__ = ["BatchBuilder", "encode_columns", "rewrite_producer_state"]

#: Upper bound of a v2 record's bytes besides key, value and headers.
RECORD_OVERHEAD_V2: Final = 21
_LEGACY_OVERHEAD: Final = {0: 26, 1: 34}
_PRODUCER = struct.Struct(">qhi")
#: Codec id -> the C call that makes a whole batch of it and the arguments it
#: takes after the common ones (the same bytes as the steps in encode_columns);
#: empty without the C module.
_FUSED: Final[dict[int, tuple[Any, tuple[bytes, ...]]]] = (
    {}
    if encode_batch is None
    else {CODEC_NONE: (encode_batch, ()), CODEC_LZ4: (encode_batch_lz4, (LZ4_FRAME_HEADER,))}
)
_U32 = struct.Struct(">I")


def encode_columns(
    timestamps: Sequence[int | None],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Sequence[Header] | None] | None = None,
    *,
    base_offset: int = 0,
    compression: str | int | None = None,
    magic: int = 2,
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    control: bool = False,
    base_timestamp: int | None = None,
) -> bytes:
    """One batch (v2) or message set (v0/v1) from parallel columns.

    A None timestamp becomes ``base_timestamp`` if given, else -1 (no
    timestamp): kpax.proto reads no clock. Returns b"" for no records.
    """
    codec = compression if isinstance(compression, int) else codec_id(compression)
    n = len(values)
    if len(keys) != n or len(timestamps) != n or (headers is not None and len(headers) != n):
        raise ValueError("timestamps, keys, values and headers must have the same length")
    if n == 0:
        return b""
    if None in timestamps:
        fill = -1 if base_timestamp is None else base_timestamp
        timestamps = [fill if t is None else t for t in timestamps]
    ts: Sequence[int] = timestamps  # type: ignore[assignment]
    if magic in (0, 1):
        if headers is not None and any(headers):
            raise ConfigError(f"record headers need record format v2 (magic 2), not {magic}")
        if control or transactional or producer_id != -1:
            raise ConfigError(
                f"control, transactional and idempotent batches need magic 2, not {magic}"
            )
        if codec == CODEC_ZSTD:
            raise ConfigError(f"zstd compression needs record format v2 (magic 2), not {magic}")
        return encode_message_set(
            ts if magic == 1 else [-1] * n,
            keys,
            values,
            magic=magic,
            base_offset=base_offset,
            codec=codec,
            timestamp_type=timestamp_type,
        )
    if magic != 2:
        raise ConfigError(f"unknown record format magic {magic}: expected 0, 1 or 2")
    base_ts = ts[0] if base_timestamp is None else base_timestamp
    attributes = codec
    if timestamp_type == 1:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    fused = _FUSED.get(codec)
    if fused is not None:
        encode, extra = fused
        batch: bytes = encode(
            ts,
            keys,
            values,
            headers,
            base_ts,
            base_offset,
            attributes,
            producer_id,
            producer_epoch,
            base_sequence,
            partition_leader_epoch,
            *extra,
        )
        return batch
    records = encode_records(ts, keys, values, headers, base_ts)
    if codec != CODEC_NONE:
        records = compress(codec, records)
    return assemble_batch(
        records,
        count=n,
        base_offset=base_offset,
        attributes=attributes,
        last_offset_delta=n - 1,
        base_timestamp=base_ts,
        max_timestamp=max(ts),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def _headers_size(headers: Sequence[Header]) -> int:
    size = 5
    for hkey, hval in headers:
        size += 10 + len(hkey) * 4 + (len(hval) if hval is not None else 0)
    return size


class BatchBuilder:
    """Accumulates records for one partition and encodes them into one batch.

    ``append(timestamp, key, value, headers)`` returns the record's relative
    offset (0, 1, ...) or None when the batch is full; ``build(...)`` returns
    the batch bytes (compressed on build). Not thread-safe: the producer's
    accumulator holds the lock.
    """

    __slots__ = (
        "_cap",
        "_compression",
        "_magic",
        "_overhead",
        "_ratio",
        "_rows",
        "_size",
        "timestamp_type",
    )

    def __init__(
        self,
        compression: str | None = None,
        magic: int = 2,
        batch_size: int = 16384,
        *,
        timestamp_type: int = 0,
        compression_ratio_estimate: float = 1.0,
    ) -> None:
        self._compression = codec_id(compression)
        if magic not in (0, 1, 2):
            raise ConfigError(f"unknown record format magic {magic}: expected 0, 1 or 2")
        self._magic = magic
        self._overhead = RECORD_OVERHEAD_V2 if magic == 2 else _LEGACY_OVERHEAD[magic]
        self._ratio = compression_ratio_estimate if self._compression else 1.0
        # the records' estimated bytes may reach _cap: header + size * ratio <= batch_size
        self._cap = (batch_size - HEADER_SIZE) / self._ratio
        self._size = 0
        self._rows: list[
            tuple[int | None, bytes | None, bytes | None, Sequence[Header] | None]
        ] = []
        self.timestamp_type = timestamp_type

    def append(
        self,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None = None,
    ) -> int | None:
        """Add a record; its relative offset, or None if the batch is full."""
        size = self._overhead
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        if headers:
            if self._magic != 2:
                raise ConfigError(f"record headers need magic 2, not {self._magic}")
            size += _headers_size(headers)
        rows = self._rows
        if self._size + size > self._cap and rows:
            return None
        self._size += size
        rows.append((timestamp, key, value, headers))
        return len(rows) - 1

    def has_room_for(self, key: bytes | None, value: bytes | None) -> bool:
        """Would a record of this key and value (no headers) fit?"""
        size = self._overhead + (len(key) if key else 0) + (len(value) if value else 0)
        return not self._rows or self._size + size <= self._cap

    @property
    def record_count(self) -> int:
        return len(self._rows)

    @property
    def size_estimate(self) -> int:
        """Upper-bound estimate of the built batch's size in bytes."""
        return int(HEADER_SIZE + self._size * self._ratio)

    @property
    def max_timestamp(self) -> int:
        ts = [r[0] for r in self._rows if r[0] is not None]
        return max(ts) if ts else -1

    def build(
        self,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        base_offset: int = 0,
    ) -> bytes:
        """Encode (and compress) the appended records into one batch."""
        if not self._rows:
            return b""
        timestamps, keys, values, headers = zip(*self._rows, strict=True)
        return encode_columns(
            timestamps,
            keys,
            values,
            headers,
            base_offset=base_offset,
            compression=self._compression,
            magic=self._magic,
            timestamp_type=self.timestamp_type,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
        )


def rewrite_producer_state(
    batch: bytes | bytearray | memoryview, producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes:
    """A copy of a built v2 batch with new producer id/epoch/base sequence and CRC."""
    buf = bytearray(batch)
    if len(buf) < HEADER_SIZE or buf[16] != 2:
        raise CorruptRecordError(
            f"rewrite_producer_state needs a v2 record batch ({len(buf)} bytes, "
            f"magic {buf[16] if len(buf) > 16 else None})"
        )
    (length,) = struct.unpack_from(">i", buf, 8)
    if length + 12 != len(buf):
        raise CorruptRecordError(
            f"rewrite_producer_state needs exactly one batch ({len(buf)} bytes, header says "
            f"{length + 12})"
        )
    _PRODUCER.pack_into(buf, 43, producer_id, producer_epoch, base_sequence)
    _U32.pack_into(buf, 17, _crc.crc32c(memoryview(buf)[21:]))
    return bytes(buf)
