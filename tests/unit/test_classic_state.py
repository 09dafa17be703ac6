"""The classic group member's state machine (kpax.consumer.classic_state), with
no I/O: the table is the behaviour, and random event sequences keep its rules."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.consumer.classic_state import (
    ROUND,
    STABLE_STATES,
    TRANSITIONS,
    ClassicEvent,
    ClassicMachine,
    ClassicState,
)
from kpax.errors import IllegalStateError, KafkaError

S, E = ClassicState, ClassicEvent


def _stable(generation: int = 1, member_id: str = "m1") -> ClassicMachine:
    m = ClassicMachine("group 'g'")
    m.subscribe()
    m.start_round()
    m.send_join()
    m.joined(member_id, generation)
    m.synced()
    m.assigned()
    assert m.state is S.STABLE
    return m


def test_every_state_has_a_row_and_every_live_state_can_fail() -> None:
    assert set(TRANSITIONS) == set(ClassicState)
    for state, row in TRANSITIONS.items():
        assert E.FATAL in row, state
        if state not in (S.LEFT,):
            assert any(nxt is not state for nxt in row.values()), state


def test_a_first_join_as_the_java_client_does_it() -> None:
    m = ClassicMachine("group 'g'")
    assert m.identity() == (-1, "") and not m.join_due
    m.subscribe()
    assert m.state is S.UNJOINED and m.join_due
    m.start_round()
    m.send_join()
    assert m.joining
    m.member_id_required("m1")  # KIP-394's round trip
    assert m.identity() == (-1, "m1")
    m.joined("m1", 4)
    assert m.state is S.SYNCING and m.generation == -1  # in force once synced
    m.synced()
    assert m.state is S.ASSIGNING and m.identity() == (4, "m1") and not m.stable
    m.assigned()
    assert m.state is S.STABLE and m.stable


def test_a_rejoin_keeps_the_generation_until_the_next_is_synced() -> None:
    m = _stable(3)
    m.rejoin()  # heartbeat REBALANCE_IN_PROGRESS
    assert m.state is S.REJOIN_NEEDED and m.stable and m.join_due and m.generation == 3
    m.start_round()
    assert not m.stable and m.generation == 3
    m.send_join()
    m.joined("m1", 4)
    assert m.generation == 3
    m.synced()
    assert m.generation == 4


def test_a_rejoin_asked_for_during_a_round_joins_again_after_it() -> None:
    for ask_in in (S.PREPARING, S.JOINING, S.SYNCING, S.ASSIGNING):
        m = _stable(1)
        m.rejoin()
        m.start_round()
        steps = [m.send_join, lambda m=m: m.joined("m1", 2), m.synced]
        while m.state is not ask_in:
            steps.pop(0)()
        m.rejoin()
        while steps:
            steps.pop(0)()
        assert m.rejoin_pending
        m.assigned()
        assert m.state is S.REJOIN_NEEDED and m.generation == 2, ask_in
        assert not m.rejoin_pending


@pytest.mark.parametrize("unknown_member", [False, True])
def test_a_fenced_member_drops_its_identity_and_joins_again(unknown_member: bool) -> None:
    m = _stable(5)
    m.fenced(unknown_member=unknown_member)
    assert m.state is S.UNJOINED and m.join_due and not m.stable
    assert m.identity() == (-1, "" if unknown_member else "m1")


def test_a_round_that_fails_makes_the_join_due_again() -> None:
    for fenced in (False, True):
        m = _stable(5)
        m.rejoin()
        m.start_round()
        m.send_join()
        m.round_failed(fenced=fenced)
        assert m.state is S.UNJOINED and m.join_due
        assert m.generation == (-1 if fenced else 5)


def test_a_round_fenced_while_it_assigns_does_not_end_stable() -> None:
    m = ClassicMachine("group 'g'")
    m.subscribe()
    m.start_round()
    m.send_join()
    m.joined("m1", 1)
    m.synced()
    m.fenced(unknown_member=False)  # a commit of its revocation found the generation gone
    m.assigned()
    assert m.state is S.UNJOINED and not m.stable and m.join_due


def test_a_late_poll_leaves_and_the_next_poll_rejoins() -> None:
    m = _stable(2)
    m.poll_timeout(static=False)
    assert m.state is S.POLL_EXPIRED and not m.join_due and m.identity() == (-1, "")
    m.rejoin()  # a metadata change meanwhile waits for the poll
    assert m.state is S.POLL_EXPIRED
    m.polled()
    assert m.state is S.UNJOINED and m.join_due
    static = _stable(2)
    static.poll_timeout(static=True)
    assert static.identity() == (-1, "m1")  # a static member keeps its member id


def test_leaving_keeps_the_identity_for_the_leave_and_then_drops_it() -> None:
    m = _stable(2)
    m.leave()
    assert m.state is S.LEAVING and m.identity() == (2, "m1") and not m.stable
    # a round or heartbeat still under way changes nothing now
    assert not m.send_join() and not m.joined("m2", 9) and not m.synced()
    m.rejoin()
    m.poll_timeout(static=False)
    assert m.state is S.LEAVING and m.identity() == (2, "m1")
    m.leave()  # a leave cut short by close()'s timeout, called again
    m.left()
    assert m.state is S.LEFT and m.identity() == (-1, "")


@pytest.mark.parametrize(
    ("state", "call", "says"),
    [
        (S.STABLE, "synced", "cannot take a SyncGroup answer"),
        (S.UNSUBSCRIBED, "leave", "cannot leave the group"),
        (S.STABLE, "start_round", "cannot start a join round"),
        (S.STABLE, "polled", "cannot rejoin at a poll"),
        (S.LEFT, "subscribe", "cannot subscribe"),
    ],
)
def test_a_refused_event_names_the_event_the_group_and_the_state(state, call, says) -> None:
    m = ClassicMachine("group 'g'")
    m.state = state
    with pytest.raises(IllegalStateError, match=re.escape(says)) as exc:
        getattr(m, call)()
    assert "group 'g'" in str(exc.value) and state.value in str(exc.value)
    assert m.state is state


def test_fatal_raises_its_error_for_a_new_subscription_and_still_leaves() -> None:
    m = _stable(1)
    boom = KafkaError("another consumer uses group_instance_id 'i'")
    m.fail(boom)
    m.rejoin()  # a heartbeat's or commit's answer after: ignored
    with pytest.raises(KafkaError) as exc:
        m.subscribe()
    assert exc.value is boom
    m.leave()
    m.left()
    assert m.state is S.LEFT


def test_a_generation_never_goes_back_for_one_member_id() -> None:
    m = _stable(7)
    m.rejoin()
    m.start_round()
    m.send_join()
    with pytest.raises(IllegalStateError, match="a generation never goes back"):
        m.joined("m1", 6)
    m.joined("m2", 1)  # another member id: its own generations
    m.synced()
    assert m.identity() == (1, "m2")


# ------------------------------------------------------------ random sequences

_IDS = st.sampled_from(["m1", "m2", "m3"])
#: each event's arguments (a broker may answer anything)
_ARGS = {
    "member_id_required": st.tuples(_IDS),
    "joined": st.tuples(_IDS, st.integers(0, 5)),
    "round_failed": st.tuples(st.booleans(), st.booleans()),
    "fenced": st.tuples(st.booleans()),
    "poll_timeout": st.tuples(st.booleans()),
}


def _call(m: ClassicMachine, call: tuple) -> None:
    name, *args = call
    if name == "round_failed":
        m.round_failed(fenced=args[0], unknown_member=args[1])
    elif name == "fenced":
        m.fenced(unknown_member=args[0])
    elif name == "poll_timeout":
        m.poll_timeout(static=args[0])
    elif name == "fail":
        m.fail(KafkaError("fatal"))
    else:
        getattr(m, name)(*args)


_EVENT_OF = {
    "subscribe": E.SUBSCRIBE,
    "rejoin": E.REJOIN,
    "start_round": E.START_ROUND,
    "send_join": E.SEND_JOIN,
    "synced": E.SYNCED,
    "assigned": E.ASSIGNED,
    "polled": E.POLLED,
    "leave": E.LEAVE,
    "left": E.LEFT,
    "member_id_required": E.MEMBER_ID_REQUIRED,
    "joined": E.JOINED,
    "round_failed": E.ROUND_FAILED,
    "fenced": E.FENCED,
    "poll_timeout": E.POLL_TIMEOUT,
    "fail": E.FATAL,
}


class _Rules:
    """The rules every step of a random sequence keeps."""

    def __init__(self) -> None:
        self.m = ClassicMachine("group 'g'")
        self.highest: dict[str, int] = {}  # member id -> the highest generation it held
        self.fenced: tuple[int, str] | None = None  # the identity a fence took away

    def step(self, call: tuple) -> None:
        m = self.m
        before, identity = m.state, m.identity()
        try:
            _call(m, call)
        except KafkaError:
            assert m.state is before and m.identity() == identity  # refused: nothing moved
            return
        generation, member_id = m.identity()
        # the generation never goes backwards within one member id
        if generation >= 0:
            assert generation >= self.highest.get(member_id, -1)
            self.highest[member_id] = generation
        # no generation out of the group (UNJOINED may keep one: a round refused
        # with REBALANCE_IN_PROGRESS keeps it)
        if m.state in (S.UNSUBSCRIBED, S.POLL_EXPIRED, S.LEFT):
            assert generation == -1
        if call[0] == "fenced" and before in STABLE_STATES | {S.ASSIGNING}:
            assert m.state is S.UNJOINED and generation == -1
            self.fenced = identity
        # a fenced member comes back with a new identity
        if self.fenced is not None and m.state in STABLE_STATES and before is S.ASSIGNING:
            assert m.identity() != self.fenced
            self.fenced = None
        # leaving only from a subscribed state; the identity goes once left
        if call[0] == "leave":
            assert before not in (S.UNSUBSCRIBED, S.LEFT)
        if m.state is S.LEFT:
            assert m.identity() == (-1, "")
        assert m.stable == (m.state in STABLE_STATES)
        assert not m.rejoin_pending or m.state in ROUND


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_event_sequences_keep_the_rules(data: st.DataObject) -> None:
    """Mostly events the state allows (so the sequences get deep: rounds, fences,
    rejoins), some refused ones, any answers a broker might give."""
    rules = _Rules()
    for _ in range(data.draw(st.integers(0, 60))):
        names = list(_EVENT_OF)
        if data.draw(st.integers(0, 3)):  # 3 in 4: an event the table allows
            names = [n for n in names if rules.m.allows(_EVENT_OF[n])]
        name = data.draw(st.sampled_from(names))
        args = data.draw(_ARGS[name]) if name in _ARGS else ()
        rules.step((name, *args))


def _random_args(rng: random.Random, name: str) -> tuple:
    ids = ["m1", "m2", "m3"]
    if name == "member_id_required":
        return (rng.choice(ids),)
    if name == "joined":
        return (rng.choice(ids), rng.randint(0, 5))
    if name == "round_failed":
        return (rng.random() < 0.5, rng.random() < 0.5)
    if name in ("fenced", "poll_timeout"):
        return (rng.random() < 0.5,)
    return ()


def test_seeded_walks_reach_every_state_and_keep_the_rules() -> None:
    """The same rules on seeded walks (deterministic: every state is reached)."""
    rng = random.Random(848)
    reached: set[ClassicState] = set()
    for _ in range(300):
        rules = _Rules()
        for _ in range(60):
            names = list(_EVENT_OF)
            if rng.random() < 0.75:
                names = [n for n in names if rules.m.allows(_EVENT_OF[n])]
            name = rng.choice(names)
            while name in ("fail", "leave") and rng.random() < 0.97:
                name = rng.choice(names)  # (they end a walk: rarer)
            rules.step((name, *_random_args(rng, name)))
            reached.add(rules.m.state)
    assert reached == set(ClassicState)
