"""Broker error families: which error classes a client handles alike, defined once.

Role: the client layers (cluster, producer, consumer, admin) match broker
errors by class, never by number: each family below is a tuple of the
generated classes of :mod:`kpax.proto.error_codes`, usable as
``isinstance(exc, FAMILY)``, ``issubclass(cls, FAMILY)`` and in ``except
FAMILY:``. A raw ``error_code`` from a response is tested with
:func:`code_in` (``code_in(p.error_code, COORDINATOR_ERRORS)``) or turned into
its class with :func:`~kpax.proto.errors.error_for_code`; a single code is
named by its class (``issubclass(error_for_code(code), NotCoordinatorError)``).
Each family's docstring says what a client does on it. Where callers need
different sets (the leader families) each set has its own name, built from
the smaller families. What a failed request makes stale -- which route the
client forgets before it retries -- is one table, :data:`FORGET`, read through
:func:`stale_after` by every client path.

Imports: kpax.proto.errors, kpax.proto.error_codes.
"""

from __future__ import annotations

import enum

from kpax.proto.error_codes import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedLeaderEpochError,
    FencedMemberEpochError,
    FetchSessionIdNotFoundError,
    IllegalGenerationError,
    InconsistentTopicIdError,
    InvalidFetchSessionEpochError,
    InvalidProducerEpochError,
    InvalidShareSessionEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    LeaderNotAvailableError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OperationNotAttemptedError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    RebalanceInProgressError,
    ReplicaNotAvailableError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
    StaleMemberEpochError,
    TransactionalIdAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kpax.proto.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaTimeoutError,
    error_for_code,
)

__all__ = [
    "CLASSIC_MEMBER_FENCED_ERRORS",
    "CONSUMER_MEMBER_FENCED_ERRORS",
    "COORDINATOR_ERRORS",
    "EPOCH_VALIDATION_ERRORS",
    "FETCH_SESSION_ERRORS",
    "LEADER_CHANGED_ERRORS",
    "LEADER_OR_TOPIC_ERRORS",
    "PRODUCER_FENCED_ERRORS",
    "REPLICA_NOT_READY_ERRORS",
    "SEQUENCE_ERRORS",
    "SHARE_SESSION_ERRORS",
    "STALE_GENERATION_ERRORS",
    "STALE_METADATA_ERRORS",
    "TXN_FATAL_ERRORS",
    "TXN_RETRY_ERRORS",
    "UNKNOWN_TOPIC_ERRORS",
    "FORGET",
    "ErrorFamily",
    "Stale",
    "code_in",
    "code_of",
    "stale_after",
]

#: A family: a tuple of broker error classes (an ``isinstance`` class-info).
ErrorFamily = tuple[type[BrokerResponseError], ...]


def code_in(code: int, family: type[BrokerResponseError] | ErrorFamily) -> bool:
    """Whether the broker error ``code`` (from a response) is in ``family`` (a
    family or one error class); False for 0 (NONE)."""
    return code != 0 and issubclass(error_for_code(code), family)


def code_of(cls: type[BrokerResponseError]) -> int:
    """The code of a generated error class, as an ``int`` (e.g. to put in a record's
    ``error_code`` field)."""
    code = cls.code
    assert code is not None
    return code


# ---------------------------------------------------------------- coordinators

COORDINATOR_ERRORS: ErrorFamily = (
    CoordinatorLoadInProgressError,  # 14
    CoordinatorNotAvailableError,  # 15
    NotCoordinatorError,  # 16
)
"""The group or transaction coordinator moved, is loading or is not available:
forget the cached coordinator (``Cluster.coordinator_is_down``), find it again
(FindCoordinator) and resend after a backoff. All three are retriable."""

# ---------------------------------------------------------------- partition leaders

LEADER_CHANGED_ERRORS: ErrorFamily = (
    LeaderNotAvailableError,  # 5
    NotLeaderOrFollowerError,  # 6
    FencedLeaderEpochError,  # 74
    UnknownLeaderEpochError,  # 75
)
"""The partition's leadership changed (or is changing) since the client's
metadata: forget the leader (``Cluster.leader_is_down``), refresh the metadata
and send to the new leader. Part of every leader family below."""

UNKNOWN_TOPIC_ERRORS: ErrorFamily = (
    UnknownTopicOrPartitionError,  # 3
    UnknownTopicIdError,  # 100
)
"""The broker does not know the topic (by name or by id): it may be just
created (metadata not yet propagated) or deleted. Refresh the metadata and
retry for a while; an admin call reports it after a short grace period."""

REPLICA_NOT_READY_ERRORS: ErrorFamily = (
    ReplicaNotAvailableError,  # 9
    OffsetNotAvailableError,  # 78
)
"""The replica asked is not ready to answer (e.g. a new leader whose high
watermark is not yet known): refresh the metadata and ask again."""

LEADER_OR_TOPIC_ERRORS: ErrorFamily = LEADER_CHANGED_ERRORS + UNKNOWN_TOPIC_ERRORS
"""Leader changed or topic unknown to the broker (the producer's answer to a
Produce): forget the partition's leader and refresh the metadata; the batch is
then retried like any retriable error. Unlike :data:`STALE_METADATA_ERRORS` it
leaves out REPLICA_NOT_AVAILABLE / OFFSET_NOT_AVAILABLE (not produce answers)
and KAFKA_STORAGE_ERROR / INCONSISTENT_TOPIC_ID (retried without a metadata
refresh)."""

STALE_METADATA_ERRORS: ErrorFamily = (
    LEADER_CHANGED_ERRORS
    + UNKNOWN_TOPIC_ERRORS
    + REPLICA_NOT_READY_ERRORS
    + (
        KafkaStorageError,  # 56
        InconsistentTopicIdError,  # 103
    )
)
"""The consumer's leader family (Fetch, ListOffsets, OffsetForLeaderEpoch): the
client's view of the partition is stale (leader moved or not ready, topic
unknown or re-created, the leader's log dir offline). Forget the leader,
refresh the topic's metadata and retry the partition."""

EPOCH_VALIDATION_ERRORS: ErrorFamily = (
    NotLeaderOrFollowerError,  # 6
    FencedLeaderEpochError,  # 74
    UnknownLeaderEpochError,  # 75
)
"""After these a consumer's fetch position may come from an old leader's log:
validate it against the new leader (OffsetForLeaderEpoch, KIP-320) before
fetching on, besides the :data:`STALE_METADATA_ERRORS` handling."""

FETCH_SESSION_ERRORS: ErrorFamily = (
    FetchSessionIdNotFoundError,  # 70
    InvalidFetchSessionEpochError,  # 71
)
"""The broker lost or rejected the fetch session (KIP-227): drop the session
and send the next Fetch as a full one, without failing anything."""

SHARE_SESSION_ERRORS: ErrorFamily = (
    ShareSessionNotFoundError,  # 122
    InvalidShareSessionEpochError,  # 123
    ShareSessionLimitReachedError,  # 133
)
"""The broker lost, rejected or could not open a share session (KIP-932): open a
new one (epoch 0) after a backoff; acknowledgements sent in the lost session
fail (its records are released when their locks end)."""

# ---------------------------------------------------------------- group membership

CLASSIC_MEMBER_FENCED_ERRORS: ErrorFamily = (
    IllegalGenerationError,  # 22
    UnknownMemberIdError,  # 25
)
"""Classic protocol (JoinGroup / SyncGroup / Heartbeat): the coordinator no
longer knows this member in this generation. Drop the generation (and, on
UNKNOWN_MEMBER_ID, the member id), hand the partitions back as lost, rejoin.
(REBALANCE_IN_PROGRESS means rejoin while keeping them, MEMBER_ID_REQUIRED
join again with the given id, FENCED_INSTANCE_ID is fatal: their classes are
used alone.)"""

CONSUMER_MEMBER_FENCED_ERRORS: ErrorFamily = (
    UnknownMemberIdError,  # 25
    FencedMemberEpochError,  # 110
)
"""KIP-848 consumer protocol (ConsumerGroupHeartbeat): the member was fenced.
Hand the partitions back as lost and rejoin with member epoch 0."""

STALE_GENERATION_ERRORS: ErrorFamily = (
    IllegalGenerationError,  # 22
    UnknownMemberIdError,  # 25
    RebalanceInProgressError,  # 27
    FencedMemberEpochError,  # 110
    StaleMemberEpochError,  # 113
)
"""An OffsetCommit refused because the member's generation (classic) or member
epoch (KIP-848) is not the group's current one: the commit is not applied. A
member out of the group (the generation it is in now gone) raises
``CommitFailedError`` and rejoins, its partitions lost (another member may own
them now); REBALANCE_IN_PROGRESS, or a generation that moved on while the
member was joining, is a ``RebalanceInProgressCommitError`` (commit again after
the next poll)."""

# ---------------------------------------------------------------- producer

SEQUENCE_ERRORS: ErrorFamily = (
    OutOfOrderSequenceNumberError,  # 45
    InvalidProducerEpochError,  # 47
    UnknownProducerIdError,  # 59
)
"""The broker's state for this idempotent producer no longer matches its
sequence numbers: an idempotent (non-transactional) producer bumps its epoch
/ resets the partition's sequence and retries; in a transaction the batch
fails. (DUPLICATE_SEQUENCE_NUMBER, 46, is a success: the batch was written.)"""

PRODUCER_FENCED_ERRORS: ErrorFamily = (
    InvalidProducerEpochError,  # 47
    ProducerFencedError,  # 90
)
"""Another producer with the same ``transactional_id`` started (or the
transaction timed out): the transactional producer is fenced for good; it
reports :class:`~kpax.proto.error_codes.ProducerFencedError`."""

TXN_FATAL_ERRORS: ErrorFamily = (
    InvalidProducerEpochError,  # 47
    InvalidTxnStateError,  # 48
    TransactionalIdAuthorizationFailedError,  # 53
    ProducerFencedError,  # 90
)
"""Fatal for a transactional producer: every later call raises the error again
(fenced, not authorized for the transactional id, or a transaction state the
coordinator refuses); only closing is left."""

TXN_RETRY_ERRORS: ErrorFamily = (
    ConcurrentTransactionsError,  # 51
    OperationNotAttemptedError,  # 55
)
"""AddPartitionsToTxn: the coordinator is still completing the previous
transaction (CONCURRENT_TRANSACTIONS), or did not try this partition because
another one in the request failed (OPERATION_NOT_ATTEMPTED): retry after a
backoff, with the partitions still to add."""

# ---------------------------------------------------------------- what an error makes stale


class Stale(enum.Flag):
    """What a failed request proved the client's view wrong about: what it
    forgets before it tries again (:func:`stale_after`)."""

    NOTHING = 0
    #: The partition's leader: forget it (``Cluster.leader_is_down``) and
    #: refresh the topic's metadata before sending to the partition again.
    LEADER = enum.auto()
    #: The group's or transactional id's coordinator: forget it
    #: (``Cluster.coordinator_is_down``) and find it again (FindCoordinator).
    COORDINATOR = enum.auto()
    #: The connection is gone: whatever was routed over it (a leader, a
    #: coordinator) is looked up again.
    CONNECTION = enum.auto()
    #: The broker's fetch session (KIP-227): the next Fetch is a full one.
    FETCH_SESSION = enum.auto()
    #: The broker's share session (KIP-932): a new one is opened (epoch 0).
    SHARE_SESSION = enum.auto()


#: Which error family makes what stale, in one place: the one request path,
#: the producer's sender, the fetchers and the offset lookups all ask
#: :func:`stale_after`. (Java's client does the same with its
#: ``InvalidMetadataException`` family for leaders and its coordinator
#: errors for coordinators.)
FORGET: tuple[tuple[ErrorFamily, Stale], ...] = (
    (COORDINATOR_ERRORS, Stale.COORDINATOR),
    (STALE_METADATA_ERRORS, Stale.LEADER),
    (FETCH_SESSION_ERRORS, Stale.FETCH_SESSION),
    (SHARE_SESSION_ERRORS, Stale.SHARE_SESSION),
)


def stale_after(error: BaseException | type[BaseException]) -> Stale:
    """What ``error`` (an exception or its class) proved stale (see :data:`FORGET`):
    a broken connection or a request that timed out (the broker may be gone)
    makes the route it took stale, whichever it was."""
    cls = error if isinstance(error, type) else type(error)
    if issubclass(cls, (KafkaConnectionError, KafkaTimeoutError)):
        return Stale.CONNECTION
    out = Stale.NOTHING
    for family, what in FORGET:
        if issubclass(cls, family):
            out |= what
    return out
