"""Record weights and ``send_many``'s columns: how many bytes a record adds to a
batch, counted before it is encoded.

Role: :func:`record_weight` (a v2 record's size but for what its place in a
batch adds, so batches fill to ``batch_size`` as the Java client's do), and for
``send_many`` a :class:`Column` of records bound for one partition with their
cumulative weights, which :func:`fit` cuts into batch-sized runs with a binary
search (a few steps per batch, nothing per record). Used by the accumulator
and the producer's per-record path.

Imports: kpax.producer.batch (types only), kpax.proto.records, the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kpax.proto.records import Header

if TYPE_CHECKING:
    from kpax.producer.batch import ProducerBatch

__all__ = [
    "RECORD_FRAME_MAX",
    "Column",
    "Segment",
    "fit",
    "header_bytes",
    "record_weight",
    "varint_size",
]

#: The most a v2 record's batch-dependent fields add to its weight
#: (:func:`record_weight`): attributes (1), timestamp delta (a varlong: at most
#: 10) and offset delta (a varint: at most 5).
RECORD_FRAME_MAX = 16


def varint_size(n: int) -> int:
    """Bytes of ``n`` as a zigzag varint or varlong (the v2 record's encoding)."""
    z = n << 1 if n >= 0 else ~(n << 1)
    return (z.bit_length() + 6) // 7 or 1


def header_bytes(headers: Sequence[Header] | None) -> int:
    """Encoded bytes of a v2 record's headers, their count included."""
    if not headers:
        return 1
    size = varint_size(len(headers))
    for hkey, hval in headers:
        kl = len(hkey.encode())
        size += varint_size(kl) + kl
        if hval is None:
            size += 1
        else:
            size += varint_size(len(hval)) + len(hval)
    return size


def record_weight(key: bytes | None, value: bytes | None, headers: Sequence[Header] | None) -> int:
    """A record's encoded bytes (v2) but for what depends on its place in a
    batch: key, value and headers with their lengths, and the record's own
    length varint (for a body of up to :data:`RECORD_FRAME_MAX` more bytes).
    A batch adds ``1 + varint_size(timestamp delta) + its offset-delta bound``
    per record, so batches fill to ``batch_size`` as the Java client's do (its
    exact record sizes, not the 21-byte upper bound it allocates with: about
    10% more 100-byte records per 16 KiB batch than with that bound: 148, not 134).
    ``record_weight + RECORD_FRAME_MAX`` bounds the record's size."""
    kl = -1 if key is None else len(key)
    vl = -1 if value is None else len(value)
    p = (
        (kl + (1 if kl < 64 else 2 if kl < 8192 else varint_size(kl)) if kl > 0 else 1)
        + (vl + (1 if vl < 64 else 2 if vl < 8192 else varint_size(vl)) if vl > 0 else 1)
        + (header_bytes(headers) if headers else 1)
    )
    b = p + RECORD_FRAME_MAX
    return p + (1 if b < 64 else 2 if b < 8192 else varint_size(b))


def fit(cum: list[int], per: int, lo: int, hi: int, limit: int) -> int:
    """The largest ``j`` in ``[lo, hi]`` such that records ``lo..j-1`` weigh at
    most ``limit``, record ``k`` weighing ``cum[k + 1] - cum[k] + per``
    (a binary search: a few steps per batch, nothing per record)."""
    target = limit + cum[lo] + per * lo
    if cum[hi] + per * hi <= target:
        return hi
    a, b = lo, hi - 1
    while a < b:
        m = (a + b + 1) >> 1
        if cum[m] + per * m <= target:
            a = m
        else:
            b = m - 1
    return a


class Column:
    """Records of one ``send_many`` bound for one target (a partition, or -1:
    the sticky partitioner), in call order: ``values``/``keys`` (None: all
    keyless) and ``cum`` (cumulative record weights, :func:`record_weight`,
    ``cum[0] == 0``), so records ``i..j-1`` weigh ``cum[j] - cum[i]`` before
    what their batch adds per record (as in ``append``). ``positions``
    maps a column index to the call's record index (None: ``base + i``); ``pos``
    is the next record to append (appending resumes there after a full buffer)."""

    __slots__ = ("base", "cum", "keys", "partition", "pos", "positions", "values")

    def __init__(  # noqa: PLR0917
        self,
        partition: int,
        values: list[bytes | None],
        keys: list[bytes | None] | None,
        cum: list[int],
        base: int = 0,
        positions: list[int] | None = None,
    ) -> None:
        self.partition = partition
        self.values = values
        self.keys = keys
        self.cum = cum
        self.base = base
        self.positions = positions
        self.pos = 0


#: One run of a column placed into one batch: (batch, index of its first record
#: in the batch, column, first column index, end column index).
Segment = tuple["ProducerBatch", int, Column, int, int]
