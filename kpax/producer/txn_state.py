"""The transactional producer's state machine, whole, with no I/O.

Role: the sans-I/O core of :mod:`kpax.producer.transactions` (its driver
sends the requests). Every state, every event and every allowed transition is
in :data:`TRANSITIONS`, one table (as h11's ``_state.py`` holds HTTP/1.1's);
:class:`TxnMachine` owns the state and the error that put it there, and is the
only code that changes them. An event the table does not allow in the current
state raises :class:`IllegalStateError` naming the call, the state and what to
do; in FATAL every call raises the error that made it fatal.

::

    UNINITIALIZED --init--> INITIALIZING --initialized--> READY --begin--> IN_TRANSACTION
         ^                       |                          ^   \\--init--> INITIALIZING
         '-------init_failed-----'                          |
    IN_TRANSACTION --commit--> COMMITTING --ended--> READY
    IN_TRANSACTION --abort---> ABORTING   --ended--> READY
    IN_TRANSACTION, COMMITTING --failed--> ABORTABLE_ERROR --abort--> ABORTING
    COMMITTING --commit--> COMMITTING, ABORTING --abort--> ABORTING   (a call that
        timed out is called again: it resumes)
    any state --fenced/fatal--> FATAL (every later call raises its error)

Imports: kpax.machines, kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kpax.machines import refusal
from kpax.proto.errors import KafkaError

__all__ = ["TRANSITIONS", "TxnEvent", "TxnMachine", "TxnState"]


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL = "fatal error"


class TxnEvent(enum.Enum):
    """What happens to the transactional producer (the user's calls and the
    outcomes of its requests); the value is the action an error names."""

    INIT = "init transactions"
    INITIALIZED = "finish init transactions"
    INIT_FAILED = "fail init transactions"
    BEGIN = "begin a transaction"
    SEND = "send"
    SEND_OFFSETS = "send offsets to the transaction"
    COMMIT = "commit the transaction"
    ABORT = "abort the transaction"
    ENDED = "end the transaction"
    #: A batch, an offset commit or a commit's flush failed: only abort is left.
    FAILED = "fail the transaction"
    #: Fenced, or an error no transaction survives.
    FATAL = "fail the producer"


S, E = TxnState, TxnEvent

#: state -> {event: next state}. An event missing from a state's row is refused
#: (in FATAL: with the error that made it fatal). FAILED where no transaction
#: can fail is ignored (the state stays); so are failures after FATAL.
TRANSITIONS: Mapping[TxnState, Mapping[TxnEvent, TxnState]] = {
    S.UNINITIALIZED: {E.INIT: S.INITIALIZING, E.FAILED: S.UNINITIALIZED, E.FATAL: S.FATAL},
    S.INITIALIZING: {
        E.INITIALIZED: S.READY,
        E.INIT_FAILED: S.UNINITIALIZED,
        E.FAILED: S.INITIALIZING,
        E.FATAL: S.FATAL,
    },
    S.READY: {
        E.INIT: S.INITIALIZING,
        E.BEGIN: S.IN_TRANSACTION,
        E.FAILED: S.READY,
        E.FATAL: S.FATAL,
    },
    S.IN_TRANSACTION: {
        E.SEND: S.IN_TRANSACTION,
        E.SEND_OFFSETS: S.IN_TRANSACTION,
        E.COMMIT: S.COMMITTING,
        E.ABORT: S.ABORTING,
        E.FAILED: S.ABORTABLE_ERROR,
        E.FATAL: S.FATAL,
    },
    S.COMMITTING: {
        E.COMMIT: S.COMMITTING,  # a commit that timed out, called again
        E.ENDED: S.READY,
        E.FAILED: S.ABORTABLE_ERROR,
        E.FATAL: S.FATAL,
    },
    S.ABORTING: {
        E.ABORT: S.ABORTING,  # an abort that timed out, called again
        E.ENDED: S.READY,
        E.FAILED: S.ABORTING,  # (a batch failing now changes nothing: it is aborted)
        E.FATAL: S.FATAL,
    },
    S.ABORTABLE_ERROR: {E.ABORT: S.ABORTING, E.FAILED: S.ABORTABLE_ERROR, E.FATAL: S.FATAL},
    S.FATAL: {E.FAILED: S.FATAL, E.FATAL: S.FATAL},
}


class TxnMachine:
    """The state of one transactional producer and the error that put it there
    (ABORTABLE_ERROR, FATAL). ``describe`` names the producer in errors."""

    __slots__ = ("describe", "error", "state")

    def __init__(self, describe: str) -> None:
        self.describe = describe
        self.state = TxnState.UNINITIALIZED
        self.error: KafkaError | None = None

    def allows(self, event: TxnEvent) -> bool:
        return event in TRANSITIONS[self.state]

    def check(self, event: TxnEvent) -> None:
        """Raise what ``event`` gets in this state if the table refuses it: the
        fatal error in FATAL, else an IllegalStateError saying what to do."""
        if event in TRANSITIONS[self.state]:
            return
        hint = ""
        if self.state is TxnState.ABORTABLE_ERROR and self.error is not None:
            hint = f" (the transaction failed: {self.error.message}; abort it)"
        elif self.state is TxnState.READY and event in (E.SEND, E.SEND_OFFSETS, E.COMMIT, E.ABORT):
            hint = " (no transaction begun: call begin_transaction() first)"
        elif self.state is TxnState.UNINITIALIZED:
            hint = " (call init_transactions() first)"
        elif self.state in (TxnState.COMMITTING, TxnState.ABORTING):
            hint = f" (the transaction is {self.state.value}: finish that call first)"
        fatal = self.error if self.state is TxnState.FATAL else None
        subject = f"for {self.describe}"
        raise refusal(event, self.state, subject, fatal=fatal, holder="the producer", note=hint)

    def fire(self, event: TxnEvent, error: KafkaError | None = None) -> TxnState:
        """Move on ``event`` (refused as :meth:`check` says); FAILED and FATAL keep
        ``error`` (the first one: a later failure of the same transaction is a
        consequence), ENDED and INITIALIZED clear it. Returns the new state."""
        self.check(event)
        new = TRANSITIONS[self.state][event]
        if new is not self.state and new in (TxnState.ABORTABLE_ERROR, TxnState.FATAL):
            self.error = error
        elif event in (E.ENDED, E.INITIALIZED):
            self.error = None
        self.state = new
        return new
