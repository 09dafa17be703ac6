"""A producer batch's state machine (kpax.producer.batch_state), with no I/O:
the table is the behaviour, a refused event names the batch and its state, and
random event sequences complete a batch exactly once."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpax.errors import IllegalStateError, KafkaError
from kpax.producer.batch import ProducerBatch, RecordFuture
from kpax.producer.batch_state import FINAL, TRANSITIONS, BatchEvent, BatchState

S, E = BatchState, BatchEvent


def _batch() -> ProducerBatch:
    b = ProducerBatch("t", 0, 0.0, 0, 7)
    b.values.extend([b"a", b"b"])
    return b


def test_every_state_has_a_row_and_only_done_and_failed_are_final() -> None:
    assert set(TRANSITIONS) == set(BatchState)
    for state, row in TRANSITIONS.items():
        if state in FINAL:
            assert row == {}, state
        else:
            assert row[E.FAIL] is S.FAILED, state  # any live batch may fail (expired, aborted)
    assert {s for s in S if s not in FINAL} == {
        s for s, row in TRANSITIONS.items() if row
    }  # and nothing else is a dead end


def test_the_paths_a_batch_takes() -> None:
    paths = [
        # sealed at close, sent, written
        [(E.SEAL, S.SEALED), (E.SEND, S.IN_FLIGHT), (E.SUCCEED, S.DONE)],
        # closed before the producer id came, sealed when taken
        [(E.CLOSE, S.CLOSED), (E.SEAL, S.SEALED), (E.SEND, S.IN_FLIGHT), (E.SUCCEED, S.DONE)],
        # retried twice, then written
        [
            (E.CLOSE, S.CLOSED),
            (E.SEAL, S.SEALED),
            (E.SEND, S.IN_FLIGHT),
            (E.RETRY, S.RETRY_WAIT),
            (E.SEND, S.IN_FLIGHT),
            (E.RETRY, S.RETRY_WAIT),
            (E.SEND, S.IN_FLIGHT),
            (E.SUCCEED, S.DONE),
        ],
        # refused as too large: split, done when its parts are
        [
            (E.CLOSE, S.CLOSED),
            (E.SEAL, S.SEALED),
            (E.SEND, S.IN_FLIGHT),
            (E.SPLIT, S.SPLIT),
            (E.SUCCEED, S.DONE),
        ],
        # a part of a split batch
        [(E.SPLIT_OFF, S.RETRY_WAIT), (E.SEND, S.IN_FLIGHT), (E.SUCCEED, S.DONE)],
        # could not be encoded
        [(E.CLOSE, S.CLOSED), (E.SEAL_FAILED, S.UNENCODABLE), (E.FAIL, S.FAILED)],
        # expired while open
        [(E.FAIL, S.FAILED)],
    ]
    for path in paths:
        b = _batch()
        assert b.state is S.OPEN and not b.done
        for event, state in path:
            assert b.fire(event) is state
            assert b.done is (state in FINAL)


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (S.OPEN, E.SEND),  # an open batch has no bytes
        (S.CLOSED, E.SEND),  # not sealed: no sequence numbers
        (S.SEALED, E.RETRY),  # never sent
        (S.RETRY_WAIT, E.SUCCEED),  # an answer for a batch not in flight
        (S.IN_FLIGHT, E.SEAL),  # sealed twice: sequence numbers handed out twice
        (S.SPLIT, E.SEND),  # its parts are sent, not it
        (S.DONE, E.FAIL),  # completed once
        (S.FAILED, E.SUCCEED),
    ],
)
def test_a_refused_event_names_the_batch_and_its_state(state, event) -> None:
    b = _batch()
    b.state = state
    says = re.escape(f"batch t-0 (serial 7): it is {state.name}")
    with pytest.raises(IllegalStateError, match=says):
        b.fire(event)
    assert b.state is state


def test_a_batch_completes_once_and_a_late_answer_changes_nothing() -> None:
    b = _batch()
    for e in (E.CLOSE, E.SEAL, E.SEND):
        b.fire(e)
    f = RecordFuture(b, 1, 5)
    expired = KafkaError("expired in flight")
    b.complete(-1, -1, expired)
    b.complete(10, -1, None)  # its request's late answer
    assert b.state is S.FAILED and f.exception(0) is expired


def test_a_success_its_state_does_not_allow_fails_the_batch_instead(caplog) -> None:
    b = _batch()  # OPEN: never sent, cannot have succeeded
    f = RecordFuture(b, 0, 5)
    b.complete(3, -1, None)
    assert b.state is S.FAILED and b.done
    err = f.exception(0)
    assert isinstance(err, IllegalStateError) and "cannot succeed" in str(err)


@given(st.lists(st.sampled_from(list(BatchEvent)), max_size=30), st.data())
def test_random_event_sequences_complete_a_batch_exactly_once(events, data) -> None:
    b = _batch()
    completions = []
    b.add_callback(0, 0, lambda meta, err: completions.append(err))
    via_complete = False
    for event in events:
        before = b.state
        if event in (E.SUCCEED, E.FAIL) and data.draw(st.booleans()):
            # through complete(), as the sender does: once, whatever comes after
            b.complete(1, -1, None if event is E.SUCCEED else KafkaError("no"))
            if before in FINAL:
                assert b.state is before
            else:
                assert b.state in FINAL
                via_complete = True
            continue
        allowed = event in TRANSITIONS[before]
        try:
            b.fire(event)
        except IllegalStateError:
            assert not allowed and b.state is before
        else:
            assert allowed and b.state is TRANSITIONS[before][event]
        if before in FINAL:
            assert b.state is before  # nothing leaves DONE or FAILED
        assert b.done is (b.state in FINAL)
    # the callback ran exactly once if the batch completed through complete()
    assert len(completions) == (1 if via_complete else 0)
