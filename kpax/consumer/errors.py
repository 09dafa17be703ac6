"""Consumer-side errors that no broker error code names (defined in
kpax.proto.errors, with the rest of the tree that kpax.errors exports).

Role: :class:`CommitFailedError` (a commit rejected because the group moved
on without this member), :class:`RebalanceInProgressCommitError` (a commit
refused because the group is rebalancing: commit again after the next poll),
:class:`NoOffsetForPartitionError` (``auto_offset_reset="none"`` and no valid
position), :class:`LogTruncationError` (KIP-320: the log was truncated below
the position after a leader change).

Imports: kpax.proto.errors.
"""

from __future__ import annotations

from kpax.proto.errors import (
    CommitFailedError,
    LogTruncationError,
    NoOffsetForPartitionError,
    RebalanceInProgressCommitError,
)

__all__ = [
    "CommitFailedError",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "RebalanceInProgressCommitError",
]
