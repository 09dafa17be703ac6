"""The share consumer's bookkeeping of what it handed out, without a broker: what a
poll, a commit and a close accept and release (implicit acknowledgement), what an
iterator that stops part-way through a batch gives back to the buffer, and the
argument checks of ``acknowledge``."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpax.consumer.record import ConsumerRecord, ShareConsumerRecord
from kpax.consumer.share.acks import AcknowledgeType, HandOut, split_slices
from kpax.consumer.share.client import AsyncShareConsumer
from kpax.consumer.share.fetcher import Chunk, ShareBuffer
from kpax.proto.errors import IllegalStateError
from kpax.structs import TopicPartition

TP = TopicPartition("t", 0)
ACCEPT, RELEASE = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)


def rec(offset: int, partition: int = 0) -> ShareConsumerRecord:
    return ShareConsumerRecord("t", partition, offset, 0, 0, None, b"", (), 0, 1)


def chunk(offsets: Iterable[int], node: int = 1, partition: int = 0) -> Chunk:
    return Chunk(node, TopicPartition("t", partition), [rec(o, partition) for o in offsets])


def offsets(slices: list[tuple[Chunk, int, int]]) -> list[int]:
    return [r.offset for c, start, end in slices for r in c.records[start:end]]


def acks_by_type(acks: list[tuple[int, object, dict[int, int]]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for _, _, by_offset in acks:
        for off, kind in by_offset.items():
            out.setdefault(kind, []).append(off)
    return out


class Worker:
    """What the client does with a buffer and a HandOut, in miniature."""

    def __init__(self, chunks: list[Chunk], max_records: int = 500) -> None:
        self.buffer = ShareBuffer()
        for c in chunks:
            self.buffer.put(c)
        self.hand: HandOut[Chunk] = HandOut()
        self.max_records = max_records

    def poll(self) -> list[int]:
        """A poll: accept what the last one handed out, hand out the next records."""
        accepted = self.hand.settle()
        slices, error = self.buffer.take(self.max_records)
        assert error is None
        self.hand.handed(slices)
        self.accepted = acks_by_type(accepted).get(ACCEPT, [])
        return offsets(slices)

    def stop_iterating(self, handed: int) -> None:
        self.buffer.put_back(self.hand.iterated(handed))

    def close(self) -> tuple[list[int], list[int], list[int]]:
        """(accepted, released, released from the buffer)."""
        by_type = acks_by_type(self.hand.settle(self.hand.moved))
        rest = [r.offset for c in self.buffer.drain() for r in c.records[c.pos :]]
        return by_type.get(ACCEPT, []), by_type.get(RELEASE, []), rest


def test_the_docs_loop_crashing_on_the_third_record_of_ten() -> None:
    w = Worker([chunk(range(10))])
    assert w.poll() == list(range(10))
    w.stop_iterating(3)  # 0 and 1 processed, 2 in hand, 3-9 never handed out
    assert w.close() == ([0, 1], [2], list(range(3, 10)))


def test_a_poll_loop_crashing_releases_the_whole_last_poll() -> None:
    w = Worker([chunk(range(10))], max_records=4)
    assert w.poll() == [0, 1, 2, 3]
    assert w.poll() == [4, 5, 6, 7]
    assert w.accepted == [0, 1, 2, 3]
    # a poll's records are all in hand until the next poll or commit
    assert w.close() == ([], [4, 5, 6, 7], [8, 9])


def test_a_poll_after_the_iterator_stopped_returns_the_rest_first() -> None:
    w = Worker([chunk(range(3)), chunk(range(10, 13), node=2, partition=1)], max_records=4)
    assert w.poll() == [0, 1, 2, 10]
    w.stop_iterating(2)  # 0 moved past, 1 in hand; 2 and 10 go back
    assert w.poll() == [2, 10, 11, 12]
    assert w.accepted == [0, 1]  # the poll accepts what the iterator handed out
    assert w.buffer.held(1) == 0 and w.buffer.held(2) == 0
    w.stop_iterating(4)  # all handed out, the last (12) in hand
    assert w.close() == ([2, 10, 11], [12], [])


def test_commit_accepts_what_was_handed_out_and_close_after_it_nothing() -> None:
    w = Worker([chunk(range(5))])
    w.poll()
    assert acks_by_type(w.hand.settle()) == {ACCEPT: [0, 1, 2, 3, 4]}  # commit
    assert w.close() == ([], [], [])


@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    max_records=st.integers(1, 20),
    handed=st.integers(0, 20),
)
def test_every_record_is_settled_once_in_order(
    sizes: list[int], max_records: int, handed: int
) -> None:
    chunks, first = [], 0
    for i, n in enumerate(sizes):
        chunks.append(chunk(range(first, first + 2 * n, 2), node=i % 2))  # offsets with gaps
        first += 2 * n + 1
    everything = [r.offset for c in chunks for r in c.records]
    w = Worker(chunks, max_records)
    batch = w.poll()
    assert batch == everything[: len(batch)]
    handed = min(handed, len(batch))
    w.stop_iterating(handed)
    accepted, released, rest = w.close()
    assert accepted == batch[: max(handed - 1, 0)]
    assert released == batch[max(handed - 1, 0) : handed]
    assert rest == everything[handed:]  # never handed out: back in the buffer, in order


def test_split_slices() -> None:
    a, b = chunk(range(3)), chunk(range(3, 6))
    assert split_slices([(a, 0, 3), (b, 0, 2)], 4) == ([(a, 0, 3), (b, 0, 1)], [(b, 1, 2)])
    assert split_slices([(a, 1, 3)], 0) == ([], [(a, 1, 3)])
    assert split_slices([(a, 1, 3)], 9) == ([(a, 1, 3)], [])


# ---------------------------------------------------------------- acknowledge's arguments


class Index:
    """An int-like partition number (numpy's integers are such)."""

    def __index__(self) -> int:
        return 0


@pytest.mark.parametrize("explicit", [True, False])
def test_acknowledge_refuses_arguments_of_the_wrong_type(explicit: bool) -> None:
    c = AsyncShareConsumer(
        "localhost:9092",
        group_id="g",
        share_acknowledgement_mode="explicit" if explicit else "implicit",
    )
    for args, name in [
        (("t", False, 5), "partition must be an int, got bool False"),
        (("t", True, 5), "partition must be an int, got bool True"),
        (("t", "0", 5), "partition must be an int, got str '0'"),
        (("t", None, 5), "partition must be an int, got NoneType"),
        (("t", 0, False), "offset must be an int, got bool False"),
        (("t", 0, 5.0), "offset must be an int, got float 5.0"),
        (("t", 0), "offset must be an int, got NoneType"),
        ((5, AcknowledgeType.ACCEPT), "got record=int 5"),
        ((b"t", 0, 5), "got record=bytes b't'"),
        ((ConsumerRecord("t", 0, 5, 0, 0, None, b"", (), 0),), "got record=ConsumerRecord"),
        ((rec(5), AcknowledgeType.ACCEPT, 5), "takes no offset"),
    ]:
        with pytest.raises(TypeError, match=name.replace("(", r"\(")):
            c._check_acknowledge(*args)  # type: ignore[arg-type]
    # the right types get as far as the mode and what was handed out
    for good in [("t", 0, 5), ("t", Index(), 5), (rec(5),), (rec(5), "reject")]:
        with pytest.raises(IllegalStateError, match="explicit" if not explicit else "t-0@5"):
            c._check_acknowledge(*good)  # type: ignore[arg-type]
