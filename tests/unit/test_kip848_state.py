"""The KIP-848 group member's state machine (kpax.consumer.kip848_state), with
no I/O: the table is the behaviour, and random event sequences keep its rules."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.consumer.kip848_state import (
    IN_GROUP,
    TRANSITIONS,
    Kip848Event,
    Kip848Machine,
    Kip848State,
)
from kpax.errors import IllegalStateError, KafkaError

S, E = Kip848State, Kip848Event


def _new() -> Kip848Machine:
    return Kip848Machine("group 'g'", "m1")


def _stable(epoch: int = 3) -> Kip848Machine:
    m = _new()
    m.subscribe()
    m.answered("", epoch, assignment=True)
    m.reconciled(changed=True)
    m.ack_sent()
    assert m.state is S.STABLE
    return m


def test_every_state_has_a_row_and_every_state_can_fail() -> None:
    assert set(TRANSITIONS) == set(Kip848State)
    for state, row in TRANSITIONS.items():
        assert E.FATAL in row, state
        assert any(nxt is not state for nxt in row.values()), state


def test_a_join_as_the_java_client_does_it() -> None:
    m = _new()
    assert m.identity() == (0, "m1") and not m.in_group
    m.subscribe()
    assert m.state is S.JOINING and m.full_heartbeat
    m.answered("", 0, assignment=False)  # not in yet
    assert m.state is S.JOINING
    m.answered("", 5, assignment=True)
    assert m.state is S.RECONCILING and m.identity() == (5, "m1") and not m.stable
    assert not m.full_heartbeat  # the subscription went with the join
    m.reconciled(changed=True)
    assert m.state is S.ACKNOWLEDGING and m.acknowledging and m.stable
    m.ack_sent()
    assert m.state is S.STABLE and not m.acknowledging
    m.answered("", 5, assignment=False)
    assert m.state is S.STABLE


def test_a_new_target_is_reconciled_while_the_member_stays_stable() -> None:
    m = _stable(3)
    m.answered("", 4, assignment=True)
    assert m.state is S.RECONCILING and m.stable  # no barrier: it goes on consuming
    m.reconciled(changed=False)  # nothing moved: no acknowledgement due
    assert m.state is S.STABLE and m.epoch == 4


def test_a_subscription_change_is_sent_with_the_next_heartbeat() -> None:
    m = _stable(3)
    assert not m.full_heartbeat
    m.subscribe()
    assert m.state is S.STABLE and m.full_heartbeat
    m.answered("", 3, assignment=False)
    assert not m.full_heartbeat


def test_a_fenced_member_releases_its_partitions_and_rejoins_at_epoch_0() -> None:
    m = _stable(7)
    m.fenced()
    assert m.state is S.FENCED and m.identity() == (0, "m1") and not m.stable
    m.released()
    assert m.state is S.JOINING and m.full_heartbeat
    m.answered("", 9, assignment=True)
    assert m.identity() == (9, "m1")


def test_a_late_poll_leaves_and_the_next_poll_rejoins() -> None:
    m = _stable(2)
    m.poll_timeout()
    assert m.state is S.STALE and m.epoch == 0 and not m.in_group
    m.subscribe()
    assert m.state is S.STALE  # waits for the poll
    m.polled()
    assert m.state is S.JOINING and m.full_heartbeat


def test_leaving_commits_under_the_epoch_then_drops_it() -> None:
    m = _stable(4)
    m.leave()
    assert m.state is S.PREPARE_LEAVING and m.identity() == (4, "m1") and not m.stable
    m.leave_sent()
    m.leave()  # a leave cut short by close()'s timeout, called again
    assert m.state is S.PREPARE_LEAVING and m.identity() == (4, "m1")
    m.leave_sent()
    m.left()
    assert m.state is S.UNSUBSCRIBED and m.identity() == (0, "m1")


@pytest.mark.parametrize(
    ("state", "call", "says"),
    [
        (S.UNSUBSCRIBED, "leave", "cannot leave the group"),
        (S.STABLE, "released", "cannot rejoin after releasing"),
        (S.STABLE, "polled", "cannot rejoin at a poll"),
        (S.JOINING, "ack_sent", "cannot send the acknowledging heartbeat"),
        (S.PREPARE_LEAVING, "subscribe", "cannot subscribe"),
    ],
)
def test_a_refused_event_names_the_event_the_group_and_the_state(state, call, says) -> None:
    m = _new()
    m.state = state
    with pytest.raises(IllegalStateError, match=re.escape(says)) as exc:
        getattr(m, call)()
    assert "group 'g'" in str(exc.value) and state.value in str(exc.value)
    assert m.state is state


def test_an_epoch_never_goes_back_within_a_membership() -> None:
    m = _stable(6)
    with pytest.raises(IllegalStateError, match="an epoch never goes back"):
        m.answered("", 5, assignment=False)
    assert m.identity() == (6, "m1")


def test_fatal_raises_its_error_for_a_new_subscription_and_still_leaves() -> None:
    m = _stable(1)
    boom = KafkaError("GROUP_AUTHORIZATION_FAILED")
    m.fail(boom)
    with pytest.raises(KafkaError) as exc:
        m.subscribe()
    assert exc.value is boom
    m.leave()
    m.leave_sent()
    m.left()
    assert m.state is S.UNSUBSCRIBED


# ------------------------------------------------------------ random sequences

_EVENT_OF = {
    "subscribe": E.SUBSCRIBE,
    "answered": E.ANSWERED,
    "reconciled": E.RECONCILED,
    "ack_sent": E.ACK_SENT,
    "fenced": E.FENCED,
    "released": E.RELEASED,
    "poll_timeout": E.POLL_TIMEOUT,
    "polled": E.POLLED,
    "leave": E.LEAVE,
    "leave_sent": E.LEAVE_SENT,
    "left": E.LEFT,
    "fail": E.FATAL,
}
_ARGS = {
    "answered": st.tuples(st.sampled_from(["", "m1", "m2"]), st.integers(0, 6), st.booleans()),
    "reconciled": st.tuples(st.booleans()),
}


def _call(m: Kip848Machine, name: str, args: tuple) -> None:
    if name == "answered":
        m.answered(args[0], args[1], assignment=args[2])
    elif name == "reconciled":
        m.reconciled(changed=args[0])
    elif name == "fail":
        m.fail(KafkaError("fatal"))
    else:
        getattr(m, name)()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_event_sequences_keep_the_rules(data: st.DataObject) -> None:
    """Mostly events the state allows (so the sequences get deep), some refused
    ones, any answers a broker might give."""
    rules = _Rules()
    for _ in range(data.draw(st.integers(0, 60))):
        names = list(_EVENT_OF)
        if data.draw(st.integers(0, 3)):  # 3 in 4: an event the table allows
            names = [n for n in names if rules.m.allows(_EVENT_OF[n])]
        name = data.draw(st.sampled_from(names))
        rules.step(name, data.draw(_ARGS[name]) if name in _ARGS else ())


class _Rules:
    """The rules every step of a random sequence keeps."""

    def __init__(self) -> None:
        self.m = _new()
        self.fenced: tuple[int, str] | None = None  # the identity a fence took away

    def step(self, name: str, args: tuple) -> None:
        m = self.m
        before, identity = m.state, m.identity()
        try:
            _call(m, name, args)
        except KafkaError:
            assert m.state is before and m.identity() == identity  # refused: nothing moved
            return
        epoch = m.epoch
        # within a membership the epoch never goes back
        if before in IN_GROUP and m.state in IN_GROUP:
            assert epoch >= identity[0]
        # out of the group: epoch 0 (commits refused, the heartbeat joins)
        if m.state in (S.UNSUBSCRIBED, S.JOINING, S.FENCED, S.STALE):
            assert epoch == 0
        assert m.in_group == (epoch > 0)
        # a fenced member is out at once: epoch 0 (commits refused) until it rejoins
        # (the member id stays, as Java's: the broker replaces the fenced member)
        if name == "fenced":
            self.fenced = identity
        if self.fenced is not None:
            if m.state in IN_GROUP:
                assert before is S.JOINING and name == "answered"
                self.fenced = None
            else:
                assert epoch == 0
        # leaving only from a subscribed state
        if name == "leave":
            assert before is not S.UNSUBSCRIBED
        assert not m.stable or m.state in IN_GROUP
        assert not m.acknowledging or m.state is S.ACKNOWLEDGING


def _random_args(rng: random.Random, name: str) -> tuple:
    if name == "answered":
        return (rng.choice(["", "m1", "m2"]), rng.randint(0, 6), rng.random() < 0.5)
    if name == "reconciled":
        return (rng.random() < 0.5,)
    return ()


def test_seeded_walks_reach_every_state_and_keep_the_rules() -> None:
    """The same rules on seeded walks (deterministic: every state is reached)."""
    rng = random.Random(848)
    reached: set[Kip848State] = set()
    for _ in range(300):
        rules = _Rules()
        for _ in range(60):
            names = list(_EVENT_OF)
            if rng.random() < 0.75:
                names = [n for n in names if rules.m.allows(_EVENT_OF[n])]
            name = rng.choice(names)
            while name in ("fail", "leave") and rng.random() < 0.97:
                name = rng.choice(names)  # (they end a walk: rarer)
            rules.step(name, _random_args(rng, name))
            reached.add(rules.m.state)
    assert reached == set(Kip848State)
