"""A partition's sequence numbers (kpax.producer.sequences), with no I/O: the
calls the producer makes, the ones it must never make, and random sequences
of producer events that keep the invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpax.errors import IllegalStateError
from kpax.producer.accumulator import PartitionQueue
from kpax.producer.batch import ProducerBatch
from kpax.producer.outcomes import BatchOutcomes
from kpax.producer.sequences import MAX_SEQUENCE, PartitionSequence, seq_add, seq_before


def test_assign_hands_out_consecutive_ranges_and_wraps_at_int32() -> None:
    s = PartitionSequence("t", 0)
    assert [s.assign(n) for n in (3, 1, 5)] == [0, 3, 4]
    assert (s.next, s.acked, s.outstanding) == (9, 0, 9)
    s.ack(0, 9)
    # near the end of the sequence space: the next range starts again at 0
    w = PartitionSequence("t", 0)
    w._next = w._acked = MAX_SEQUENCE - 1  # (placed there as 2**31 - 2 records would)
    assert w.assign(2) == MAX_SEQUENCE - 1
    assert w.next == 0 and w.assign(3) == 0 and w.outstanding == 5
    w.ack(MAX_SEQUENCE - 1, 2)
    assert w.acked == 0
    w.ack(0, 3)
    assert w.acked == 3 and w.outstanding == 0


def test_wrapping_arithmetic() -> None:
    assert seq_add(MAX_SEQUENCE, 1) == 0 and seq_add(0, -1) == MAX_SEQUENCE
    assert seq_before(MAX_SEQUENCE - 1, 3) and not seq_before(3, MAX_SEQUENCE - 1)
    assert seq_before(1, 2) and not seq_before(2, 2) and not seq_before(2, 1)


def test_a_batch_that_cannot_be_encoded_gives_back_the_numbers_just_handed_out() -> None:
    s = PartitionSequence("t", 2)
    s.assign(4)
    base = s.assign(2)
    with pytest.raises(IllegalStateError, match=r"t-2: sequences 0..3 are not the last handed out"):
        s.unassign(0, 4)  # not the last range: a later batch holds numbers after it
    s.unassign(base, 2)
    assert s.next == 4


def test_give_back_moves_the_numbers_after_a_failed_batch_down() -> None:
    s = PartitionSequence("t", 0)
    for n in (2, 3, 4):
        s.assign(n)
    s.give_back(2, 3)  # the middle batch failed unwritten: the last one is renumbered 2..5
    assert s.next == 6
    s.ack(0, 2)
    with pytest.raises(IllegalStateError, match="not handed out and unacknowledged"):
        s.give_back(0, 2)  # acknowledged data keeps its numbers


def test_rewind_never_goes_below_what_the_broker_acknowledged() -> None:
    s = PartitionSequence("t", 0)
    s.assign(5)
    s.assign(5)
    s.ack(0, 5)
    s.rewind_to(5)  # the second batch was never sent
    assert s.next == 5
    with pytest.raises(IllegalStateError, match=r"cannot rewind sequences on t-0: 3 is not"):
        s.rewind_to(3)
    with pytest.raises(IllegalStateError, match="not a sequence handed out"):
        s.rewind_to(9)  # past next: never handed out


def test_acknowledgements() -> None:
    s = PartitionSequence("t", 0)
    for n in (2, 2, 2):
        s.assign(n)
    s.ack(2, 2)  # the broker took the second batch: the first was written too
    assert s.acked == 4
    s.ack(0, 2)  # its own answer, late (an earlier connection): nothing changes
    assert s.acked == 4
    with pytest.raises(IllegalStateError, match=r"sequences 6..7 were never handed out"):
        s.ack(6, 2)


def test_reset_restarts_numbering_for_a_new_epoch() -> None:
    s = PartitionSequence("t", 0)
    s.assign(7)
    s.reset()
    assert (s.next, s.acked) == (0, 0) and s.assign(1) == 0


def test_counts_must_be_positive_and_the_window_bounded() -> None:
    s = PartitionSequence("t", 0)
    with pytest.raises(IllegalStateError, match="a batch of 0 record"):
        s.assign(0)
    with pytest.raises(IllegalStateError, match="unacknowledged at once"):
        s.assign(1 << 30)


# ---------------------------------------------------------------- random event sequences

_event = st.one_of(
    st.tuples(st.just("seal"), st.integers(1, 50)),
    st.tuples(st.just("encode_failed"), st.just(0)),
    st.tuples(st.just("written"), st.integers(0, 10)),
    st.tuples(st.just("late_answer"), st.integers(0, 10)),
    st.tuples(st.just("failed_unwritten"), st.integers(0, 10)),
    st.tuples(st.just("abort_unsent"), st.integers(0, 10)),
    st.tuples(st.just("new_epoch"), st.just(0)),
)


@given(st.integers(0, MAX_SEQUENCE), st.lists(_event, max_size=60))
def test_random_producer_events_keep_the_invariants(
    start: int, events: list[tuple[str, int]]
) -> None:
    """A model of one partition: ``pending`` the (base, count) of batches sealed
    and not written, in order, ``done`` the ranges written. Whatever the events,
    no number is handed out twice to batches pending at once, pending batches
    are consecutive from ``acked`` to ``next``, and written ranges are never
    handed out again (until a new epoch)."""
    s = PartitionSequence("t", 0)
    s._next = s._acked = start  # anywhere in the space, the wrap included
    pending: list[tuple[int, int]] = []
    written: list[tuple[int, int]] = []
    for kind, arg in events:
        if kind == "seal":
            pending.append((s.assign(arg), arg))
        elif kind == "encode_failed" and pending:
            base, n = pending.pop()
            s.unassign(base, n)
        elif kind == "written" and pending:
            k = arg % len(pending)  # the broker took it, so every batch before it too
            written.extend(pending[: k + 1])
            base, n = pending[k]
            s.ack(base, n)
            del pending[: k + 1]
        elif kind == "late_answer" and written:
            base, n = written[arg % len(written)]
            s.ack(base, n)  # changes nothing
        elif kind == "failed_unwritten" and pending:
            k = arg % len(pending)
            base, n = pending.pop(k)
            s.give_back(base, n)
            pending[k:] = [(seq_add(b, -n), c) for b, c in pending[k:]]
        elif kind == "abort_unsent" and pending:
            k = arg % len(pending)
            s.rewind_to(pending[k][0])
            del pending[k:]
        elif kind == "new_epoch":
            s.reset()
            pending.clear()
            written.clear()
        # pending batches are consecutive from acked to next: nothing handed out twice
        seq = s.acked
        for base, n in pending:
            assert base == seq
            seq = seq_add(seq, n)
        assert seq == s.next
        assert s.outstanding == sum(n for _, n in pending)
        # nothing written is in the window (rewinds never reach acknowledged data)
        for base, n in written[-5:]:
            assert not s.in_window(base) and not s.in_window(seq_add(base, n - 1))


# ---------------------------------------------------------------- who is unacknowledged first


def _in_flight(pq: PartitionQueue, base: int, count: int) -> ProducerBatch:
    b = ProducerBatch(pq.topic, pq.partition, 0.0, 0, base)
    b.values.extend([b"v"] * count)
    b.base_sequence = pq.sequence.assign(count)
    b.count = count
    b.data = b"x"
    pq.in_flight.append(b)
    return b


def test_a_sequence_error_behind_an_unacknowledged_batch_is_seen_across_the_wrap() -> None:
    """A sequence error on a batch while an earlier one of its partition is
    unacknowledged is that batch's consequence (retried; a transactional
    producer's transaction goes on). Past 2**31 - 1 sequences wrap to 0: the
    batch before the wrap is still the earlier one (compared as plain ints it
    was not, and the error was taken for the broker losing the producer's
    state: an epoch bump, or the transaction failed)."""
    pq = PartitionQueue("t", 0)
    pq.sequence._next = pq.sequence._acked = MAX_SEQUENCE - 2
    first = _in_flight(pq, MAX_SEQUENCE - 2, 5)  # MAX-2 .. 1 (wraps)
    second = _in_flight(pq, 2, 3)
    assert first.base_sequence == MAX_SEQUENCE - 2 and second.base_sequence == 2
    assert BatchOutcomes._earlier_unacked(pq, second)
    assert not BatchOutcomes._earlier_unacked(pq, first)
