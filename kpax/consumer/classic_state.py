"""The classic group member's state machine, whole, with no I/O.

Role: the sans-I/O core of :mod:`kpax.consumer.classic` (its driver sends
JoinGroup, SyncGroup, Heartbeat and LeaveGroup, calls the listener and fires
the events). Every state, event and allowed transition is in
:data:`TRANSITIONS`, one table; :class:`ClassicMachine` owns the state and the
member's identity (member id, generation) and is the only code that changes
them. An event the table does not allow raises :class:`IllegalStateError`
naming the event, the group and the state.

::

    UNSUBSCRIBED --subscribe--> UNJOINED --start_round--> PREPARING --send_join--> JOINING
    JOINING --member_id_required--> JOINING --joined (leader or follower)--> SYNCING
    SYNCING --synced--> ASSIGNING --assigned--> STABLE  (REJOIN_NEEDED if a rejoin
        was asked for during the round)
    STABLE --rejoin (heartbeat REBALANCE_IN_PROGRESS, subscription or metadata
        change, a cooperative round's follow-up)--> REJOIN_NEEDED --start_round--> PREPARING
    PREPARING, JOINING, SYNCING, ASSIGNING --round_failed--> UNJOINED
    ASSIGNING, STABLE, REJOIN_NEEDED --fenced (ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID)--> UNJOINED (generation dropped; member id too on UNKNOWN_MEMBER_ID)
    UNJOINED, ASSIGNING, STABLE, REJOIN_NEEDED --poll_timeout--> POLL_EXPIRED --polled--> UNJOINED
    any subscribed state --leave--> LEAVING --left--> LEFT (LEAVING --leave--> LEAVING:
        a leave cut short by its timeout, called again)
    any state --fatal (FENCED_INSTANCE_ID, a join error no retry helps)--> FATAL --leave--> LEAVING

A rejoin asked for while a round is under way (PREPARING to ASSIGNING) is
remembered (``rejoin_pending``): the round ends in REJOIN_NEEDED, and the
member joins again. Only STABLE and REJOIN_NEEDED are *stable* (the member
holds the assignment of its generation: auto-commit runs,
``wait_for_assignment`` returns). While leaving, and after, the events of a
round or a heartbeat still under way change nothing.

Imports: kpax.machines, kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kpax.machines import refusal
from kpax.proto.errors import IllegalStateError, KafkaError

__all__ = ["TRANSITIONS", "ClassicEvent", "ClassicMachine", "ClassicState"]


class ClassicState(enum.Enum):
    UNSUBSCRIBED = "not subscribed"
    UNJOINED = "not in a generation, joining next"
    PREPARING = "preparing to join (revoking)"
    JOINING = "joining (JoinGroup sent)"
    SYNCING = "syncing (SyncGroup sent)"
    ASSIGNING = "applying its assignment"
    STABLE = "stable"
    REJOIN_NEEDED = "stable, rejoining next"
    POLL_EXPIRED = "out of the group until the next poll (max_poll_interval_ms passed)"
    LEAVING = "leaving the group"
    LEFT = "out of the group (left)"
    FATAL = "failed"


class ClassicEvent(enum.Enum):
    """What happens to the member; the value is the action an error names."""

    SUBSCRIBE = "subscribe"
    #: A rejoin is asked for: heartbeat or commit REBALANCE_IN_PROGRESS, the
    #: subscription or the subscribed topics changed, a cooperative follow-up.
    REJOIN = "ask for a rejoin"
    START_ROUND = "start a join round"
    SEND_JOIN = "send JoinGroup"
    MEMBER_ID_REQUIRED = "take the member id JoinGroup gave (MEMBER_ID_REQUIRED)"
    JOINED = "take a JoinGroup answer"
    SYNCED = "take a SyncGroup answer"
    ASSIGNED = "finish applying the assignment"
    ROUND_FAILED = "fail the join round"
    #: ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID about the current identity.
    FENCED = "drop a fenced identity"
    POLL_TIMEOUT = "leave for a late poll"
    POLLED = "rejoin at a poll"
    LEAVE = "leave the group"
    LEFT = "finish leaving"
    FATAL = "fail the member"


S, E = ClassicState, ClassicEvent

#: Events of a round or heartbeat still under way when the member left: ignored.
_ABSORBED = (
    E.REJOIN,
    E.START_ROUND,
    E.SEND_JOIN,
    E.MEMBER_ID_REQUIRED,
    E.JOINED,
    E.SYNCED,
    E.ASSIGNED,
    E.ROUND_FAILED,
    E.FENCED,
    E.POLL_TIMEOUT,
    E.POLLED,
)


def _same(state: ClassicState, *events: ClassicEvent) -> dict[ClassicEvent, ClassicState]:
    return dict.fromkeys(events, state)


#: state -> {event: next state}. An event missing from a state's row is refused.
#: ASSIGNED goes to REJOIN_NEEDED instead of STABLE when a rejoin is pending.
TRANSITIONS: Mapping[ClassicState, Mapping[ClassicEvent, ClassicState]] = {
    S.UNSUBSCRIBED: {
        # (commits of a manually assigned consumer carry no generation; their
        # answers change nothing here)
        **_same(S.UNSUBSCRIBED, E.REJOIN, E.FENCED),
        E.SUBSCRIBE: S.UNJOINED,
        E.FATAL: S.FATAL,
    },
    S.UNJOINED: {
        **_same(S.UNJOINED, E.SUBSCRIBE, E.REJOIN, E.FENCED),
        # a round fenced while it applied its assignment ends here
        E.ASSIGNED: S.UNJOINED,
        E.START_ROUND: S.PREPARING,
        # (the heartbeat task of the generation just lost, before the round stops it)
        E.POLL_TIMEOUT: S.POLL_EXPIRED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.PREPARING: {
        # a commit of the revocation fenced: the round goes on without the identity
        **_same(S.PREPARING, E.SUBSCRIBE, E.REJOIN, E.FENCED),
        E.SEND_JOIN: S.JOINING,
        E.ROUND_FAILED: S.UNJOINED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.JOINING: {
        **_same(S.JOINING, E.SUBSCRIBE, E.REJOIN, E.MEMBER_ID_REQUIRED),
        E.JOINED: S.SYNCING,
        E.ROUND_FAILED: S.UNJOINED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.SYNCING: {
        **_same(S.SYNCING, E.SUBSCRIBE, E.REJOIN),
        E.SYNCED: S.ASSIGNING,
        E.ROUND_FAILED: S.UNJOINED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.ASSIGNING: {
        **_same(S.ASSIGNING, E.SUBSCRIBE, E.REJOIN),
        E.ASSIGNED: S.STABLE,
        E.FENCED: S.UNJOINED,
        E.ROUND_FAILED: S.UNJOINED,
        E.POLL_TIMEOUT: S.POLL_EXPIRED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.STABLE: {
        **_same(S.REJOIN_NEEDED, E.SUBSCRIBE, E.REJOIN),
        E.FENCED: S.UNJOINED,
        E.POLL_TIMEOUT: S.POLL_EXPIRED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.REJOIN_NEEDED: {
        **_same(S.REJOIN_NEEDED, E.SUBSCRIBE, E.REJOIN),
        E.START_ROUND: S.PREPARING,
        E.FENCED: S.UNJOINED,
        E.POLL_TIMEOUT: S.POLL_EXPIRED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.POLL_EXPIRED: {
        # (a poll timeout while the round assigned: the round ends here)
        **_same(S.POLL_EXPIRED, E.SUBSCRIBE, E.REJOIN, E.ASSIGNED, E.FENCED),
        E.POLLED: S.UNJOINED,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.LEAVING: {
        **_same(S.LEAVING, *_ABSORBED),
        E.LEAVE: S.LEAVING,  # a leave cut short (its timeout), called again
        E.LEFT: S.LEFT,
        E.FATAL: S.LEAVING,
    },
    S.LEFT: {**_same(S.LEFT, *_ABSORBED), E.FATAL: S.LEFT},
    S.FATAL: {**_same(S.FATAL, *_ABSORBED), E.FATAL: S.FATAL, E.LEAVE: S.LEAVING},
}

#: The states of a join round (the driver's membership task runs it).
ROUND = frozenset({S.PREPARING, S.JOINING, S.SYNCING, S.ASSIGNING})
#: The member holds the assignment of its generation.
STABLE_STATES = frozenset({S.STABLE, S.REJOIN_NEEDED})
_CLOSING = frozenset({S.LEAVING, S.LEFT})


class ClassicMachine:
    """The state and identity of one classic group member. ``describe`` names
    the member in errors (e.g. ``"group 'g'"``)."""

    __slots__ = (
        "_held",
        "_pending_generation",
        "describe",
        "error",
        "generation",
        "member_id",
        "rejoin_pending",
        "state",
    )

    def __init__(self, describe: str) -> None:
        self.describe = describe
        self.state = S.UNSUBSCRIBED
        self.member_id = ""
        #: The generation in force (-1: none; commits then fail).
        self.generation = -1
        #: A rejoin asked for during the round under way.
        self.rejoin_pending = False
        self.error: KafkaError | None = None
        self._pending_generation = -1
        #: (member id, the lowest generation it may take next): the last one it
        #: held, or the one after it once fenced out of it.
        self._held: tuple[str, int] = ("", -1)

    # ------------------------------------------------------------ queries

    @property
    def stable(self) -> bool:
        return self.state in STABLE_STATES

    @property
    def join_due(self) -> bool:
        """The membership task starts a round now."""
        return self.state in (S.UNJOINED, S.REJOIN_NEEDED)

    @property
    def in_round(self) -> bool:
        return self.state in ROUND

    @property
    def joining(self) -> bool:
        """JoinGroup or SyncGroup under way: a commit answered now leaves the
        identity alone (the round decides it)."""
        return self.state in (S.JOINING, S.SYNCING)

    @property
    def closing(self) -> bool:
        return self.state in _CLOSING

    def identity(self) -> tuple[int, str]:
        return self.generation, self.member_id

    # ------------------------------------------------------------ the table

    def allows(self, event: ClassicEvent) -> bool:
        return event in TRANSITIONS[self.state]

    def _fire(self, event: ClassicEvent) -> bool:
        """Move on ``event``; False: the member is leaving or left (or failed)
        and the event changed nothing."""
        row = TRANSITIONS[self.state]
        new = row.get(event)
        if new is None:
            fatal = self.error if self.state is S.FATAL else None
            raise refusal(event, self.state, f"for the member of {self.describe}", fatal=fatal)
        live = self.state not in _CLOSING and self.state is not S.FATAL
        if event is E.ASSIGNED and new is S.STABLE and self.rejoin_pending:
            new = S.REJOIN_NEEDED
        if event in (E.SUBSCRIBE, E.REJOIN) and self.state in ROUND:
            self.rejoin_pending = True
        if new not in ROUND:
            self.rejoin_pending = False  # (the round ended in REJOIN_NEEDED, or failed)
        self.state = new
        return live or event in (E.LEAVE, E.LEFT)

    # ------------------------------------------------------------ events

    def subscribe(self) -> None:
        self._fire(E.SUBSCRIBE)

    def rejoin(self) -> None:
        self._fire(E.REJOIN)

    def start_round(self) -> None:
        self._fire(E.START_ROUND)

    def send_join(self) -> bool:
        return self._fire(E.SEND_JOIN)

    def member_id_required(self, member_id: str) -> bool:
        if self._fire(E.MEMBER_ID_REQUIRED):
            self.member_id = member_id
            return True
        return False

    def joined(self, member_id: str, generation: int) -> bool:
        """JoinGroup answered (as leader or follower): the member id and the
        generation the SyncGroup goes with (in force once it is answered)."""
        if self.state is S.JOINING and member_id == self._held[0] and generation < self._held[1]:
            raise IllegalStateError(
                f"JoinGroup for {self.describe} answered generation {generation} for "
                f"member {member_id!r}, which may only take {self._held[1]} or later: "
                "a generation never goes back (nor comes back after a fence)"
            )
        if self._fire(E.JOINED):
            self.member_id = member_id
            self._pending_generation = generation
            return True
        return False

    def synced(self) -> bool:
        if self._fire(E.SYNCED):
            self.generation = self._pending_generation
            self._held = (self.member_id, self.generation)
            return True
        return False

    def assigned(self) -> None:
        self._fire(E.ASSIGNED)

    def round_failed(self, *, fenced: bool = False, unknown_member: bool = False) -> None:
        """The round ended without an assignment; ``fenced`` (ILLEGAL_GENERATION
        or UNKNOWN_MEMBER_ID) drops the generation, ``unknown_member`` the member
        id too."""
        if self._fire(E.ROUND_FAILED) and fenced:
            self._drop(unknown_member)

    def fenced(self, *, unknown_member: bool) -> None:
        """A heartbeat or commit found this identity gone."""
        if self._fire(E.FENCED):
            self._drop(unknown_member)
            if self.state is S.PREPARING:
                self.rejoin_pending = True  # this round goes on; another follows
        elif self.state is S.LEAVING:
            self._drop(unknown_member)  # the LeaveGroup goes without it

    def poll_timeout(self, *, static: bool) -> None:
        """No poll within max_poll_interval_ms: the member leaves (the driver
        sends LeaveGroup with the member id it had) and drops its generation,
        and its member id unless static."""
        if self._fire(E.POLL_TIMEOUT):
            self._drop(not static)

    def polled(self) -> None:
        self._fire(E.POLLED)

    def leave(self) -> None:
        self._fire(E.LEAVE)

    def left(self) -> None:
        self._fire(E.LEFT)
        self.member_id = ""
        self.generation = -1

    def fail(self, error: KafkaError) -> None:
        if self._fire(E.FATAL) or self.state is S.FATAL:
            self.error = self.error or error

    def _drop(self, member_id: bool) -> None:
        if self.generation >= 0 and not member_id:
            # fenced out of this generation under the same member id: the group
            # went on, and the rejoin takes a later one
            self._held = (self.member_id, self.generation + 1)
        self.generation = -1
        if member_id:
            self.member_id = ""
