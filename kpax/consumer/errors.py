"""Consumer-side errors that no broker error code names.

Role: :class:`CommitFailedError` (a commit rejected because the group moved
on), :class:`NoOffsetForPartitionError` (``auto_offset_reset="none"`` and
no valid position), :class:`LogTruncationError` (KIP-320: the log was
truncated below the position after a leader change).

Imports: kpax.proto.errors.
"""

from __future__ import annotations

from kpax.proto.errors import IllegalStateError, KafkaError

__all__ = ["CommitFailedError", "LogTruncationError", "NoOffsetForPartitionError"]


class CommitFailedError(KafkaError):
    """An offset commit was rejected because this member's generation is gone
    (a rebalance happened, or the member was evicted for exceeding
    ``max_poll_interval_ms``). The partitions may now belong to another member."""


class NoOffsetForPartitionError(IllegalStateError):
    """No valid position for a partition and ``auto_offset_reset="none"``."""


class LogTruncationError(KafkaError):
    """The partition's log was truncated below the consumer's position after
    a leader change (detected through leader epochs, KIP-320)."""
