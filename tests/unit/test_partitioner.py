"""The producer's partitioners: Java's murmur2 vectors, sticky switching, custom ones."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import pytest

from kpax.producer.partitioner import (
    DefaultPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    UniformStickyPartitioner,
    _murmur2_py,
    as_partitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Vectors from Apache Kafka's UtilsTest.testMurmur2 (the Java client's own test).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_VECTORS.items()))
def test_murmur2_matches_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    # the pure-Python reference too (murmur2 is C's for bytes when it is built)
    assert _murmur2_py(key) == expected & 0xFFFFFFFF
    assert murmur2(bytearray(key)) == expected  # (a bytearray takes the Python path)


def test_murmur2_is_signed_32_bit_and_handles_every_tail_length() -> None:
    rng = random.Random(7)
    for length in range(300):
        h = murmur2(rng.randbytes(length))
        assert -(2**31) <= h < 2**31
    assert murmur2(b"") == murmur2(bytearray())  # empty key is hashed, not "no key"


def test_partition_for_key_is_to_positive_mod() -> None:
    for key in JAVA_VECTORS:
        for n in (1, 3, 7, 100):
            assert partition_for_key(key, n) == to_positive(murmur2(key)) % n
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0


def test_default_partitioner_hashes_keys_ignoring_availability() -> None:
    p = DefaultPartitioner()
    for key in JAVA_VECTORS:
        # Keyed records go to the hashed partition even if it has no leader (as Java).
        assert p.partition("t", key, b"v", 12, available=[0]) == partition_for_key(key, 12)


def test_sticky_stays_until_batch_size_then_switches() -> None:
    p = DefaultPartitioner(batch_size=1000, rng=random.Random(1))
    first = p.partition("t", None, b"x", 50)
    for _ in range(9):  # 900 bytes: still below batch.size
        assert p.partition("t", None, b"x", 50) == first
        p.on_append("t", first, 100)
    assert p.partition("t", None, b"x", 50) == first
    p.on_append("t", first, 100)  # 1000 bytes reached: switch
    seen = [p.partition("t", None, b"x", 50) for _ in range(3)]
    assert len(set(seen)) == 1  # a new sticky partition, stable until its own batch fills


def test_sticky_spreads_uniformly_over_many_switches() -> None:
    p = UniformStickyPartitioner(batch_size=100, rng=random.Random(3))
    counts: Counter[int] = Counter()
    for _ in range(40_000):
        part = p.partition("t", None, None, 4)
        counts[part] += 1
        p.on_append("t", part, 50)
    assert set(counts) == {0, 1, 2, 3}
    assert max(counts.values()) < 1.2 * min(counts.values())


def test_sticky_switch_is_delayed_until_twice_batch_size_when_not_allowed() -> None:
    p = UniformStickyPartitioner(batch_size=100, rng=random.Random(5))
    first = p.partition("t", None, None, 1000)
    p.on_append("t", first, 150, allow_switch=False)  # batch not full: keep going
    assert p.partition("t", None, None, 1000) == first
    p.on_append("t", first, 50, allow_switch=False)  # 200 = 2 * batch_size: switch anyway
    # The state was reset: the next choice is a fresh random draw and counts from 0.
    second = p.partition("t", None, None, 1000)
    p.on_append("t", second, 99)
    assert p.partition("t", None, None, 1000) == second


def test_sticky_chooses_only_available_partitions() -> None:
    p = DefaultPartitioner(batch_size=10, rng=random.Random(11))
    chosen = set()
    for _ in range(500):
        part = p.partition("t", None, b"v", 10, available=[2, 5, 7])
        chosen.add(part)
        p.on_append("t", part, 10)
    assert chosen == {2, 5, 7}


def test_sticky_leaves_a_partition_that_lost_its_leader() -> None:
    p = DefaultPartitioner(batch_size=10_000, rng=random.Random(2))
    first = p.partition("t", None, b"v", 6)
    others = [i for i in range(6) if i != first]
    assert p.partition("t", None, b"v", 6, available=others) in others


def test_sticky_falls_back_to_all_partitions_when_none_available() -> None:
    p = DefaultPartitioner(batch_size=1, rng=random.Random(4))
    chosen = set()
    for _ in range(300):
        part = p.partition("t", None, b"v", 3, available=[])
        chosen.add(part)
        p.on_append("t", part, 1)
    assert chosen == {0, 1, 2}


def test_sticky_is_per_topic_and_keyed_appends_do_not_count() -> None:
    p = DefaultPartitioner(batch_size=100, rng=random.Random(9))
    a = p.partition("a", None, None, 1000)
    b = p.partition("b", None, None, 1000)
    p.on_append("b", b, 1_000)
    keyed = partition_for_key(b"k", 1000)
    if keyed != a:
        p.on_append("a", keyed, 1_000)  # a keyed record elsewhere: not the sticky partition
    assert p.partition("a", None, None, 1000) == a


def test_adaptive_load_avoids_busy_partitions() -> None:
    p = UniformStickyPartitioner(batch_size=1, rng=random.Random(8))
    p.update_load("t", {0: 10, 1: 0, 2: 10})  # weights 1, 11, 1
    counts: Counter[int] = Counter()
    for _ in range(13_000):
        part = p.partition("t", None, None, 3)
        counts[part] += 1
        p.on_append("t", part, 1)
    assert counts[1] > 5 * counts[0] and counts[1] > 5 * counts[2]
    p.update_load("t", {})  # stats dropped: uniform again
    counts.clear()
    for _ in range(9_000):
        part = p.partition("t", None, None, 3)
        counts[part] += 1
        p.on_append("t", part, 1)
    assert max(counts.values()) < 1.3 * min(counts.values())


def test_round_robin_cycles_over_available_then_all() -> None:
    p = RoundRobinPartitioner()
    assert [p.partition("t", b"k", None, 4) for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    assert [p.partition("u", None, None, 5, available=[1, 3]) for _ in range(4)] == [1, 3, 1, 3]


def test_partitioners_reject_topics_without_partitions() -> None:
    for p in (DefaultPartitioner(), UniformStickyPartitioner(), RoundRobinPartitioner()):
        with pytest.raises(ValueError, match="'t' has no partitions"):
            p.partition("t", None, None, 0)
    with pytest.raises(ValueError, match="batch_size"):
        DefaultPartitioner(batch_size=0)


def test_plain_function_is_wrapped_and_checked() -> None:
    def by_length(topic: str, key: bytes | None, value: bytes | None, n: int) -> int:
        return len(value or b"") % n

    p = as_partitioner(by_length)
    assert isinstance(p, Partitioner)
    assert p.partition("t", None, b"abcde", 3) == 2
    p.on_append("t", 2, 10)  # a no-op, but callable by the accumulator

    bad = as_partitioner(lambda topic, key, value, n: n)
    with pytest.raises(ValueError, match=r"returned 3 for topic 't', which has partitions 0\.\.2"):
        bad.partition("t", None, None, 3)


def test_protocol_objects_pass_through_and_partial_objects_are_wrapped() -> None:
    class Fixed:
        def partition(
            self,
            topic: str,
            key: bytes | None,
            value: bytes | None,
            num_partitions: int,
            available: Sequence[int] | None = None,
        ) -> int:
            return 1

        def on_append(self, topic: str, partition: int, record_size: int) -> None:
            pass

    fixed = Fixed()
    assert as_partitioner(fixed) is fixed
    d = DefaultPartitioner()
    assert as_partitioner(d) is d

    class OnlyPartition:
        def partition(self, topic: str, key: bytes | None, value: bytes | None, n: int) -> int:
            return 0

    wrapped = as_partitioner(OnlyPartition())  # type: ignore[arg-type]
    assert wrapped.partition("t", None, None, 2) == 0
    wrapped.on_append("t", 0, 1)

    with pytest.raises(TypeError, match="not int"):
        as_partitioner(5)  # type: ignore[arg-type]
