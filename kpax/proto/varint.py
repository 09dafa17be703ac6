"""Variable-length integers of the record formats (zigzag varint/varlong, unsigned varint).

Role: the protobuf-style base-128 integers used inside RecordBatch v2 records and
headers, with lookup tables so that the hot paths (kpax.proto.records) can encode
and decode the common 1- and 2-byte cases without a function call.

Tables (shared, read-only, built on first access):
- ``ZZ_ENC[n]`` -- the zigzag varint bytes of the non-negative int ``n`` for
  ``0 <= n < ZZ_TABLE_SIZE`` (``ZZ_ENC[0] == b"\\x00"``, ``ZZ_ENC[64] == b"\\x80\\x01"``).
- ``ZZ_DEC1[b]`` -- the signed value of the one-byte varint ``b`` (``b < 0x80``).
- ``ZZ_DEC2[b1][b0]`` -- the signed value of the two-byte varint ``b0 b1``
  (``b0 >= 0x80``, ``b1 < 0x80``); two plain list subscripts, no arithmetic.

Errors: malformed input raises :class:`kpax.proto.errors.CorruptRecordError`
naming the byte offset.

Imports: the standard library and kpax.proto.errors only.
"""

from __future__ import annotations

from kpax.proto.errors import CorruptRecordError

__all__ = [
    "ZZ_DEC1",
    "ZZ_DEC2",
    "ZZ_ENC",
    "ZZ_TABLE_SIZE",
    "decode_uvarint",
    "decode_varint",
    "encode_uvarint",
    "encode_varint",
    "size_of_varint",
]

#: Values 0 <= n < ZZ_TABLE_SIZE have a precomputed encoding in ZZ_ENC (1-3 bytes).
ZZ_TABLE_SIZE = 1 << 14

_MAX_VARLONG_BYTES = 10
_SMALL = [bytes((n << 1,)) for n in range(0x40)]


def encode_uvarint(n: int) -> bytes:
    """Unsigned base-128 varint of ``n >= 0``."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Zigzag varint (or varlong) of the signed int ``n``."""
    if 0 <= n < 0x40:
        return _SMALL[n]
    return encode_uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_varint(n: int) -> int:
    """Number of bytes of the zigzag varint of ``n``."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def decode_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``buf[pos]``: returns ``(value, next_pos)``.

    Raises CorruptRecordError when the data ends inside it or it is longer than
    10 bytes (a 64-bit varlong).
    """
    result = 0
    shift = 0
    start = pos
    n = len(buf)
    while True:
        if pos >= n:
            raise CorruptRecordError(f"varint truncated at byte {start} (data ends at {n})")
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:
            raise CorruptRecordError(f"varint at byte {start} does not fit 64 bits")
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= _MAX_VARLONG_BYTES:
            raise CorruptRecordError(f"varint at byte {start} is longer than 10 bytes")


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint/varlong at ``buf[pos]``: returns ``(value, next_pos)``."""
    z, pos = decode_uvarint(buf, pos)
    return (z >> 1) ^ -(z & 1), pos


# The tables are built on first use (module __getattr__): only the pure-Python record
# loops read them, and a process running the C accelerator never pays for them.
ZZ_ENC: list[bytes]
ZZ_DEC1: list[int]
ZZ_DEC2: list[list[int]]


def _build_tables() -> None:
    enc: list[bytes] = []
    for n in range(ZZ_TABLE_SIZE):
        z = n << 1
        if z < 0x80:
            enc.append(bytes((z,)))
        elif z < 0x4000:
            enc.append(bytes(((z & 0x7F) | 0x80, z >> 7)))
        else:
            enc.append(bytes(((z & 0x7F) | 0x80, ((z >> 7) & 0x7F) | 0x80, z >> 14)))
    g = globals()
    g["ZZ_ENC"] = enc
    g["ZZ_DEC1"] = [(b >> 1) ^ -(b & 1) for b in range(0x80)]
    g["ZZ_DEC2"] = [
        [0] * 0x80 + [(((b & 0x7F) | (c << 7)) >> 1) ^ -(b & 1) for b in range(0x80, 0x100)]
        for c in range(0x80)
    ]


def __getattr__(name: str) -> object:
    if name in ("ZZ_ENC", "ZZ_DEC1", "ZZ_DEC2"):
        _build_tables()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
