"""A share group member's state machine (KIP-932), whole, with no I/O.

Role: the sans-I/O core of :mod:`kpax.consumer.share.membership` (its driver
sends ShareGroupHeartbeat and fires the events). Every allowed transition is
in :data:`TRANSITIONS`, one table; :class:`ShareMemberMachine` owns the state
and the member's identity (member id, member epoch) and is the only code that
changes them. An event the table does not allow raises
:class:`IllegalStateError` naming the event, the group and the state; in FATAL
every event but a leave raises the error that made it fatal.

A share member has no reconciliation: the broker's assignment is taken as it
comes (several members may share a partition, nothing is revoked or
committed), so its states are fewer than a KIP-848 consumer's::

    UNSUBSCRIBED --subscribe--> JOINING (epoch 0, the subscription sent)
    JOINING --answered (epoch > 0)--> STABLE --answered--> STABLE
    JOINING, STABLE --subscribe--> (same state; the subscription sent again)
    JOINING, STABLE --fenced (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH)--> JOINING
        (epoch 0, same member id, no partitions)
    any state --leave--> LEAVING (a heartbeat at epoch -1 if it was in the
        group) --left--> UNSUBSCRIBED (epoch 0; subscribe joins again)
    any state but LEAVING --fatal--> FATAL (an error retrying cannot help)

The member id is made by the client once and kept for the consumer's life
(across fences and leaves, as the Java client does). Within one membership
(from JOINING to a fence or a leave) the epoch never goes back.

Imports: kpax.machines, kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kpax.machines import refusal
from kpax.proto.errors import IllegalStateError, KafkaError

__all__ = ["TRANSITIONS", "ShareMemberEvent", "ShareMemberMachine", "ShareMemberState"]


class ShareMemberState(enum.Enum):
    UNSUBSCRIBED = "not subscribed"
    JOINING = "joining (epoch 0)"
    STABLE = "in the group"
    LEAVING = "leaving the group"
    FATAL = "failed"


class ShareMemberEvent(enum.Enum):
    """What happens to a share member; the value is the action an error names."""

    SUBSCRIBE = "subscribe"
    ANSWERED = "take a heartbeat's answer"
    FENCED = "be fenced"
    LEAVE = "leave the group"
    LEFT = "finish leaving the group"
    FATAL = "fail"


S = ShareMemberState
E = ShareMemberEvent

#: state -> {event: next state}: every transition a share member may make.
TRANSITIONS: Mapping[ShareMemberState, Mapping[ShareMemberEvent, ShareMemberState]] = {
    S.UNSUBSCRIBED: {E.SUBSCRIBE: S.JOINING, E.LEAVE: S.LEAVING, E.FATAL: S.FATAL},
    S.JOINING: {
        E.SUBSCRIBE: S.JOINING,
        E.ANSWERED: S.STABLE,
        E.FENCED: S.JOINING,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    S.STABLE: {
        E.SUBSCRIBE: S.STABLE,
        E.ANSWERED: S.STABLE,
        E.FENCED: S.JOINING,
        E.LEAVE: S.LEAVING,
        E.FATAL: S.FATAL,
    },
    # a leave cut short by its timeout may be called again
    S.LEAVING: {E.LEAVE: S.LEAVING, E.LEFT: S.UNSUBSCRIBED},
    S.FATAL: {E.LEAVE: S.LEAVING, E.FATAL: S.FATAL},
}

#: The states in which the member heartbeats.
HEARTBEATING = frozenset({S.JOINING, S.STABLE})


class ShareMemberMachine:
    """The state and identity of one share group member. ``describe`` names the
    member in errors (e.g. ``"share group 'g'"``)."""

    __slots__ = ("_resend_subscription", "describe", "epoch", "error", "member_id", "state")

    def __init__(self, describe: str, member_id: str) -> None:
        self.describe = describe
        self.state = S.UNSUBSCRIBED
        self.member_id = member_id
        #: The member epoch (0: not in the group; the next heartbeat joins).
        self.epoch = 0
        self.error: KafkaError | None = None
        self._resend_subscription = True

    # ------------------------------------------------------------ queries

    @property
    def heartbeating(self) -> bool:
        """Subscribed and not leaving: the heartbeat loop runs."""
        return self.state in HEARTBEATING

    @property
    def in_group(self) -> bool:
        """The broker gave this membership an epoch (a leave heartbeat is due)."""
        return self.epoch > 0

    @property
    def full_heartbeat(self) -> bool:
        """The next heartbeat names the subscription (joining, or it changed)."""
        return self.epoch == 0 or self._resend_subscription

    def allows(self, event: ShareMemberEvent) -> bool:
        return event in TRANSITIONS[self.state]

    # ------------------------------------------------------------ the table

    def _fire(self, event: ShareMemberEvent) -> None:
        row = TRANSITIONS[self.state]
        if event not in row:
            fatal = self.error if self.state is S.FATAL else None
            raise refusal(event, self.state, f"for the member of {self.describe}", fatal=fatal)
        self.state = row[event]

    def _out(self) -> None:
        self.epoch = 0
        self._resend_subscription = True

    # ------------------------------------------------------------ events

    def subscribe(self) -> None:
        self._fire(E.SUBSCRIBE)
        self._resend_subscription = True

    def answered(self, member_id: str, epoch: int) -> None:
        """A heartbeat answered with no error: the member id (if the broker
        named one) and the member epoch it gave."""
        if self.allows(E.ANSWERED) and epoch <= 0:
            raise IllegalStateError(
                f"ShareGroupHeartbeat for {self.describe} answered member epoch {epoch} "
                f"with no error for member {self.member_id!r}: a member in the group has "
                "a positive epoch"
            )
        if self.allows(E.ANSWERED) and 0 <= epoch < self.epoch:
            raise IllegalStateError(
                f"ShareGroupHeartbeat for {self.describe} answered member epoch {epoch} "
                f"for member {self.member_id!r} at epoch {self.epoch}: an epoch never goes "
                "back within a membership"
            )
        self._fire(E.ANSWERED)
        self._resend_subscription = False
        if member_id:
            self.member_id = member_id
        self.epoch = epoch

    def fenced(self) -> None:
        """UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH: rejoin at epoch 0, same member id."""
        self._fire(E.FENCED)
        self._out()

    def leave(self) -> None:
        self._fire(E.LEAVE)

    def left(self) -> None:
        self._fire(E.LEFT)
        self._out()

    def fail(self, error: KafkaError) -> None:
        self._fire(E.FATAL)
        self.error = self.error or error
