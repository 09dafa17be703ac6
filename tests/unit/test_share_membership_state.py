"""A share group member's state machine (kpax.consumer.share.membership_state),
with no I/O: the table is the behaviour, and random event sequences keep its rules."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.consumer.share.membership_state import (
    TRANSITIONS,
    ShareMemberEvent,
    ShareMemberMachine,
    ShareMemberState,
)
from kpax.errors import IllegalStateError, KafkaError

S, E = ShareMemberState, ShareMemberEvent


def _new() -> ShareMemberMachine:
    return ShareMemberMachine("share group 'g'", "m1")


def test_every_state_has_a_row_and_leaving_is_always_possible() -> None:
    assert set(TRANSITIONS) == set(ShareMemberState)
    for state, row in TRANSITIONS.items():
        assert E.LEAVE in row, state
        assert set(row.values()) <= set(ShareMemberState)


def test_a_join_names_the_subscription_then_only_the_epoch() -> None:
    m = _new()
    assert (m.state, m.epoch, m.full_heartbeat, m.heartbeating) == (S.UNSUBSCRIBED, 0, True, False)
    m.subscribe()
    assert (m.state, m.full_heartbeat, m.heartbeating) == (S.JOINING, True, True)
    m.answered("m1", 1)
    assert (m.state, m.epoch, m.full_heartbeat, m.in_group) == (S.STABLE, 1, False, True)
    m.answered("", 4)  # later answers: the epoch moves on, the id stays
    assert (m.epoch, m.member_id) == (4, "m1")
    m.subscribe()  # a new subscription goes with the next heartbeat
    assert (m.state, m.full_heartbeat) == (S.STABLE, True)


def test_a_fenced_member_rejoins_at_epoch_0_with_the_same_member_id() -> None:
    m = _new()
    m.subscribe()
    m.answered("m1", 7)
    m.fenced()
    assert (m.state, m.epoch, m.member_id, m.full_heartbeat) == (S.JOINING, 0, "m1", True)
    m.answered("m1", 2)  # a new membership may start lower
    assert (m.state, m.epoch) == (S.STABLE, 2)


def test_an_epoch_never_goes_back_within_a_membership() -> None:
    m = _new()
    m.subscribe()
    m.answered("m1", 5)
    with pytest.raises(IllegalStateError, match=r"epoch 3 .* at epoch 5: an epoch never goes back"):
        m.answered("m1", 3)
    with pytest.raises(IllegalStateError, match="positive epoch"):
        m.answered("m1", 0)
    assert (m.state, m.epoch) == (S.STABLE, 5)


def test_leaving_drops_the_epoch_and_a_subscribe_joins_again() -> None:
    m = _new()
    m.subscribe()
    m.answered("m1", 3)
    m.leave()
    assert (m.state, m.heartbeating, m.in_group) == (S.LEAVING, False, True)
    m.leave()  # a leave cut short by its timeout, called again
    m.left()
    assert (m.state, m.epoch) == (S.UNSUBSCRIBED, 0)
    m.subscribe()
    assert (m.state, m.full_heartbeat) == (S.JOINING, True)


@pytest.mark.parametrize(
    ("setup", "call", "says"),
    [
        ((), lambda m: m.answered("m1", 1), "cannot take a heartbeat's answer"),
        ((), lambda m: m.fenced(), "cannot be fenced"),
        ((), lambda m: m.left(), "cannot finish leaving the group"),
        (("subscribe", "leave"), lambda m: m.subscribe(), "cannot subscribe"),
    ],
)
def test_a_refused_event_names_the_event_the_group_and_the_state(setup, call, says) -> None:
    m = _new()
    for name in setup:
        getattr(m, name)()
    before = (m.state, m.epoch)
    with pytest.raises(IllegalStateError, match=f"{says} for the member of share group 'g': it is"):
        call(m)
    assert (m.state, m.epoch) == before


def test_fatal_raises_its_error_for_a_new_subscription_and_still_leaves() -> None:
    m = _new()
    m.subscribe()
    error = KafkaError("share group 'g': GROUP_AUTHORIZATION_FAILED", retriable=False)
    m.fail(error)
    with pytest.raises(KafkaError) as raised:
        m.subscribe()
    assert raised.value is error
    m.leave()
    m.left()
    assert m.state is S.UNSUBSCRIBED


_CALLS = ("subscribe", "answered", "fenced", "leave", "left", "fail")


def _step(m: ShareMemberMachine, call: str, epoch: int) -> None:
    if call == "answered":
        m.answered("", epoch)
    elif call == "fail":
        m.fail(KafkaError("fatal", retriable=False))
    else:
        getattr(m, call)()


def _check_walk(calls: list[tuple[str, int]]) -> set[ShareMemberState]:
    m = _new()
    seen = {m.state}
    for call, epoch in calls:
        before = (m.state, m.epoch, m.member_id)
        try:
            _step(m, call, epoch)
        except (IllegalStateError, KafkaError):
            assert (m.state, m.epoch, m.member_id) == before  # a refusal moves nothing
            continue
        seen.add(m.state)
        assert m.member_id == "m1"  # made once, kept for the consumer's life
        if m.state is S.STABLE and before[0] is S.STABLE:
            assert m.epoch >= before[1]  # never back within a membership
        if m.state in (S.UNSUBSCRIBED, S.JOINING) and call != "subscribe":
            assert m.epoch == 0  # out of the group
        if m.state is S.STABLE:
            assert m.epoch > 0
    return seen


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_CALLS), st.integers(-1, 9)), max_size=40))
def test_random_event_sequences_keep_the_rules(calls: list[tuple[str, int]]) -> None:
    _check_walk(calls)


def test_seeded_walks_reach_every_state_and_keep_the_rules() -> None:
    rng = random.Random(848)
    seen: set[ShareMemberState] = set()
    for _ in range(200):
        calls = [(rng.choice(_CALLS), rng.randint(-1, 9)) for _ in range(30)]
        seen |= _check_walk(calls)
    assert seen == set(ShareMemberState)
