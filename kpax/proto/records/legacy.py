"""Legacy message sets: MessageSet v0 (magic 0) and v1 (magic 1).

Role: encode a list of records as a v0/v1 message set (one wrapper message
holding the compressed inner set when a codec is used) and decode one shallow
message into a :class:`LegacyBatch` with the same attributes as a v2 batch.

Format (big-endian): each entry is offset i64, size i32, then the message:
crc u32 (CRC-32 of what follows), magic i8, attributes i8 (bits 0-2 codec,
bit 3 timestamp type for v1), [timestamp i64, v1 only], key (i32 length, -1 for
null, bytes), value (same). A compressed message carries the inner message set
as its value; the wrapper's offset is the last inner offset. Inner offsets are
absolute in v0 and relative (0..n-1) in v1, where the absolute offset is
``wrapper_offset - last_inner_offset + inner_offset`` (KIP-31). In v1, inner
records of a LOG_APPEND_TIME wrapper take the wrapper's timestamp.

Imports: the standard library and kpax.proto.{errors,crc,compression,records.v2}.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any, Final

from kpax.proto import crc as _crc
from kpax.proto.compression import (
    CODEC_NAMES,
    CODEC_NONE,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    compress,
    decompress,
)
from kpax.proto.errors import CorruptRecordError
from kpax.proto.records.v2 import DecodedRecord, RecordTuple

__all__ = ["LegacyBatch", "encode_message_set", "legacy_entry_size"]

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_TS_TYPE: Final = 0x08
_MIN_SIZE: Final = {0: 14, 1: 22}
_NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()


def _bytes_field(b: bytes | None) -> bytes:
    if b is None:
        return b"\xff\xff\xff\xff"
    return _I32.pack(len(b)) + b


def _message(
    magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = b"".join(
        (
            bytes((magic, attributes)),
            _I64.pack(timestamp) if magic == 1 else b"",
            _bytes_field(key),
            _bytes_field(value),
        )
    )
    return _U32.pack(_crc.crc32(body)) + body


def _entry(offset: int, message: bytes) -> bytes:
    return struct.pack(">qi", offset, len(message)) + message


def legacy_entry_size(magic: int, key: bytes | None, value: bytes | None) -> int:
    """Bytes one uncompressed entry takes (offset + size + message)."""
    return 12 + _MIN_SIZE[magic] + (len(key) if key else 0) + (len(value) if value else 0)


def encode_message_set(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    *,
    magic: int,
    base_offset: int,
    codec: int,
    timestamp_type: int,
) -> bytes:
    """A v0/v1 message set; with a codec, one wrapper message around the inner set."""
    ts_attr = _TS_TYPE if magic == 1 and timestamp_type == 1 else 0
    n = len(values)
    if codec == CODEC_NONE:
        return b"".join(
            _entry(base_offset + i, _message(magic, ts_attr, timestamps[i], keys[i], values[i]))
            for i in range(n)
        )
    inner = b"".join(
        _entry(
            i if magic == 1 else base_offset + i,
            _message(magic, 0, timestamps[i], keys[i], values[i]),
        )
        for i in range(n)
    )
    wrapper_ts = max(timestamps) if magic == 1 else -1
    wrapper = _message(
        magic, codec | ts_attr, wrapper_ts, None, compress(codec, inner, magic=magic)
    )
    return _entry(base_offset + n - 1, wrapper)


class _Message:
    __slots__ = ("attributes", "crc", "key", "magic", "offset", "timestamp", "value")
    attributes: int
    crc: int
    magic: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    def __init__(self, buf: bytes, pos: int, end: int, validate_crc: bool) -> None:
        # buf[pos:end] is one entry (offset, size, message), end = pos + 12 + size
        self.offset, size, self.crc, self.magic, self.attributes = _ENTRY.unpack_from(buf, pos)
        if self.magic not in (0, 1):
            raise CorruptRecordError(f"message at byte {pos} has unknown magic {self.magic}")
        if size < _MIN_SIZE[self.magic]:
            raise CorruptRecordError(
                f"message at byte {pos} (offset {self.offset}) is too short ({size} bytes)"
            )
        if validate_crc:
            actual = _crc.crc32(memoryview(buf)[pos + 16 : end])
            if actual != self.crc:
                raise CorruptRecordError(
                    f"message at offset {self.offset} (byte {pos}) fails its CRC-32 check "
                    f"(stored {self.crc:#010x}, computed {actual:#010x})"
                )
        p = pos + 18
        if self.magic == 1:
            (self.timestamp,) = _I64.unpack_from(buf, p)
            p += 8
        else:
            self.timestamp = -1
        self.key, p = self._field(buf, p, end, "key")
        self.value, p = self._field(buf, p, end, "value")
        if p != end:
            raise CorruptRecordError(
                f"message at offset {self.offset} (byte {pos}) has {end - p} stray bytes"
            )

    def _field(self, buf: bytes, p: int, end: int, what: str) -> tuple[bytes | None, int]:
        if p + 4 > end:
            raise CorruptRecordError(f"message at offset {self.offset}: {what} length truncated")
        (n,) = _I32.unpack_from(buf, p)
        p += 4
        if n == -1:
            return None, p
        if n < 0 or p + n > end:
            raise CorruptRecordError(f"message at offset {self.offset}: bad {what} length {n}")
        return buf[p : p + n], p + n


class LegacyBatch:
    """One shallow v0/v1 message: a single record, or a compressed wrapper of many."""

    __slots__ = ("_max_size", "_msg", "_rows", "_validate", "decompressed_size")

    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    partition_leader_epoch = -1
    is_transactional = False
    is_control = False

    def __init__(
        self,
        buf: bytes,
        pos: int,
        end: int,
        *,
        validate_crc: bool = True,
        max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._msg = _Message(buf, pos, end, validate_crc)
        self._validate = validate_crc
        self._max_size = max_size
        self._rows: list[RecordTuple] | None = None
        #: Bytes the wrapper's value decompressed to (0 until decoded, or uncompressed).
        self.decompressed_size = 0

    @property
    def magic(self) -> int:
        return int(self._msg.magic)

    @property
    def crc(self) -> int:
        return int(self._msg.crc)

    @property
    def attributes(self) -> int:
        return int(self._msg.attributes)

    @property
    def compression(self) -> str:
        return CODEC_NAMES[self._msg.attributes & 0x07]

    @property
    def timestamp_type(self) -> int:
        if self._msg.magic == 0:
            return -1
        return 1 if self._msg.attributes & _TS_TYPE else 0

    @property
    def base_offset(self) -> int:
        rows = self.tuples()
        return rows[0][0] if rows else int(self._msg.offset)

    @property
    def last_offset(self) -> int:
        return int(self._msg.offset)

    @property
    def next_offset(self) -> int:
        return int(self._msg.offset) + 1

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def base_timestamp(self) -> int:
        return int(self._msg.timestamp)

    first_timestamp = base_timestamp

    @property
    def max_timestamp(self) -> int:
        return int(self._msg.timestamp)

    def __len__(self) -> int:
        return len(self.tuples())

    def tuples(self) -> list[RecordTuple]:
        """Every record as ``(offset, timestamp, key, value, headers)``."""
        if self._rows is not None:
            return self._rows
        msg = self._msg
        codec = msg.attributes & 0x07
        if codec == CODEC_NONE:
            self._rows = [(msg.offset, msg.timestamp, msg.key, msg.value, _NO_HEADERS)]
            return self._rows
        if codec > 3:
            raise CorruptRecordError(
                f"message at offset {msg.offset} has unknown compression codec id {codec} "
                f"for magic {msg.magic}"
            )
        if msg.value is None:
            raise CorruptRecordError(f"compressed message at offset {msg.offset} has no value")
        try:
            inner = decompress(codec, msg.value, max_size=self._max_size, magic=msg.magic)
        except CorruptRecordError as e:
            err = type(e)(f"message at offset {msg.offset}: {e.message}")
            err.next_offset = msg.offset + 1
            raise err from None
        self.decompressed_size = len(inner)
        msgs: list[_Message] = []
        pos = 0
        n = len(inner)
        while pos < n:
            if n - pos < 12:
                raise CorruptRecordError(
                    f"inner message set of offset {msg.offset} is truncated at byte {pos}"
                )
            (size,) = _I32.unpack_from(inner, pos + 8)
            if size < 0 or pos + 12 + size > n or n - pos < 18:
                raise CorruptRecordError(
                    f"inner message at byte {pos} of offset {msg.offset} has a bad size {size}"
                )
            m = _Message(inner, pos, pos + 12 + size, self._validate)
            if m.attributes & 0x07:
                raise CorruptRecordError(
                    f"inner message at byte {pos} of offset {msg.offset} is itself compressed"
                )
            msgs.append(m)
            pos += 12 + size
        if not msgs:
            self._rows = []
            return self._rows
        if msg.magic == 1:
            delta = msg.offset - msgs[-1].offset
            log_append = bool(msg.attributes & _TS_TYPE)
            self._rows = [
                (
                    delta + m.offset,
                    msg.timestamp if log_append else m.timestamp,
                    m.key,
                    m.value,
                    _NO_HEADERS,
                )
                for m in msgs
            ]
        else:
            self._rows = [(m.offset, -1, m.key, m.value, _NO_HEADERS) for m in msgs]
        return self._rows

    def columns(self) -> tuple[list[int], list[int], list[Any], list[Any], list[Any]]:
        rows = self.tuples()
        if not rows:
            return [], [], [], [], []
        o, t, k, v, h = zip(*rows, strict=True)
        return list(o), list(t), list(k), list(v), list(h)

    def __iter__(self) -> Iterator[DecodedRecord]:
        tt = self.timestamp_type
        for row in self.tuples():
            yield DecodedRecord(row[0], row[1], tt, row[2], row[3], row[4])

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, last_offset={self.last_offset}, "
            f"compression={self.compression!r})"
        )
