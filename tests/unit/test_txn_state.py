"""The transactional producer's state machine (kpax.producer.txn_state), with no
I/O: the table is the behaviour, and random event sequences keep its rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpax.errors import IllegalStateError, KafkaError, ProducerFencedError
from kpax.producer.txn_state import TRANSITIONS, TxnEvent, TxnMachine, TxnState

S, E = TxnState, TxnEvent
USER_CALLS = (E.INIT, E.BEGIN, E.SEND, E.SEND_OFFSETS, E.COMMIT, E.ABORT)


def _in(state: TxnState, error: KafkaError | None = None) -> TxnMachine:
    m = TxnMachine("transactional id 't'")
    m.state = state
    m.error = error
    return m


def test_every_state_has_a_row_and_only_fatal_is_a_dead_end() -> None:
    assert set(TRANSITIONS) == set(TxnState)
    for state, row in TRANSITIONS.items():
        assert row.get(E.FATAL) is S.FATAL, state  # a fatal error ends every state
        if state is not S.FATAL:
            assert any(nxt is not state for nxt in row.values()), state


def test_the_java_clients_paths() -> None:
    m = TxnMachine("transactional id 't'")
    for event, state in [
        (E.INIT, S.INITIALIZING),
        (E.INITIALIZED, S.READY),
        (E.BEGIN, S.IN_TRANSACTION),
        (E.SEND, S.IN_TRANSACTION),
        (E.SEND_OFFSETS, S.IN_TRANSACTION),
        (E.COMMIT, S.COMMITTING),
        (E.ENDED, S.READY),
        (E.BEGIN, S.IN_TRANSACTION),
        (E.FAILED, S.ABORTABLE_ERROR),
        (E.ABORT, S.ABORTING),
        (E.ENDED, S.READY),
    ]:
        assert m.fire(event, KafkaError("boom") if event is E.FAILED else None) is state
    assert m.error is None


@pytest.mark.parametrize(
    ("state", "event", "says"),
    [
        (S.UNINITIALIZED, E.BEGIN, "call init_transactions() first"),
        (S.READY, E.SEND, "call begin_transaction() first"),
        (S.READY, E.COMMIT, "call begin_transaction() first"),
        (S.IN_TRANSACTION, E.BEGIN, "the producer is in transaction"),
        (S.COMMITTING, E.ABORT, "finish that call first"),
    ],
)
def test_a_refused_call_names_the_call_the_state_and_what_to_do(state, event, says) -> None:
    m = _in(state)
    with pytest.raises(IllegalStateError, match=re.escape(says)) as exc:
        m.fire(event)
    assert event.value in str(exc.value) and "'t'" in str(exc.value)
    assert m.state is state  # nothing moved


def test_after_a_failure_only_abort_is_left_and_the_error_says_why() -> None:
    m = _in(S.IN_TRANSACTION)
    m.fire(E.FAILED, KafkaError("batch to t-0 expired"))
    m.fire(E.FAILED, KafkaError("a later one"))  # a consequence: the first stays
    for call in (E.SEND, E.SEND_OFFSETS, E.COMMIT, E.BEGIN):
        with pytest.raises(IllegalStateError, match="batch to t-0 expired; abort it"):
            m.fire(call)
    assert m.fire(E.ABORT) is S.ABORTING


def test_fatal_raises_its_error_for_every_call_after() -> None:
    m = _in(S.IN_TRANSACTION)
    fenced = ProducerFencedError("transactional id 't' was fenced")
    m.fire(E.FATAL, fenced)
    m.fire(E.FAILED, KafkaError("later"))  # ignored
    for call in USER_CALLS:
        with pytest.raises(ProducerFencedError) as exc:
            m.fire(call)
        assert exc.value is fenced


def test_a_commit_or_abort_that_timed_out_may_be_called_again() -> None:
    assert _in(S.COMMITTING).fire(E.COMMIT) is S.COMMITTING
    assert _in(S.ABORTING).fire(E.ABORT) is S.ABORTING


@given(st.lists(st.sampled_from(list(TxnEvent)), max_size=40))
def test_random_event_sequences_keep_the_rules(events: list[TxnEvent]) -> None:
    m = TxnMachine("transactional id 't'")
    for event in events:
        before = m.state
        allowed = event in TRANSITIONS[before]
        try:
            m.fire(event, KafkaError(f"{event.name} error"))
        except (IllegalStateError, KafkaError):
            assert not allowed
            assert m.state is before  # a refused event changes nothing
        else:
            assert allowed and m.state is TRANSITIONS[before][event]
        # an error is held exactly while the state is one an error put it in
        assert (m.error is not None) == (m.state in (S.ABORTABLE_ERROR, S.FATAL))
        if before is S.FATAL:
            assert m.state is S.FATAL
