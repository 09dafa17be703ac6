"""A consumer partition's fetch position as one state machine, with no I/O.

Role: the sans-I/O core of a partition's position (as
:mod:`kpax.producer.txn_state` is the transactions'). Every state, event and
allowed transition is in :data:`TRANSITIONS`, one table; :class:`PositionMachine`
(the base of :class:`kpax.consumer.state.PartitionState`) owns the state, the
reset strategy awaited, the error to raise, ``gen`` and the positions, and its
methods are the only code that changes them (but for the application's position
moving forward, below): the fetcher, ``Positions`` (resets and KIP-320
validation), the chunk decoder, the buffer (a revocation) and the consumer's
calls fire its events. An event the table refuses raises :class:`IllegalStateError` naming
the event, the partition and its state. A partition is fetched only when
FETCHABLE and not paused; paused is a flag beside the state (as in the Java
client's ``SubscriptionState``: a paused partition's reset or validation goes
on), so PAUSE and RESUME keep the state.

::

    (assigned) --> AWAITING_RESET --found--> FETCHABLE --fetched--> FETCHABLE
    AWAITING_RESET --found, with an epoch--> AWAITING_VALIDATION
    AWAITING_VALIDATION --validated, truncated--> FETCHABLE
    FETCHABLE --validate (leader moved, epoch fenced)--> AWAITING_VALIDATION
    FETCHABLE --truncated (a Fetch's diverging epoch)--> FETCHABLE (moved back)
    any state --reset (seek_to_*, out of range, topic re-created)--> AWAITING_RESET
    any state --fail (no offset, out of range or truncated with "none",
                      bad records)--> FAILED (every poll raises its error)
    FAILED --error dropped (paused while it was decoded)--> FETCHABLE
    any state --seek--> FETCHABLE,  --revoke--> REVOKED;  paused: a flag beside

The records handed to the application move ``position`` forward within
FETCHABLE (the buffer writes it per chunk taken: data, not a change of state);
each Fetch response moves ``fetch_position`` (:meth:`PositionMachine.fetched`,
once per partition and response, never per record). ``gen`` is bumped by every
event that makes data fetched earlier stale (seek, reset, pause, revoke), so
that such data is dropped wherever it is (in flight or buffered).

Imports: kpax.machines, kpax.proto.errors, kpax.structs and the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kpax.machines import refusal
from kpax.proto.errors import IllegalStateError
from kpax.structs import TopicPartition

__all__ = ["TRANSITIONS", "FetchState", "PositionEvent", "PositionMachine", "Reset"]


class FetchState(enum.Enum):
    #: The position is unknown: found by ``reset`` (the strategy) before any fetch.
    AWAITING_RESET = "awaiting a reset"
    #: The position is known but its leader epoch is in doubt: checked with
    #: OffsetForLeaderEpoch (KIP-320) before the next fetch.
    AWAITING_VALIDATION = "awaiting validation"
    FETCHABLE = "fetchable"
    #: Stopped with ``error``, which every poll raises until a seek.
    FAILED = "failed"
    #: No longer assigned: every later event but REVOKE (or a dropped error) is refused.
    REVOKED = "revoked"


class Reset(enum.Enum):
    """Where a position awaiting a reset is found."""

    #: The group's committed offset, else ``auto_offset_reset``.
    COMMITTED = "the committed offset"
    #: ``auto_offset_reset`` ("none": the partition fails).
    POLICY = "auto_offset_reset"
    EARLIEST = "earliest"
    LATEST = "latest"


class PositionEvent(enum.Enum):
    """What happens to a partition's position; the value is the action an error names."""

    #: Assigned, ``seek_to_beginning``/``seek_to_end``, out of range with a reset
    #: policy, the topic re-created: the position is to be found (a strategy).
    RESET = "reset the position"
    #: The reset is answered: the committed offset (no epoch) or ListOffsets.
    FOUND = "set the position found"
    #: The reset is answered with a committed offset and its leader epoch.
    FOUND_UNVALIDATED = "set the position found with its leader epoch"
    #: The leader moved or fenced the epoch: validate before fetching again.
    VALIDATE = "validate the position"
    #: OffsetForLeaderEpoch found no truncation (or there is no epoch to check).
    VALIDATED = "finish validating the position"
    #: The leader's log ends below the position (KIP-320): it moves back there.
    TRUNCATED = "move the position back to the end of the leader's log"
    #: A Fetch response's batches: the fetch position moves to their end.
    FETCHED = "advance the fetch position"
    #: Fetch again from an earlier fetch position (the rest of a response past the
    #: decompression cap).
    REFETCH = "fetch again from an earlier offset"
    FAIL = "fail the partition"
    #: The error found while decoding is dropped (paused meanwhile, or the chunk
    #: ended before it): found again when fetched again.
    ERROR_DROPPED = "drop the partition's error"
    SEEK = "seek"
    PAUSE = "pause"
    RESUME = "resume"
    REVOKE = "revoke the partition"


S, E = FetchState, PositionEvent

#: Events every assigned state allows (the state may change as the row says).
_ANY = {
    E.RESET: S.AWAITING_RESET,
    E.SEEK: S.FETCHABLE,
    E.FAIL: S.FAILED,
    E.PAUSE: None,  # None: the state stays (paused is a flag beside it)
    E.RESUME: None,
    E.REVOKE: S.REVOKED,
}

#: state -> {event: next state (None: the same)}. An event missing from a state's
#: row is refused. VALIDATE outside FETCHABLE changes nothing: a position being
#: found or validated is checked against the new leader anyway, a failed one
#: stays failed (as the Java client's ``maybeValidatePosition`` ignores a
#: partition awaiting a reset). FETCHED in AWAITING_VALIDATION and FAILED: data
#: of a fetch sent before the state changed (its fetch position moves on; the
#: state stays; REFETCH likewise). ERROR_DROPPED of an error that is not the partition's is ignored.
TRANSITIONS: Mapping[FetchState, Mapping[PositionEvent, FetchState | None]] = {
    S.AWAITING_RESET: {
        **_ANY,
        E.FOUND: S.FETCHABLE,
        E.FOUND_UNVALIDATED: S.AWAITING_VALIDATION,
        E.VALIDATE: None,
        E.ERROR_DROPPED: None,
    },
    S.AWAITING_VALIDATION: {
        **_ANY,
        E.VALIDATE: None,
        E.VALIDATED: S.FETCHABLE,
        E.TRUNCATED: S.FETCHABLE,
        E.FETCHED: None,
        E.REFETCH: None,
        E.ERROR_DROPPED: None,
    },
    S.FETCHABLE: {
        **_ANY,
        E.VALIDATE: S.AWAITING_VALIDATION,
        E.TRUNCATED: S.FETCHABLE,
        E.FETCHED: None,
        E.REFETCH: None,
        E.ERROR_DROPPED: None,
    },
    S.FAILED: {
        **_ANY,
        E.VALIDATE: None,
        E.FETCHED: None,
        E.REFETCH: None,
        E.ERROR_DROPPED: S.FETCHABLE,  # (only when it drops the partition's own error)
    },
    S.REVOKED: {E.REVOKE: None, E.ERROR_DROPPED: None},
}


#: States that need a position; the events that set one as they enter them.
_NEED_POSITION = frozenset((S.FETCHABLE, S.AWAITING_VALIDATION))
_MOVES = frozenset((E.SEEK, E.FOUND, E.FOUND_UNVALIDATED, E.TRUNCATED))


class PositionMachine:
    """One partition's fetch state, positions and error (module docstring).

    ``position`` (None: unknown) is the next offset the application sees and
    ``position_epoch`` the leader epoch of the record before it; ``fetch_position``
    (runs ahead of ``position``) and ``fetch_epoch`` (Fetch v12 LastFetchedEpoch)
    are the next fetch's. ``reset`` is the strategy awaited in AWAITING_RESET,
    ``error`` what a FAILED partition raises."""

    __slots__ = (
        "assigned",
        "error",
        "fetch_epoch",
        "fetch_position",
        "gen",
        "paused",
        "position",
        "position_epoch",
        "reset",
        "state",
        "tp",
    )

    def __init__(self, tp: TopicPartition, reset: Reset = Reset.POLICY) -> None:
        self.tp = tp
        self.state = FetchState.AWAITING_RESET
        self.reset: Reset | None = reset
        self.error: BaseException | None = None
        self.position: int | None = None
        self.position_epoch = -1
        self.fetch_position: int | None = None
        self.fetch_epoch = -1
        self.gen = 0
        self.paused = False
        #: False once REVOKED (a slot, read by the taking thread per chunk).
        self.assigned = True

    # ------------------------------------------------------------ the table

    def allows(self, event: PositionEvent) -> bool:
        return event in TRANSITIONS[self.state]

    def _fire(self, event: PositionEvent) -> FetchState:
        row = TRANSITIONS[self.state]
        if event not in row:
            how = f" ({self.reset.value})" if self.reset is not None else ""
            subject = f"of partition {self.tp}"
            raise refusal(event, self.state, subject, holder="its position", note=how)
        new = row[event]
        if new is not None:
            if new in _NEED_POSITION and event not in _MOVES and self.position is None:
                raise IllegalStateError(
                    f"cannot {event.value} of partition {self.tp}: it has no position "
                    f"to be {new.value} at"
                )
            self.state = new
            if new is not S.AWAITING_RESET:
                self.reset = None
            if new is not S.FAILED:
                self.error = None
            if new is S.REVOKED:
                self.assigned = False
        return self.state

    @property
    def fetchable(self) -> bool:
        return self.state is S.FETCHABLE and not self.paused

    @property
    def awaiting(self) -> bool:
        """The position is being found or validated (``position()`` waits)."""
        return self.state is S.AWAITING_RESET or self.state is S.AWAITING_VALIDATION

    # ------------------------------------------------------------ events

    def await_reset(self, how: Reset) -> None:
        """RESET: find the position again per ``how``; the positions are forgotten
        and data fetched before is dropped."""
        self._fire(E.RESET)
        self.gen += 1
        self.reset = how
        self.position = self.fetch_position = None
        self.position_epoch = self.fetch_epoch = -1

    def found(self, offset: int, epoch: int = -1, *, validate: bool = False) -> None:
        """FOUND (or FOUND_UNVALIDATED with ``validate``): the reset's answer."""
        self._fire(E.FOUND_UNVALIDATED if validate else E.FOUND)
        self._move(offset, epoch)

    def seek(self, offset: int, epoch: int = -1) -> None:
        """SEEK: move both positions there (drops fetched data of the old position)."""
        self._fire(E.SEEK)
        self._move(offset, epoch)

    def _move(self, offset: int, epoch: int) -> None:
        self.gen += 1
        self.position = self.fetch_position = offset
        self.position_epoch = self.fetch_epoch = epoch

    def validate(self) -> None:
        """VALIDATE: the leader's epoch changed under the position."""
        self._fire(E.VALIDATE)

    def validated(self) -> None:
        """VALIDATED: no truncation below the position."""
        self._fire(E.VALIDATED)

    def truncated(self, end: int, epoch: int) -> None:
        """TRUNCATED: the leader's log for ``epoch`` ends at ``end``, below the position."""
        self._fire(E.TRUNCATED)
        self._move(end, epoch)

    def fetched(self, next_offset: int, epoch: int) -> None:
        """FETCHED: a response's batches end at ``next_offset`` (once per partition
        and response: FETCHABLE, the usual state, keeps its state with no lookup)."""
        if self.state is not S.FETCHABLE:
            self._fire(E.FETCHED)
        self.fetch_position = next_offset
        self.fetch_epoch = epoch

    def refetch(self, offset: int, epoch: int) -> None:
        """REFETCH: fetch again from ``offset`` (not past what was decoded)."""
        self._fire(E.REFETCH)
        self.fetch_position = offset
        self.fetch_epoch = epoch

    def fail(self, exc: BaseException, *, drop_in_flight: bool = False) -> None:
        """FAIL: stop with ``exc`` (replacing an earlier error). ``drop_in_flight``:
        a fetch already sent is dropped when it comes back."""
        self._fire(E.FAIL)
        self.error = exc
        if drop_in_flight:
            self.fetch_position = -1

    def drop_error(self, exc: BaseException) -> None:
        """ERROR_DROPPED: ``exc``, found while decoding, is not raised (the
        partition is fetched again and finds it again if it is still there);
        nothing changes when ``exc`` is not the partition's error."""
        if self.state is S.FAILED and self.error is not exc:
            return
        self._fire(E.ERROR_DROPPED)

    def pause(self) -> None:
        """PAUSE: stop fetching; what was fetched ahead is fetched again on resume."""
        self._fire(E.PAUSE)
        if not self.paused:
            self.paused = True
            if self.position is not None:
                self.gen += 1
                self.fetch_position = self.position
                self.fetch_epoch = self.position_epoch

    def resume(self) -> None:
        self._fire(E.RESUME)
        self.paused = False

    def revoke(self) -> None:
        """REVOKE: the partition left the assignment; its data is dropped."""
        self._fire(E.REVOKE)
        self.gen += 1
