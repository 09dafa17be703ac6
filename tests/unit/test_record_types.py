"""The consumer's record types, as the C accelerator adopts them (``adopt_record``).

With the accelerator, ConsumerRecord and ShareConsumerRecord read their fields
through member descriptors at fixed item slots and reuse freed records. These
tests hold them to everything a NamedTuple promises (and that a user's code may
rely on), to memory safety on odd instances (short ones made by
``tuple.__new__``, subclasses), and to exact reference counting across the free
list; the last test checks the pure-Python build keeps plain NamedTuples.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import subprocess
import sys
import weakref
from typing import Any

import pytest

from kpax.consumer.record import ConsumerRecord, ShareConsumerRecord
from kpax.proto.records import v2

pytestmark = pytest.mark.skipif(not v2.SPEEDUPS, reason="the C accelerator is not built")

TYPES = [ConsumerRecord, ShareConsumerRecord]
#: Where parse_rows puts offset, timestamp, key, value and headers in both types.
SLOTS = (2, 3, 5, 6, 7)


def sample(cls: type[Any], offset: int = 7) -> Any:
    extra = (3,) if cls is ShareConsumerRecord else ()
    return cls("t", 1, offset, 1_700_000_000_000, 0, b"k", b"v" * 10, (("h", b"x"),), 4, *extra)


def built(cls: type[Any], values: list[bytes | None], base_offset: int = 100) -> list[Any]:
    """Records built as the consumer builds them: parse_rows over a real v2 batch."""
    n = len(values)
    ts = 1_700_000_000_000
    batch = v2.encode_batch([ts] * n, [b"key"] * n, values, None, ts, 0, 0, -1, -1, -1, 0)
    extra = (1,) if cls is ShareConsumerRecord else ()
    template = cls("t", 2, 0, 0, 0, None, None, (), 5, *extra)
    return list(
        v2.parse_rows(
            batch, v2.HEADER_SIZE, len(batch), n, base_offset, ts, template, SLOTS, None, None
        )
    )


def test_both_types_are_adopted() -> None:
    for cls in TYPES:
        assert type(cls.__dict__["value"]).__name__ == "member_descriptor"
        assert cls.value.__doc__ == "Alias for field number 6"


@pytest.mark.parametrize("cls", TYPES)
def test_fields_read_what_the_tuple_holds(cls: type[Any]) -> None:
    rec = sample(cls)
    assert [getattr(rec, f) for f in cls._fields] == list(rec)
    assert rec.offset == rec[2] == 7
    assert rec.headers == (("h", b"x"),)
    topic, partition, *_ = rec
    assert (topic, partition) == ("t", 1)
    for i, rec in enumerate(built(cls, [b"a", None, b"ccc"])):
        assert rec.offset == 100 + i
        assert rec.value == [b"a", None, b"ccc"][i]
        assert (rec.key, rec.topic, rec.partition, rec.leader_epoch) == (b"key", "t", 2, 5)


@pytest.mark.parametrize("cls", TYPES)
def test_fields_are_read_only(cls: type[Any]) -> None:
    rec = sample(cls)
    with pytest.raises(AttributeError):
        rec.value = b"other"
    with pytest.raises(AttributeError):
        del rec.offset
    assert rec.value == b"v" * 10


@pytest.mark.parametrize("cls", TYPES)
def test_the_named_tuple_api_is_whole(cls: type[Any]) -> None:
    rec = sample(cls)
    assert isinstance(rec, tuple)
    assert rec == tuple(rec) and hash(rec) == hash(tuple(rec))
    assert rec._replace(offset=8).offset == 8 and rec.offset == 7
    assert list(rec._asdict()) == list(cls._fields)
    assert cls._make(list(rec)) == rec
    with pytest.raises(TypeError):
        cls._make([1, 2])
    assert repr(rec).startswith(f"{cls.__name__}(topic='t', partition=1, offset=7")
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(rec, proto))
        assert type(again) is cls and again == rec and again.value == rec.value
    assert copy.copy(rec) == rec and copy.deepcopy(rec) == rec
    match rec:
        case cls(topic="t", offset=off):  # type: ignore[misc]
            assert off == 7
        case _:
            pytest.fail("not matched")


@pytest.mark.parametrize("cls", TYPES)
def test_a_short_instance_reads_no_memory_past_its_items(cls: type[Any]) -> None:
    short = tuple.__new__(cls, ("t", 1))
    assert len(short) == 2 and short.topic == "t" and short.partition == 1
    for name in cls._fields[2:]:
        with pytest.raises(AttributeError):
            getattr(short, name)
    del short
    longer = tuple.__new__(cls, range(20))
    assert len(longer) == 20 and longer.offset == 2 and longer[19] == 19


@pytest.mark.parametrize("cls", TYPES)
def test_subclasses_work_and_free_their_dict(cls: type[Any]) -> None:
    class Mine(cls):  # type: ignore[misc, valid-type]
        @property
        def size(self) -> int:
            return len(self.value)

    before = sys.getrefcount(Mine)
    mine = Mine(*sample(cls))
    mine.note = ["mine"]  # a subclass without __slots__ has a __dict__
    assert mine.size == 10 and mine.offset == 7 and mine.note == ["mine"]
    del mine
    assert sys.getrefcount(Mine) == before
    with pytest.raises(TypeError, match="needs its"):
        tuple.__new__(Mine, ("t",))  # its __dict__ sits where a field would be read

    class Slotted(cls):  # type: ignore[misc, valid-type]
        __slots__ = ()

    class Deeper(Slotted):
        __slots__ = ()

    for sub in (Slotted, Deeper):
        assert sub(*sample(cls)).value == b"v" * 10
        short = tuple.__new__(sub, ("t",))
        assert len(short) == 1 and short.topic == "t"
        with pytest.raises(AttributeError):
            short.value  # noqa: B018 - the read is the test


@pytest.mark.parametrize("cls", TYPES)
def test_reused_records_hold_only_their_own_items(cls: type[Any]) -> None:
    """The free list: records freed and built again, from batches of other sizes and
    contents, never show an item of the record their memory held before."""
    for round_ in range(1, 30):
        values = [bytes([round_ % 256]) * (i % 7) if i % 5 else None for i in range(round_ * 37)]
        recs = built(cls, values, base_offset=1000 * round_)
        assert [r.value for r in recs] == values
        assert [r.offset for r in recs] == [1000 * round_ + i for i in range(len(values))]
        recs += [sample(cls, offset=i) for i in range(round_)]  # built by the constructor
        assert all(len(r) == len(cls._fields) for r in recs)
        del recs


@pytest.mark.parametrize("cls", TYPES)
def test_reference_counts_balance_across_the_free_list(cls: type[Any]) -> None:
    value = b"shared value object" * 3
    template = sample(cls)
    gc.collect()
    type_refs, value_refs = sys.getrefcount(cls), sys.getrefcount(value)
    for _ in range(3):
        recs = [template._replace(value=value, offset=i) for i in range(10_000)]
        recs += built(cls, [b"x"] * 5_000)
        assert sys.getrefcount(value) == value_refs + 10_000
        del recs
    assert (sys.getrefcount(cls), sys.getrefcount(value)) == (type_refs, value_refs)


@pytest.mark.parametrize("cls", TYPES)
def test_a_cycle_through_a_record_is_collected(cls: type[Any]) -> None:
    class Holder:
        rec: Any = None

    holder = Holder()
    holder.rec = sample(cls)._replace(value=holder)
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None


def test_the_pure_python_build_keeps_named_tuples() -> None:
    code = (
        "from kpax.consumer.record import ConsumerRecord as C\n"
        "print(type(C.__dict__['value']).__name__, C('t', 0, 1, 2, 0, None, b'v', (), 0).value)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "KPAX_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["_tuplegetter", "b'v'"]
