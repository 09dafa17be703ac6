"""A consumer partition's fetch position as a state machine
(kpax.consumer.position_state), with no I/O: the table is the behaviour, random
event sequences keep its rules, and the position finder (``Positions``) leaves
alone a partition whose state moved on while it was asked about."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import kpax
from kpax.broker.options import connection_options
from kpax.cluster.cluster import Cluster
from kpax.config import resolve
from kpax.consumer.buffer import FetchBuffer
from kpax.consumer.fetcher import Fetcher
from kpax.consumer.options import CONSUMER_OPTIONS, ConsumerSettings
from kpax.consumer.position_state import (
    TRANSITIONS,
    FetchState,
    PositionEvent,
    PositionMachine,
    Reset,
)
from kpax.consumer.positions import Positions
from kpax.consumer.state import PartitionState
from kpax.errors import IllegalStateError
from kpax.proto.error_codes import OffsetOutOfRangeError
from kpax.structs import TopicPartition as TP

S, E = FetchState, PositionEvent
ASSIGNED = [s for s in FetchState if s is not S.REVOKED]


def test_every_state_has_a_row_and_only_revoked_is_a_dead_end() -> None:
    assert set(TRANSITIONS) == set(FetchState)
    for state in ASSIGNED:
        row = TRANSITIONS[state]
        # a seek, a reset or a revocation ends every assigned state; pause is beside it
        assert row[E.SEEK] is S.FETCHABLE, state
        assert row[E.RESET] is S.AWAITING_RESET, state
        assert row[E.REVOKE] is S.REVOKED, state
        assert row[E.FAIL] is S.FAILED, state
        assert row[E.PAUSE] is None and row[E.RESUME] is None, state
    assert TRANSITIONS[S.FETCHABLE][E.FETCHED] is None  # (fetched() skips the lookup there)
    assert set(TRANSITIONS[S.REVOKED]) == {E.REVOKE, E.ERROR_DROPPED}
    assert all(nxt is None for nxt in TRANSITIONS[S.REVOKED].values())


def test_the_java_clients_paths() -> None:
    """Assigned to a group: the committed offset (with its epoch) is validated,
    then fetched from; a leader change validates again and a truncation moves
    the position back; out of range resets per auto_offset_reset."""
    m = PositionMachine(TP("t", 0), Reset.COMMITTED)
    assert (m.state, m.reset, m.position) == (S.AWAITING_RESET, Reset.COMMITTED, None)
    m.found(42, 3, validate=True)
    assert (m.state, m.reset, m.position, m.position_epoch) == (
        S.AWAITING_VALIDATION,
        None,
        42,
        3,
    )
    assert not m.fetchable
    m.validated()
    assert m.state is S.FETCHABLE and m.fetchable
    m.fetched(50, 4)
    assert (m.position, m.fetch_position, m.fetch_epoch) == (42, 50, 4)
    m.validate()
    assert m.state is S.AWAITING_VALIDATION and m.awaiting
    gen = m.gen
    m.truncated(40, 4)
    assert (m.state, m.position, m.fetch_position, m.gen) == (S.FETCHABLE, 40, 40, gen + 1)
    m.await_reset(Reset.POLICY)
    assert (m.state, m.reset, m.position, m.fetch_position) == (
        S.AWAITING_RESET,
        Reset.POLICY,
        None,
        None,
    )
    m.found(0)
    assert m.state is S.FETCHABLE and m.position == 0


def test_a_failed_partition_keeps_its_error_until_a_seek_or_reset() -> None:
    m = PositionMachine(TP("t", 0))
    boom, detail = OffsetOutOfRangeError("boom"), OffsetOutOfRangeError("with range")
    m.seek(7)
    m.fail(boom)
    assert (m.state, m.error) == (S.FAILED, boom) and not m.fetchable
    m.validate()  # a leader change does not revive it
    assert (m.state, m.error) == (S.FAILED, boom)
    m.fail(detail)  # the same failure, told better (its valid range)
    assert m.error is detail
    m.drop_error(boom)  # not its error any more: nothing changes
    assert m.error is detail
    m.seek(9)
    assert (m.state, m.error, m.position) == (S.FETCHABLE, None, 9)
    m.fail(boom)
    m.await_reset(Reset.EARLIEST)
    assert (m.state, m.error) == (S.AWAITING_RESET, None)


def test_an_error_found_while_decoding_is_dropped_to_be_found_again() -> None:
    m = PositionMachine(TP("t", 0))
    m.seek(0)
    bad = kpax.CorruptRecordError("bad batch at 3")
    m.fetched(10, 0)
    m.fail(bad, drop_in_flight=True)
    assert m.fetch_position == -1  # a fetch in flight comes back to no one
    m.drop_error(bad)
    assert (m.state, m.error) == (S.FETCHABLE, None)
    m.refetch(3, 0)
    assert m.fetch_position == 3


def test_paused_is_a_flag_beside_the_state() -> None:
    m = PositionMachine(TP("t", 0), Reset.COMMITTED)
    m.pause()
    assert m.paused and m.state is S.AWAITING_RESET  # the reset goes on while paused
    m.found(5)
    assert m.state is S.FETCHABLE and not m.fetchable
    m.resume()
    assert m.fetchable
    m.fetched(20, -1)
    gen = m.gen
    m.pause()  # what was fetched ahead is fetched again on resume
    assert (m.fetch_position, m.gen, m.state) == (5, gen + 1, S.FETCHABLE)
    m.pause()  # twice: nothing more
    assert m.gen == gen + 1


@pytest.mark.parametrize(
    ("state", "call", "says"),
    [
        (S.AWAITING_RESET, lambda m: m.fetched(5, -1), "advance the fetch position"),
        (S.AWAITING_RESET, lambda m: m.validated(), "finish validating"),
        (S.FETCHABLE, lambda m: m.found(3), "set the position found"),
        (S.FAILED, lambda m: m.truncated(1, 0), "move the position back"),
        (S.AWAITING_VALIDATION, lambda m: m.refetch(1, 0), None),
        (S.REVOKED, lambda m: m.seek(3), "seek"),
        (S.REVOKED, lambda m: m.fail(kpax.KafkaError("x")), "fail the partition"),
    ],
)
def test_an_event_the_table_refuses_says_what_and_where(
    state: FetchState, call: Any, says: str | None
) -> None:
    m = _in(state)
    before = (m.state, m.position, m.fetch_position, m.gen, m.error)
    if says is None:  # allowed after all: the table lets it through
        call(m)
        return
    with pytest.raises(IllegalStateError, match=re.escape(says)) as info:
        call(m)
    assert f"partition t-0: its position is {state.value}" in str(info.value)
    assert (m.state, m.position, m.fetch_position, m.gen, m.error) == before


def test_no_state_that_fetches_without_a_position() -> None:
    m = PositionMachine(TP("t", 0))
    boom = kpax.errors.NoOffsetForPartitionError("no offset")
    m.fail(boom)  # auto_offset_reset="none" with no committed offset
    with pytest.raises(IllegalStateError, match="no position to be fetchable"):
        m.drop_error(boom)
    assert m.state is S.FAILED


def _in(state: FetchState) -> PositionMachine:
    m = PositionMachine(TP("t", 0))
    if state is not S.AWAITING_RESET:
        m.seek(10, 2)
        if state is S.AWAITING_VALIDATION:
            m.validate()
        elif state is S.FAILED:
            m.fail(kpax.KafkaError("boom"))
        elif state is S.REVOKED:
            m.revoke()
    assert m.state is state
    return m


# ------------------------------------------------------------------ random sequences

_EVENTS = hs.one_of(
    hs.tuples(hs.just("await_reset"), hs.sampled_from(list(Reset))),
    hs.tuples(hs.just("found"), hs.integers(0, 100), hs.booleans()),
    hs.tuples(hs.just("seek"), hs.integers(0, 100)),
    hs.tuples(hs.just("validate")),
    hs.tuples(hs.just("validated")),
    hs.tuples(hs.just("truncated"), hs.integers(0, 100)),
    hs.tuples(hs.just("fetched"), hs.integers(1, 20)),
    hs.tuples(hs.just("refetch")),
    hs.tuples(hs.just("fail")),
    hs.tuples(hs.just("drop_error"), hs.booleans()),
    hs.tuples(hs.just("pause")),
    hs.tuples(hs.just("resume")),
    hs.tuples(hs.just("take"), hs.integers(1, 20)),
    hs.tuples(hs.just("revoke")),
)

#: The events that may move the application's position other than forward.
_REPOSITIONS = {"await_reset", "found", "seek", "truncated"}


def _apply(m: PositionMachine, ev: tuple[Any, ...]) -> None:
    """Fire ``ev`` as its driver does (the arguments a real caller passes)."""
    name = ev[0]
    if name == "await_reset":
        m.await_reset(ev[1])
    elif name == "found":
        m.found(ev[1], 1 if ev[2] else -1, validate=ev[2])
    elif name == "seek":
        m.seek(ev[1])
    elif name == "validate":
        m.validate()
    elif name == "validated":
        m.validated()
    elif name == "truncated":  # the leader's log ends below the position
        end = min(ev[1], m.position) if m.position is not None else ev[1]
        m.truncated(end, 1)
    elif name == "fetched":  # a response's batches, past the fetch position
        base = m.fetch_position if m.fetch_position is not None and m.fetch_position >= 0 else 0
        m.fetched(base + ev[1], 1)
    elif name == "refetch":  # the decoded part of a response ends before its end
        m.refetch(m.position if m.position is not None else 0, m.position_epoch)
    elif name == "fail":
        m.fail(kpax.KafkaError(f"boom {m.gen}"))
    elif name == "drop_error":
        m.drop_error(m.error if ev[1] and m.error is not None else kpax.KafkaError("other"))
    elif name == "pause":
        m.pause()
    elif name == "resume":
        m.resume()
    elif name == "take":  # the buffer hands records out: the position moves forward
        if m.fetchable and m.position is not None and m.fetch_position is not None:
            m.position = max(m.position, min(m.fetch_position, m.position + ev[1]))
    elif name == "revoke":
        m.revoke()


def _snapshot(m: PositionMachine) -> tuple[Any, ...]:
    return (m.state, m.position, m.fetch_position, m.gen, m.error, m.reset, m.paused)


@settings(max_examples=300, deadline=None)
@given(hs.lists(_EVENTS, max_size=40))
def test_random_event_sequences_keep_the_rules(events: list[tuple[Any, ...]]) -> None:
    m = PositionMachine(TP("t", 0), Reset.COMMITTED)
    for ev in events:
        before = _snapshot(m)
        try:
            _apply(m, ev)
        except IllegalStateError as exc:
            # refused: the partition is as it was, and the error names it and its state
            assert (
                m.state,
                m.position,
                m.fetch_position,
                m.gen,
                m.error,
                m.reset,
                m.paused,
            ) == before
            assert "partition t-0" in str(exc)
            continue
        old_state, old_pos = before[0], before[1]
        # the table is the behaviour
        row = TRANSITIONS[old_state]
        assert m.state is old_state or m.state in row.values()
        # the position moves back only by a seek, a reset or a truncation
        if ev[0] not in _REPOSITIONS and old_pos is not None and m.position is not None:
            assert m.position >= old_pos, ev
        if ev[0] not in _REPOSITIONS and ev[0] != "revoke":
            assert m.position == old_pos or ev[0] == "take", ev
        # data fetched before a seek, reset, pause or revocation is dropped (gen moves)
        if ev[0] in ("seek", "await_reset", "found", "truncated", "revoke"):
            assert m.gen > before[3]
        # what each state holds
        assert (m.error is not None) == (m.state is S.FAILED)
        assert (m.reset is not None) == (m.state is S.AWAITING_RESET)
        assert m.assigned == (m.state is not S.REVOKED)
        if m.state is S.AWAITING_RESET:
            assert m.position is None and m.fetch_position is None
        if m.state in (S.FETCHABLE, S.AWAITING_VALIDATION):
            assert m.position is not None
        # fetched only when FETCHABLE, never paused
        assert m.fetchable == (m.state is S.FETCHABLE and not m.paused)
        if m.state is S.REVOKED:
            assert not m.fetchable and not m.awaiting


# ------------------------------------------------------------------ the position finder


def _positions(**options: Any) -> tuple[Positions, FetchBuffer]:
    config = resolve("consumer", CONSUMER_OPTIONS, {"bootstrap_servers": "127.0.0.1:1", **options})
    cluster = Cluster(["127.0.0.1:1"], connection_options(config))
    buf = FetchBuffer()
    return Positions(cluster, {}, buf, ConsumerSettings.from_config(config)), buf


async def test_a_seek_before_the_reset_runs_is_not_failed_with_no_offset() -> None:
    """auto_offset_reset="none": assign() then seek() at once. The fetcher asked for
    the new partition's position to be found (no offset: a failure) and the seek
    came before that task ran: the seek stands, nothing is raised (this used to
    fail the seeked partition with NoOffsetForPartitionError)."""
    positions, buf = _positions(auto_offset_reset="none")
    st = PartitionState(TP("t", 0))
    positions.states[st.tp] = st
    positions.resetting.add(st.tp)
    finding = positions.reset([st])  # what Fetcher._dispatch spawns
    st.seek(5)  # the application's seek, before the task's first step
    await finding
    assert (st.state, st.error, st.position) == (S.FETCHABLE, None, 5)
    assert buf.take(10) == []
    assert st.tp not in positions.resetting


async def test_no_offset_with_none_fails_once_and_poll_raises_until_a_seek() -> None:
    positions, buf = _positions(auto_offset_reset="none")
    st = PartitionState(TP("t", 0))
    positions.states[st.tp] = st
    await positions.reset([st])
    assert st.state is S.FAILED
    for _ in range(2):  # every poll, as the Java client does, until the position moves
        with pytest.raises(kpax.errors.NoOffsetForPartitionError, match="partition t-0"):
            buf.take(10)
    st.seek(0)
    assert buf.take(10) == [] and st.fetchable


async def test_a_validation_of_a_position_seeked_meanwhile_leaves_it_alone() -> None:
    positions, _buf = _positions()
    st = PartitionState(TP("t", 0))
    st.found(10, 3, validate=True)
    checking = positions.validate([st])
    st.seek(4)
    await checking  # (no request: nothing left to check)
    assert (st.state, st.position) == (S.FETCHABLE, 4)


# ------------------------------------------------------------------ the fetcher


async def test_a_partition_paused_before_its_fetch_is_built_is_left_out_of_it() -> None:
    """The fetcher picks the fetchable partitions, then builds their Fetch in a task
    that runs later: a pause in between (the sync face's call, run by the loop
    first) left the paused partition in the request, with its new gen, so its
    records reached poll() although it was paused."""
    config = resolve("consumer", CONSUMER_OPTIONS, {"bootstrap_servers": "127.0.0.1:1"})
    cluster = Cluster(["127.0.0.1:1"], connection_options(config))
    fetcher = Fetcher(cluster, {}, FetchBuffer(), ConsumerSettings.from_config(config))
    asked: list[set[TP]] = []

    class Broker:
        async def api_version(self, request: Any, cap: int) -> int:
            return 12

        async def request(self, req: Any, **kw: Any) -> Any:
            asked.append({TP(t.topic, p.partition) for t in req.topics for p in t.partitions})
            return SimpleNamespace(error_code=0, session_id=0, responses=[])

        def describe(self) -> str:
            return "broker 1"

    part = SimpleNamespace(leader_epoch=0)
    snapshot = SimpleNamespace(
        topics={"t": SimpleNamespace(topic_id=None, partitions={0: part, 1: part})}
    )
    cluster.fetch_broker = lambda node: Broker()  # type: ignore[method-assign]
    cluster.snapshot = snapshot
    p0, p1 = PartitionState(TP("t", 0)), PartitionState(TP("t", 1))
    p0.seek(0)
    p1.seek(0)
    fetching = fetcher._fetch(1, [p0, p1])  # what _dispatch starts
    p0.pause()
    await fetching
    assert asked == [{TP("t", 1)}]
