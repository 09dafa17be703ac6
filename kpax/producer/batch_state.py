"""A producer batch's life as one state machine, with no I/O.

Role: every state a :class:`~kpax.producer.batch.ProducerBatch` goes through,
every event and every allowed transition are in :data:`TRANSITIONS`, one table
(as :mod:`kpax.producer.txn_state` holds the transaction's). The batch holds
its state in ``state``; :meth:`ProducerBatch.fire
<kpax.producer.batch.ProducerBatch.fire>` is the only code that changes it
(and ``done``, its mirror for readers on any thread: true in DONE and
FAILED). An event the table does not allow raises IllegalStateError naming the
batch, the event and the state (:func:`kpax.machines.refusal`). Firing costs two
dict lookups, per batch and never per record (the C send path only appends to an OPEN batch).

::

    OPEN --close--> CLOSED --seal--> SEALED --send--> IN_FLIGHT --succeed--> DONE
    OPEN --seal--> SEALED (closed and sealed at once: the common path)
    OPEN, CLOSED --seal_failed--> UNENCODABLE (failed on the I/O loop, never sent)
    IN_FLIGHT --retry--> RETRY_WAIT --send--> IN_FLIGHT
    IN_FLIGHT --split--> SPLIT --succeed--> DONE (once every part is, none failed)
    OPEN --split_off--> RETRY_WAIT (a part of a split batch, sent in its place)
    any state but DONE, FAILED --fail--> FAILED (refused, expired, aborted, a part failed)

DONE and FAILED are final: the outcome is set once (a late answer for a batch
that expired in flight is ignored by :meth:`ProducerBatch.complete
<kpax.producer.batch.ProducerBatch.complete>` before any event).

What the fields hold besides the state (data, not state): ``data`` the bytes
once SEALED, ``attempts`` how often it failed retriably (against ``retries``),
``retry_at`` when a RETRY_WAIT batch may go, ``seal_error`` why an UNENCODABLE
batch failed, ``parts``/``parent`` the structure of a split (kept after it
completes: each record's outcome is its part's).

Imports: the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["FINAL", "TRANSITIONS", "BatchEvent", "BatchState"]


class BatchState(enum.IntEnum):
    """Where a batch is (an int enum: the state is compared per batch on the
    sender's paths, where int comparisons are cheapest)."""

    #: Its partition's open batch (``PartitionQueue.open``): takes records.
    OPEN = 0
    #: Closed (in ``PartitionQueue.ready``), not yet encoded: no producer id
    #: yet, or an epoch bump is due; sealed when the sender takes it.
    CLOSED = 1
    #: Encoded with its producer id, epoch and sequence numbers, never sent.
    SEALED = 2
    #: Could not be encoded: fails on the I/O loop (``Accumulator.failed``), never sent.
    UNENCODABLE = 3
    #: In a Produce request not yet answered.
    IN_FLIGHT = 4
    #: Back in its queue after a retriable failure, until ``retry_at`` (a part
    #: of a split batch starts here).
    RETRY_WAIT = 5
    #: Refused as too large: its parts are sent instead; done once they all are.
    SPLIT = 6
    #: Written (every record's offset known, or acks=0).
    DONE = 7
    #: Failed: every record's error is the batch's (a split batch's: its part's).
    FAILED = 8


class BatchEvent(enum.IntEnum):
    """What happens to a batch (an int enum, as :class:`BatchState`: hashed in C)."""

    CLOSE = 0
    SEAL = 1
    SEAL_FAILED = 2
    SEND = 3
    RETRY = 4
    SPLIT = 5
    #: A new batch is a part of a split one (sent in its place).
    SPLIT_OFF = 6
    SUCCEED = 7
    FAIL = 8


S, E = BatchState, BatchEvent

#: state -> {event: next state}; an event missing from a state's row is refused.
TRANSITIONS: Mapping[BatchState, Mapping[BatchEvent, BatchState]] = {
    S.OPEN: {
        E.CLOSE: S.CLOSED,
        E.SEAL: S.SEALED,  # closed and sealed at once (the common path)
        E.SEAL_FAILED: S.UNENCODABLE,
        E.SPLIT_OFF: S.RETRY_WAIT,
        E.FAIL: S.FAILED,
    },
    S.CLOSED: {E.SEAL: S.SEALED, E.SEAL_FAILED: S.UNENCODABLE, E.FAIL: S.FAILED},
    S.SEALED: {E.SEND: S.IN_FLIGHT, E.FAIL: S.FAILED},
    S.UNENCODABLE: {E.FAIL: S.FAILED},
    S.IN_FLIGHT: {
        E.SUCCEED: S.DONE,
        E.RETRY: S.RETRY_WAIT,
        E.SPLIT: S.SPLIT,
        E.FAIL: S.FAILED,
    },
    S.RETRY_WAIT: {E.SEND: S.IN_FLIGHT, E.FAIL: S.FAILED},
    S.SPLIT: {E.SUCCEED: S.DONE, E.FAIL: S.FAILED},
    S.DONE: {},
    S.FAILED: {},
}

#: The states a batch ends in.
FINAL = frozenset({S.DONE, S.FAILED})
