"""The KIP-848 group member's state machine (``group_protocol="consumer"``), whole, with no I/O.

Role: the sans-I/O core of :mod:`kpax.consumer.kip848` (its driver sends
ConsumerGroupHeartbeat, reconciles the assignment with the listener and fires
the events). The states are the Java consumer's ``MemberState`` for this
protocol; every allowed transition is in :data:`TRANSITIONS`, one table.
:class:`Kip848Machine` owns the state and the member's identity (member id,
member epoch) and is the only code that changes them. An event the table does
not allow raises :class:`IllegalStateError` naming the event, the group and
the state.

::

    UNSUBSCRIBED --subscribe--> JOINING --answered (epoch > 0, an assignment)--> RECONCILING
    RECONCILING --reconciled (partitions moved)--> ACKNOWLEDGING --ack_sent--> STABLE
    RECONCILING --reconciled (nothing moved)--> STABLE
    ACKNOWLEDGING, STABLE --answered (a new assignment)--> RECONCILING
    JOINING, RECONCILING, ACKNOWLEDGING, STABLE --fenced (FENCED_MEMBER_EPOCH,
        UNKNOWN_MEMBER_ID)--> FENCED (epoch 0; the partitions are lost) --released--> JOINING
    RECONCILING, ACKNOWLEDGING, STABLE --poll_timeout--> STALE (left; epoch 0) --polled--> JOINING
    (RECONCILING takes heartbeat answers, a fence or a poll timeout only after a
    reconciliation failed: the heartbeats go on)
    any subscribed state --leave--> PREPARE_LEAVING (revoking, committing with the
        epoch) --leave_sent--> LEAVING --left--> UNSUBSCRIBED (epoch 0); a leave cut
        short by its timeout may be called again
    any state --fatal--> FATAL --leave--> PREPARE_LEAVING

The member id is made by the client and kept across fencing (the member
rejoins at epoch 0 under the same id; the broker gives it a new epoch). Within
one membership (from JOINING to a fence, a poll timeout or the leave) the
epoch never goes back. *Stable* (auto-commit runs, ``wait_for_assignment``
returns) once the member reconciled an assignment of this membership: there is
no barrier, so it stays stable while it reconciles the next one.

Imports: kpax.machines, kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kpax.machines import refusal
from kpax.proto.errors import IllegalStateError, KafkaError

__all__ = ["TRANSITIONS", "Kip848Event", "Kip848Machine", "Kip848State"]


class Kip848State(enum.Enum):
    UNSUBSCRIBED = "not subscribed"
    JOINING = "joining (epoch 0)"
    RECONCILING = "reconciling its assignment"
    ACKNOWLEDGING = "acknowledging its assignment"
    STABLE = "stable"
    FENCED = "fenced (releasing its partitions)"
    STALE = "out of the group until the next poll (max_poll_interval_ms passed)"
    PREPARE_LEAVING = "preparing to leave (revoking)"
    LEAVING = "leaving the group"
    FATAL = "failed"


class Kip848Event(enum.Enum):
    """What happens to the member; the value is the action an error names."""

    SUBSCRIBE = "subscribe"
    #: A heartbeat answered without an error.
    ANSWERED = "take a heartbeat answer"
    RECONCILED = "finish reconciling"
    ACK_SENT = "send the acknowledging heartbeat"
    FENCED = "drop a fenced epoch"
    RELEASED = "rejoin after releasing the partitions"
    POLL_TIMEOUT = "leave for a late poll"
    POLLED = "rejoin at a poll"
    LEAVE = "leave the group"
    LEAVE_SENT = "send the leaving heartbeat"
    LEFT = "finish leaving"
    FATAL = "fail the member"


S, E = Kip848State, Kip848Event

#: state -> {event: next state}. An event missing from a state's row is refused.
#: ANSWERED goes to RECONCILING with an assignment in the answer, else (JOINING,
#: RECONCILING) to STABLE once the epoch is > 0; other states stay put.
TRANSITIONS: Mapping[Kip848State, Mapping[Kip848Event, Kip848State]] = {
    S.UNSUBSCRIBED: {E.SUBSCRIBE: S.JOINING, E.FATAL: S.FATAL},
    S.JOINING: {
        E.SUBSCRIBE: S.JOINING,
        E.ANSWERED: S.RECONCILING,
        E.FENCED: S.FENCED,
        E.LEAVE: S.PREPARE_LEAVING,
        E.FATAL: S.FATAL,
    },
    S.RECONCILING: {
        E.SUBSCRIBE: S.RECONCILING,
        E.RECONCILED: S.ACKNOWLEDGING,
        # a reconciliation that failed (its metadata lookup): the heartbeats go on
        E.ANSWERED: S.RECONCILING,
        E.FENCED: S.FENCED,
        E.POLL_TIMEOUT: S.STALE,
        E.LEAVE: S.PREPARE_LEAVING,
        E.FATAL: S.FATAL,
    },
    S.ACKNOWLEDGING: {
        E.SUBSCRIBE: S.ACKNOWLEDGING,
        E.ACK_SENT: S.STABLE,
        E.ANSWERED: S.RECONCILING,
        E.FENCED: S.FENCED,
        E.POLL_TIMEOUT: S.STALE,
        E.LEAVE: S.PREPARE_LEAVING,
        E.FATAL: S.FATAL,
    },
    S.STABLE: {
        E.SUBSCRIBE: S.STABLE,
        E.ANSWERED: S.RECONCILING,
        E.FENCED: S.FENCED,
        E.POLL_TIMEOUT: S.STALE,
        E.LEAVE: S.PREPARE_LEAVING,
        E.FATAL: S.FATAL,
    },
    S.FENCED: {
        E.SUBSCRIBE: S.FENCED,
        E.RELEASED: S.JOINING,
        E.LEAVE: S.PREPARE_LEAVING,
        E.FATAL: S.FATAL,
    },
    S.STALE: {
        E.SUBSCRIBE: S.STALE,
        E.POLLED: S.JOINING,
        E.LEAVE: S.PREPARE_LEAVING,
        E.FATAL: S.FATAL,
    },
    # (a leave cut short by its timeout may be called again)
    S.PREPARE_LEAVING: {
        E.LEAVE: S.PREPARE_LEAVING,
        E.LEAVE_SENT: S.LEAVING,
        E.FATAL: S.PREPARE_LEAVING,
    },
    S.LEAVING: {E.LEAVE: S.PREPARE_LEAVING, E.LEFT: S.UNSUBSCRIBED, E.FATAL: S.LEAVING},
    S.FATAL: {E.FATAL: S.FATAL, E.LEAVE: S.PREPARE_LEAVING},
}

#: The member has an epoch > 0 (commits go with it).
IN_GROUP = frozenset({S.RECONCILING, S.ACKNOWLEDGING, S.STABLE})
_SUBSCRIBED = frozenset(
    {S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE, S.FENCED, S.STALE, S.FATAL}
)


class Kip848Machine:
    """The state and identity of one KIP-848 group member. ``describe`` names
    the member in errors (e.g. ``"group 'g'"``)."""

    __slots__ = (
        "_reconciled",
        "_resend_subscription",
        "describe",
        "epoch",
        "error",
        "member_id",
        "state",
    )

    def __init__(self, describe: str, member_id: str) -> None:
        self.describe = describe
        self.state = S.UNSUBSCRIBED
        self.member_id = member_id
        #: The member epoch (0: not in the group; the heartbeat joins).
        self.epoch = 0
        self.error: KafkaError | None = None
        #: The next heartbeat carries the whole subscription.
        self._resend_subscription = True
        #: An assignment of this membership was reconciled (or none was due).
        self._reconciled = False

    # ------------------------------------------------------------ queries

    @property
    def stable(self) -> bool:
        return self._reconciled and self.state in IN_GROUP

    @property
    def in_group(self) -> bool:
        return self.epoch > 0

    @property
    def full_heartbeat(self) -> bool:
        """The next heartbeat sends the subscription (joining, or it changed)."""
        return self.epoch == 0 or self._resend_subscription

    @property
    def acknowledging(self) -> bool:
        """The next heartbeat reports the partitions owned now, at once."""
        return self.state is S.ACKNOWLEDGING

    def identity(self) -> tuple[int, str]:
        return self.epoch, self.member_id

    # ------------------------------------------------------------ the table

    def allows(self, event: Kip848Event) -> bool:
        return event in TRANSITIONS[self.state]

    def _fire(self, event: Kip848Event, new: Kip848State | None = None) -> bool:
        row = TRANSITIONS[self.state]
        if event not in row:
            fatal = self.error if self.state is S.FATAL else None
            raise refusal(event, self.state, f"for the member of {self.describe}", fatal=fatal)
        moved = self.state not in (S.PREPARE_LEAVING, S.LEAVING) or event in (
            E.LEAVE_SENT,
            E.LEFT,
        )
        self.state = new if new is not None else row[event]
        return moved

    def _out(self) -> None:
        """Out of the membership: epoch 0, the subscription sent again at the join."""
        self.epoch = 0
        self._reconciled = False
        self._resend_subscription = True

    # ------------------------------------------------------------ events

    def subscribe(self) -> None:
        self._fire(E.SUBSCRIBE)
        self._resend_subscription = True

    def answered(self, member_id: str, epoch: int, *, assignment: bool) -> None:
        """A heartbeat answered (no error): the member id (if the broker named
        one) and the epoch; ``assignment``: it carried a target to reconcile."""
        if not self.allows(E.ANSWERED):
            self._fire(E.ANSWERED)  # refused
        if self.state is not S.JOINING and 0 <= epoch < self.epoch:
            raise IllegalStateError(
                f"ConsumerGroupHeartbeat for {self.describe} answered member epoch {epoch} "
                f"for member {self.member_id!r} at epoch {self.epoch}: an epoch never goes "
                "back within a membership"
            )
        settled = not assignment and epoch > 0 and self.state in (S.JOINING, S.RECONCILING)
        if assignment:
            new = S.RECONCILING
        elif settled:
            new = S.STABLE  # nothing (new) to reconcile
        else:
            new = self.state
        self._fire(E.ANSWERED, new)
        if settled:
            self._reconciled = True
        self._resend_subscription = False
        if member_id:
            self.member_id = member_id
        self.epoch = epoch

    def reconciled(self, *, changed: bool) -> None:
        """The target is applied; ``changed``: partitions moved (acknowledged at once)."""
        self._fire(E.RECONCILED, S.ACKNOWLEDGING if changed else S.STABLE)
        self._reconciled = True

    def ack_sent(self) -> None:
        self._fire(E.ACK_SENT)

    def fenced(self) -> None:
        self._fire(E.FENCED)
        self._out()

    def released(self) -> None:
        self._fire(E.RELEASED)

    def poll_timeout(self) -> None:
        self._fire(E.POLL_TIMEOUT)
        self._out()

    def polled(self) -> None:
        self._fire(E.POLLED)

    def leave(self) -> None:
        self._fire(E.LEAVE)

    def leave_sent(self) -> None:
        self._fire(E.LEAVE_SENT)

    def left(self) -> None:
        self._fire(E.LEFT)
        self._out()

    def fail(self, error: KafkaError) -> None:
        if self._fire(E.FATAL):
            self.error = self.error or error

    @property
    def subscribed(self) -> bool:
        return self.state in _SUBSCRIBED
