"""Consumer-side errors that no broker error code names.

Role: :class:`CommitFailedError` (a commit rejected because the group moved
on without this member), :class:`RebalanceInProgressCommitError` (a commit
refused because the group is rebalancing: commit again after the next poll),
:class:`NoOffsetForPartitionError` (``auto_offset_reset="none"`` and no valid
position), :class:`LogTruncationError` (KIP-320: the log was truncated below
the position after a leader change).

Imports: kpax.proto.errors.
"""

from __future__ import annotations

from kpax.proto.errors import IllegalStateError, KafkaError

__all__ = [
    "CommitFailedError",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "RebalanceInProgressCommitError",
]


class CommitFailedError(KafkaError):
    """An offset commit was rejected because this member's generation is gone
    (the group went on without it, or the member was evicted for exceeding
    ``max_poll_interval_ms``). The partitions may now belong to another member:
    this member treats them as lost (``on_partitions_lost``, no commit) and
    rejoins; whoever gets them next starts from the committed offsets."""


class RebalanceInProgressCommitError(KafkaError):
    """An offset commit was not applied because the group is rebalancing
    (Java's ``RebalanceInProgressException``): the coordinator answered
    REBALANCE_IN_PROGRESS, or the group moved to a new generation while this
    member was joining it. The member keeps its partitions; committing again
    now cannot help, but after the next ``poll()`` (which completes the
    rebalance) it can: commit again then. Not a :class:`CommitFailedError`."""


class NoOffsetForPartitionError(IllegalStateError):
    """No valid position for a partition and ``auto_offset_reset="none"``."""


class LogTruncationError(KafkaError):
    """The partition's log was truncated below the consumer's position after
    a leader change (detected through leader epochs, KIP-320)."""
