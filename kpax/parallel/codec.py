"""The completed-offsets map in a commit's metadata: encode, decode (sans-I/O).

Role: a parallel consumer commits, per partition, the first offset not yet
done (the *committed point*) and, in the commit's metadata string, which
offsets after it are done, so that a restart or the next owner skips them.
This module turns "the done ranges after the point" into that string and back.
Pure functions: no I/O, no clock, no state.

Format, version 1 (the text is ASCII, so its length in bytes is what the
broker's ``offset.metadata.max.bytes`` limits)::

    kpax-pc:1:<kind>:<payload in base64url, no padding>

``payload`` starts with the committed offset the map belongs to (an unsigned
LEB128 varint; a map whose offset is not the committed offset it was read
with is ignored), then, by ``kind``:

- ``r`` (runs): pairs of varints ``gap, length``: from a cursor starting at
  the committed offset, ``gap`` offsets not done (at least 1: the committed
  offset itself is never done), then ``length`` done (at least 1); the cursor
  moves past both. Compact when done offsets come in long runs.
- ``b`` (bitmap): a varint ``n``, then ``ceil(n / 8)`` bytes: bit ``i`` (least
  significant bit first) says whether offset ``committed + 1 + i`` is done.
  Compact when done and not-done offsets alternate.

The encoder writes both and keeps the one that records more (then the
shorter). When neither fits the byte budget whole it keeps the longest
prefix that fits: the done offsets it covers are recorded and the others are
not (they are processed again after a restart: at-least-once, never a loss);
with a budget too small for any prefix it writes no metadata at all, and only
the committed point is committed. Other metadata (empty, another client's,
an unknown version) decodes as "nothing done beyond the point".

Imports: the standard library only.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

__all__ = ["PREFIX", "VERSION", "Encoded", "decode", "encode", "is_ours"]

#: What every metadata string of this format starts with.
PREFIX = "kpax-pc:"
#: The version this module writes (and the only one it reads).
VERSION = 1
_HEAD = f"{PREFIX}{VERSION}:"
#: Longest varint read (an offset is below 2**63: 9 bytes; 10 leaves a margin).
_MAX_VARINT = 10

Ranges = Sequence[tuple[int, int]]


class Encoded:
    """What :func:`encode` made: the metadata string, and ``covered``: every
    done offset below it is recorded in the string (or below the committed
    point); done offsets at or above it are not."""

    __slots__ = ("covered", "metadata")

    def __init__(self, metadata: str, covered: int) -> None:
        self.metadata = metadata
        self.covered = covered

    def __repr__(self) -> str:
        return f"Encoded({self.metadata!r}, covered={self.covered})"


def _varint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _text(kind: str, payload: bytes | bytearray) -> str:
    data = base64.urlsafe_b64encode(bytes(payload)).rstrip(b"=").decode("ascii")
    return f"{_HEAD}{kind}:{data}"


def _payload_budget(max_bytes: int) -> int:
    """The most payload bytes whose text fits in ``max_bytes`` characters."""
    room = max_bytes - len(_HEAD) - 2  # kind and ':'
    return (room * 3) // 4 if room > 0 else -1


def _runs(base: int, ranges: Ranges, budget: int) -> tuple[bytearray, int]:
    """The runs payload of the longest prefix of ``ranges`` within ``budget``
    bytes, and the offset it covers up to."""
    out = bytearray()
    _varint(base, out)
    if len(out) > budget:
        return out, -1
    covered = base
    cursor = base
    for start, end in ranges:
        gap, length = start - cursor, end - start
        if len(out) + _varint_size(gap) + _varint_size(length) > budget:
            break
        _varint(gap, out)
        _varint(length, out)
        cursor = covered = end
    return out, covered


def _bitmap(base: int, ranges: Ranges, budget: int) -> tuple[bytearray, int]:
    """The bitmap payload of the longest prefix of offsets after ``base`` that
    fits ``budget`` bytes, and the offset it covers up to."""
    head = bytearray()
    _varint(base, head)
    span = ranges[-1][1] - base - 1  # bits for offsets base+1 .. last done
    room = budget - len(head)
    bits = span
    while bits > 0 and _varint_size(bits) + (bits + 7) // 8 > room:
        bits = max(0, min(bits - 1, (room - _varint_size(bits)) * 8))
    if room <= 0 or _varint_size(bits) + (bits + 7) // 8 > room:
        return head, -1
    mask = bytearray((bits + 7) // 8)
    limit = base + 1 + bits
    for start, end in ranges:
        if start >= limit:
            break
        lo, hi = start - base - 1, min(end, limit) - base - 1
        while lo < hi and lo % 8:
            mask[lo >> 3] |= 1 << (lo & 7)
            lo += 1
        full_end = hi - hi % 8
        if lo < full_end:
            mask[lo >> 3 : full_end >> 3] = b"\xff" * ((full_end - lo) >> 3)
            lo = full_end
        while lo < hi:
            mask[lo >> 3] |= 1 << (lo & 7)
            lo += 1
    _varint(bits, head)
    head += mask
    covered = base
    for start, end in ranges:  # the end of the last done offset recorded
        if start >= limit:
            break
        covered = min(end, limit)
    return head, covered


def encode(base: int, ranges: Ranges, max_bytes: int) -> Encoded:
    """The metadata for committed offset ``base`` whose done offsets after it
    are ``ranges`` (sorted, disjoint, non-adjacent half-open ``(start, end)``
    pairs, every ``start > base``), in at most ``max_bytes`` characters."""
    if not ranges:
        return Encoded("", base)
    budget = _payload_budget(max_bytes)
    if budget <= 0:
        return Encoded("", base)
    best: tuple[int, int, str] | None = None  # (covered, -length, text)
    for kind, make in (("r", _runs), ("b", _bitmap)):
        payload, covered = make(base, ranges, budget)
        if covered <= base:
            continue
        text = _text(kind, payload)
        if len(text) > max_bytes:  # (the budget makes this impossible; kept as a guard)
            continue
        if best is None or (covered, -len(text)) > best[:2]:
            best = (covered, -len(text), text)
    if best is None:
        return Encoded("", base)
    return Encoded(best[2], best[0])


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self) -> int:
        value = shift = 0
        for _ in range(_MAX_VARINT):
            if self.pos >= len(self.data):
                raise ValueError("truncated varint")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise ValueError("varint too long")

    @property
    def left(self) -> int:
        return len(self.data) - self.pos


def is_ours(metadata: str | None) -> bool:
    """Does ``metadata`` claim to be a completed-offsets map (any version)?"""
    return metadata is not None and metadata.startswith(PREFIX)


def decode(metadata: str | None, committed: int) -> list[tuple[int, int]] | None:
    """The done ranges after ``committed`` that ``metadata`` records: ``[]`` for
    metadata of another kind (empty, another client's); None for a map of this
    format that cannot be used (another version, damaged, or made for another
    committed offset), which the caller may report."""
    if not metadata or not metadata.startswith(PREFIX):
        return []
    try:
        version, kind, data = metadata[len(PREFIX) :].split(":", 2)
        if version != str(VERSION) or kind not in ("r", "b"):
            return None
        raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        reader = _Reader(raw)
        if reader.varint() != committed:
            return None
        return _read_runs(reader, committed) if kind == "r" else _read_bitmap(reader, committed)
    except (ValueError, binascii.Error, UnicodeEncodeError):
        return None


def _read_runs(reader: _Reader, base: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    cursor = base
    while reader.left:
        gap, length = reader.varint(), reader.varint()
        if gap < 1 or length < 1:
            raise ValueError("empty run")
        start = cursor + gap
        out.append((start, start + length))
        cursor = start + length
    return out


def _read_bitmap(reader: _Reader, base: int) -> list[tuple[int, int]]:
    bits = reader.varint()
    if reader.left != (bits + 7) // 8:
        raise ValueError("bitmap length")
    mask = int.from_bytes(reader.data[reader.pos :], "little")
    if mask >> bits:
        raise ValueError("bits past the bitmap's length")
    out: list[tuple[int, int]] = []
    i = 0
    while mask:
        skip = (mask & -mask).bit_length() - 1  # zeros before the next done offset
        mask >>= skip
        i += skip
        run = (~mask & (mask + 1)).bit_length() - 1  # ones in a row
        out.append((base + 1 + i, base + 1 + i + run))
        mask >>= run
        i += run
    return out
