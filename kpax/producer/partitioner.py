"""Choosing a partition for a record, exactly as the Java client does.

Role: the producer's partitioners (pure logic, no I/O, no clocks).

* :func:`murmur2` is ``org.apache.kafka.common.utils.Utils.murmur2`` (signed
  32-bit result) and :func:`partition_for_key` is the Java client's
  ``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % n``. A
  keyed record lands on the same partition as with the Java client, for every
  key (an empty key ``b""`` is hashed; only ``None`` means "no key").
* :class:`DefaultPartitioner` hashes keys and spreads keyless records with the
  Java 3.3+ "uniform sticky" behaviour of KIP-794 (see the class).
* :class:`UniformStickyPartitioner` is the same stickiness for every record
  (Java's ``partitioner.ignore.keys=true``), :class:`RoundRobinPartitioner` is
  Java's ``RoundRobinPartitioner``.
* :func:`as_partitioner` turns a plain function
  ``f(topic, key, value, num_partitions) -> int`` into a :class:`Partitioner`.

The producer accumulator calls ``partition(...)`` for a record without an
explicit partition, appends the record, then calls ``on_append(topic,
partition, record_size)``. Not thread-safe: the accumulator serialises calls.

Imports: kpax.producer.fastpath (the C murmur2, when built), the standard library.
"""

from __future__ import annotations

import random
import struct
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from kpax.producer.fastpath import sendpath

__all__ = [
    "DefaultPartitioner",
    "Partitioner",
    "PartitionerFunction",
    "RoundRobinPartitioner",
    "UniformStickyPartitioner",
    "as_partitioner",
    "murmur2",
    "partition_for_key",
    "to_positive",
]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
#: ``unpack_from`` of n little-endian uint32 words, for keys up to 256 bytes.
_UNPACK: list[Callable[..., tuple[int, ...]]] = [
    struct.Struct(f"<{n}I").unpack_from for n in range(65)
]


def _murmur2_py(data: bytes | bytearray) -> int:
    """murmur2 as an unsigned 32-bit value (the bits of the Java ``int``): the
    pure-Python reference (the C one, ``_sendpath.murmur2``, must agree).

    Words are unpacked all at once; ``h`` is masked once per word (the low 32
    bits of products and xors depend only on the low 32 bits of the operands).
    """
    length = len(data)
    h = _SEED ^ length
    n = length >> 2
    if n:
        unpack = _UNPACK[n] if n < 65 else struct.Struct(f"<{n}I").unpack_from
        for word in unpack(data):
            k = (word * _M) & _MASK
            h = ((h * _M) ^ ((k ^ (k >> 24)) * _M)) & _MASK
    rem = length & 3
    if rem:
        tail = length & ~3
        if rem == 3:
            h ^= data[tail + 2] << 16
        if rem >= 2:
            h ^= data[tail + 1] << 8
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


_C_MURMUR2: Callable[[bytes], int] | None = sendpath.murmur2 if sendpath is not None else None


def _murmur2_unsigned(data: bytes | bytearray) -> int:
    """murmur2 as an unsigned 32-bit value: in C for bytes when the C send path is
    built (partition_for_key of a 9-byte key: 0.4-0.65 us against 2.2 us by
    ``timeit``, on a busy machine), else :func:`_murmur2_py`."""
    if _C_MURMUR2 is not None and type(data) is bytes:
        return _C_MURMUR2(data)
    return _murmur2_py(data)


def murmur2(data: bytes | bytearray) -> int:
    """The Java client's ``Utils.murmur2(data)``: a signed 32-bit int."""
    h = _murmur2_unsigned(data)
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit of a 32-bit int."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray, num_partitions: int) -> int:
    """Java's ``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % n``."""
    if _C_MURMUR2 is not None and type(key) is bytes:
        return (_C_MURMUR2(key) & 0x7FFFFFFF) % num_partitions
    return (_murmur2_py(key) & 0x7FFFFFFF) % num_partitions


@runtime_checkable
class Partitioner(Protocol):
    """What the producer accumulator needs from a partitioner."""

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        """The partition for a record; *available* lists partitions with a leader (None: all)."""
        ...

    def on_append(self, topic: str, partition: int, record_size: int) -> None:
        """Called after a record of *record_size* bytes was appended to *partition*."""
        ...


PartitionerFunction = Callable[[str, "bytes | None", "bytes | None", int], int]


class _FunctionPartitioner:
    """Wraps ``f(topic, key, value, num_partitions) -> int`` as a :class:`Partitioner`."""

    def __init__(self, func: PartitionerFunction) -> None:
        self.func = func

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        p = self.func(topic, key, value, num_partitions)
        if not isinstance(p, int) or not 0 <= p < num_partitions:
            raise ValueError(
                f"custom partitioner {self.func!r} returned {p!r} for topic {topic!r}, "
                f"which has partitions 0..{num_partitions - 1}"
            )
        return p

    def on_append(self, topic: str, partition: int, record_size: int) -> None:
        return None

    def __repr__(self) -> str:
        return f"as_partitioner({self.func!r})"


def as_partitioner(obj: Partitioner | PartitionerFunction) -> Partitioner:
    """A :class:`Partitioner` from an object that has ``partition`` (returned as is,
    given a no-op ``on_append`` if it lacks one) or from a plain function
    ``f(topic, key, value, num_partitions) -> int``."""
    if isinstance(obj, Partitioner):
        return obj
    part = getattr(obj, "partition", None)
    if callable(part):
        return _FunctionPartitioner(part)
    if callable(obj):
        return _FunctionPartitioner(obj)
    raise TypeError(
        f"partitioner must be a Partitioner object or a function "
        f"f(topic, key, value, num_partitions) -> int, not {type(obj).__name__}"
    )


class _StickyState:
    """The sticky partition of one topic and the bytes produced to it so far."""

    __slots__ = ("cumulative", "partition", "partition_ids", "produced")

    def __init__(self) -> None:
        self.partition = -1
        self.produced = 0
        # Adaptive load stats (Java's PartitionLoadStats): partition ids and the
        # cumulative frequency table of their weights, or None when not known.
        self.partition_ids: list[int] | None = None
        self.cumulative: list[int] | None = None


class UniformStickyPartitioner:
    """KIP-794 uniform sticky partitioning for every record (keys are ignored).

    Java 3.3+ ``BuiltInPartitioner``: all records of a topic go to one "sticky"
    partition until at least ``batch_size`` bytes were appended to it, then a new
    sticky partition is picked at random among the *available* partitions (those
    with a leader; all of them when none is available or the list is not given).
    The accumulator may pass ``allow_switch=False`` to ``on_append`` while the
    partition's last batch is not yet full: the switch then waits until
    ``2 * batch_size`` bytes (Java's rule, avoiding fractional batches).
    Every ``on_append`` to the sticky partition counts, also that of a keyed record
    that hashed to it (Java counts only the records it placed itself).

    Adaptive partitioning (Java's ``partitioner.adaptive.partitioning.enable``):
    when the accumulator reports per-partition queue sizes (batches waiting) with
    :meth:`update_load`, the next sticky partition is drawn with weight
    ``max_queue + 1 - queue`` so partitions of slower brokers get less traffic,
    as Java does. Without load reports the draw is uniform.
    """

    def __init__(self, batch_size: int = 16384, *, rng: random.Random | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self._rng = rng or random.Random()
        self._topics: dict[str, _StickyState] = {}

    def _next_partition(
        self, state: _StickyState, num_partitions: int, available: Sequence[int] | None
    ) -> int:
        rnd = self._rng.getrandbits(31)
        ids, cumulative = state.partition_ids, state.cumulative
        if ids is not None and cumulative is not None and cumulative[-1] > 0:
            choice = ids[bisect_right(cumulative, rnd % cumulative[-1])]
            if choice < num_partitions:
                return choice
        if available:
            return available[rnd % len(available)]
        return rnd % num_partitions

    def sticky_partition(
        self, topic: str, num_partitions: int, available: Sequence[int] | None = None
    ) -> int:
        """The topic's current sticky partition (picking one if there is none yet)."""
        if num_partitions < 1:
            raise ValueError(f"topic {topic!r} has no partitions (num_partitions={num_partitions})")
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = _StickyState()
        p = state.partition
        if (
            p < 0
            or p >= num_partitions
            or (available is not None and available and p not in available)
        ):
            state.partition = p = self._next_partition(state, num_partitions, available)
            state.produced = 0
        return p

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        return self.sticky_partition(topic, num_partitions, available)

    def on_append(
        self, topic: str, partition: int, record_size: int, *, allow_switch: bool = True
    ) -> None:
        state = self._topics.get(topic)
        if state is None or state.partition != partition:
            return  # a keyed record, an explicit partition, or a stale choice
        state.produced += record_size
        produced = state.produced
        if (allow_switch and produced >= self.batch_size) or produced >= 2 * self.batch_size:
            state.partition = -1  # pick a new one on the next record (needs num_partitions)
            state.produced = 0

    @property
    def sticky_states(self) -> dict[str, _StickyState]:
        """topic -> its sticky state (``partition``, ``produced``). The producer's
        accumulator reads the current sticky partition here and moves on (sets
        ``partition = -1`` and calls :meth:`partition`) once the sticky
        partition's batch is full -- about ``batch_size`` bytes as in KIP-794,
        never leaving a fractional batch behind -- instead of two calls per
        record."""
        return self._topics

    def update_load(self, topic: str, queue_sizes: Mapping[int, int]) -> None:
        """Adaptive partitioning: *queue_sizes* maps each available partition of
        *topic* to the number of batches waiting for it; an empty mapping drops
        the stats (uniform draw again)."""
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = _StickyState()
        if not queue_sizes:
            state.partition_ids = state.cumulative = None
            return
        ids = sorted(queue_sizes)
        max_plus_1 = max(queue_sizes.values()) + 1
        cumulative: list[int] = []
        total = 0
        for p in ids:
            total += max_plus_1 - queue_sizes[p]
            cumulative.append(total)
        state.partition_ids, state.cumulative = ids, cumulative

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size})"


class DefaultPartitioner(UniformStickyPartitioner):
    """The Java producer's default: murmur2 for keyed records, uniform sticky
    (see :class:`UniformStickyPartitioner`) for records whose key is ``None``."""

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        if key is not None:
            if num_partitions < 1:
                raise ValueError(
                    f"topic {topic!r} has no partitions (num_partitions={num_partitions})"
                )
            return partition_for_key(key, num_partitions)
        return self.sticky_partition(topic, num_partitions, available)


class RoundRobinPartitioner:
    """Java's ``RoundRobinPartitioner``: a per-topic counter from 0, each record
    (keyed or not) to the next available partition, or to the next partition of
    all when none is available."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        if num_partitions < 1:
            raise ValueError(f"topic {topic!r} has no partitions (num_partitions={num_partitions})")
        n = self._counters.get(topic, 0)
        self._counters[topic] = (n + 1) & 0x7FFFFFFF
        if available:
            return available[n % len(available)]
        return n % num_partitions

    def on_append(self, topic: str, partition: int, record_size: int) -> None:
        return None
