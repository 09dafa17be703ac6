"""Kafka wire primitives: the small encode/decode helpers the generated messages call.

Role: everything below a message field: unsigned varints, (compact) strings,
bytes, records, uuids, arrays and tagged-field sections, read from a
``memoryview`` at an absolute position and written by appending to a
``bytearray``. Readers take ``(data, pos)`` and return ``(value, new_pos)``;
values of the variable-length readers are typed ``Any`` because their
nullability depends on the version (the generated classes carry the precise
types). They raise :class:`~kpax.proto.errors.ProtocolError` on bad lengths and let
``IndexError``/``struct.error`` escape for plain truncation, which
:meth:`kpax.proto.api.Message.decode` turns into ``ProtocolError`` (so the hot
path pays for no extra checks).

Fixed-width runs of fields are (un)packed by the generated code itself with
precompiled :class:`struct.Struct` objects; these helpers cover the
variable-length parts.

Imports: the standard library and kpax.proto.errors only.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kpax.proto.errors import InvalidMessageError, ProtocolError

__all__ = [
    "ZERO_UUID",
    "read_array",
    "read_bytes",
    "read_fixed_array",
    "read_records",
    "read_str",
    "read_tags",
    "read_uuid",
    "read_uvarint",
    "write_array",
    "write_bytes",
    "write_fixed_array",
    "write_records",
    "write_str",
    "write_tags",
    "write_uuid",
    "write_uvarint",
]

_T = TypeVar("_T")

#: The all-zero UUID: Kafka's "no topic id" value and the default of uuid fields.
ZERO_UUID = uuid.UUID(int=0)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]


def _truncated(what: str, need: int, have: int) -> ProtocolError:
    return ProtocolError(f"truncated {what}: needs {need} bytes, {have} left")


# ------------------------------------------------------------------- varints


def read_uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes, i.e. 32 bits) at ``pos``."""
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")


def write_uvarint(buf: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**32) as an unsigned varint."""
    if value < 0x80:
        buf.append(value)
        return
    if value >> 32:
        raise InvalidMessageError(f"value {value} does not fit an unsigned 32-bit varint")
    while value >= 0x80:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


# ------------------------------------------------------------------- lengths


def _read_len(data: memoryview, pos: int, compact: bool) -> tuple[int, int]:
    """A length prefix: -1 means null."""
    if compact:
        n = data[pos]
        if n < 0x80:
            return n - 1, pos + 1
        n, pos = read_uvarint(data, pos)
        return n - 1, pos
    (n,) = _I32.unpack_from(data, pos)
    return n, pos + 4


# ------------------------------------------------------------------- strings


def read_str(
    data: memoryview, pos: int, compact: bool, nullable: bool, name: str
) -> tuple[Any, int]:
    """A string (``int16`` or compact length prefix) named ``name`` in errors."""
    if compact:
        n = data[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(data, pos)
        n -= 1
    else:
        (n,) = _I16.unpack_from(data, pos)
        pos += 2
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"field {name}: bad string length {n}")
    end = pos + n
    if end > len(data):
        raise _truncated(f"string {name}", n, len(data) - pos)
    try:
        return str(data[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"field {name}: string is not valid UTF-8 ({exc})") from None


def write_str(buf: bytearray, value: str | None, compact: bool, nullable: bool, name: str) -> None:
    """Append a string with its (compact) length prefix."""
    if value is None:
        if not nullable:
            raise InvalidMessageError(f"field {name} is not nullable in this version")
        buf += b"\x00" if compact else b"\xff\xff"
        return
    raw = value.encode()
    n = len(raw)
    if compact:
        if n < 0x7F:
            buf.append(n + 1)
        else:
            write_uvarint(buf, n + 1)
    else:
        if n > 0x7FFF:
            raise InvalidMessageError(f"field {name}: string of {n} bytes is too long")
        buf += _I16.pack(n)
    buf += raw


# --------------------------------------------------------------------- bytes


def read_bytes(
    data: memoryview, pos: int, compact: bool, nullable: bool, name: str
) -> tuple[Any, int]:
    """A bytes field (``int32`` or compact length prefix), copied out."""
    n, pos = _read_len(data, pos, compact)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"field {name}: bad bytes length {n}")
    end = pos + n
    if end > len(data):
        raise _truncated(f"bytes {name}", n, len(data) - pos)
    return bytes(data[pos:end]), end


def read_records(
    data: memoryview, pos: int, compact: bool, nullable: bool, name: str
) -> tuple[Any, int]:
    """A records field: a zero-copy ``memoryview`` slice of ``data`` (or None)."""
    n, pos = _read_len(data, pos, compact)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"field {name}: bad records length {n}")
    end = pos + n
    if end > len(data):
        raise _truncated(f"records {name}", n, len(data) - pos)
    return data[pos:end], end


def write_bytes(
    buf: bytearray,
    value: bytes | bytearray | memoryview | None,
    compact: bool,
    nullable: bool,
    name: str,
) -> None:
    """Append bytes (or records) with their (compact) length prefix."""
    if value is None:
        if not nullable:
            raise InvalidMessageError(f"field {name} is not nullable in this version")
        buf += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    n = value.nbytes if isinstance(value, memoryview) else len(value)
    if compact:
        write_uvarint(buf, n + 1)
    else:
        buf += _I32.pack(n)
    buf += value


write_records = write_bytes


# ---------------------------------------------------------------------- uuid


def read_uuid(data: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    """A 16-byte UUID."""
    end = pos + 16
    if end > len(data):
        raise _truncated("uuid", 16, len(data) - pos)
    return uuid.UUID(bytes=bytes(data[pos:end])), end


def write_uuid(buf: bytearray, value: uuid.UUID) -> None:
    """Append a 16-byte UUID."""
    buf += value.bytes


# -------------------------------------------------------------------- arrays


def read_array(  # noqa: PLR0917  (positional: hot path)
    data: memoryview,
    pos: int,
    compact: bool,
    nullable: bool,
    name: str,
    read: Reader,
) -> tuple[Any, int]:
    """An array whose elements are read one by one with ``read``."""
    n, pos = _read_len(data, pos, compact)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"field {name}: bad array length {n}")
    if n > len(data) - pos:
        raise ProtocolError(f"field {name}: array of {n} elements in {len(data) - pos} bytes")
    out: list[Any] = []
    append = out.append
    for _ in range(n):
        item, pos = read(data, pos)
        append(item)
    return out, pos


def read_fixed_array(  # noqa: PLR0917  (positional: hot path)
    data: memoryview,
    pos: int,
    compact: bool,
    nullable: bool,
    name: str,
    code: str,
    size: int,
) -> tuple[Any, int]:
    """An array of fixed-width numbers (``code`` is a struct format letter)."""
    n, pos = _read_len(data, pos, compact)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolError(f"field {name}: bad array length {n}")
    end = pos + n * size
    if end > len(data):
        raise _truncated(f"array {name}", n * size, len(data) - pos)
    return list(struct.unpack_from(f">{n}{code}", data, pos)), end


def write_array(  # noqa: PLR0917  (positional: hot path)
    buf: bytearray,
    value: Sequence[_T] | None,
    compact: bool,
    nullable: bool,
    name: str,
    write: Callable[[bytearray, _T], None],
) -> None:
    """Append an array, each element written with ``write``."""
    if value is None:
        if not nullable:
            raise InvalidMessageError(f"field {name} is not nullable in this version")
        buf += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    if compact:
        write_uvarint(buf, len(value) + 1)
    else:
        buf += _I32.pack(len(value))
    for item in value:
        write(buf, item)


def write_fixed_array(  # noqa: PLR0917  (positional: hot path)
    buf: bytearray,
    value: Sequence[Any] | None,
    compact: bool,
    nullable: bool,
    name: str,
    code: str,
) -> None:
    """Append an array of fixed-width numbers in one pack call."""
    if value is None:
        if not nullable:
            raise InvalidMessageError(f"field {name} is not nullable in this version")
        buf += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    n = len(value)
    if compact:
        write_uvarint(buf, n + 1)
    else:
        buf += _I32.pack(n)
    buf += struct.pack(f">{n}{code}", *value)


# -------------------------------------------------------------- tagged fields


def read_tags(data: memoryview, pos: int) -> tuple[dict[int, bytes] | None, int]:
    """A tagged-field section none of whose tags are known: all kept as raw bytes."""
    n = data[pos]
    if n == 0:
        return None, pos + 1
    n, pos = read_uvarint(data, pos)
    tags: dict[int, bytes] = {}
    for _ in range(n):
        tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise _truncated(f"tagged field {tag}", size, len(data) - pos)
        tags[tag] = bytes(data[pos:end])
        pos = end
    return tags, pos


def write_tags(
    buf: bytearray, known: list[tuple[int, bytes]], unknown: dict[int, bytes] | None
) -> None:
    """Append a tagged-field section: ``known`` (tag, payload) pairs and the
    ``unknown`` ones kept from a decode, in ascending tag order."""
    items = known
    if unknown:
        items = sorted([*known, *unknown.items()])
    write_uvarint(buf, len(items))
    for tag, payload in items:
        write_uvarint(buf, tag)
        write_uvarint(buf, len(payload))
        buf += payload
