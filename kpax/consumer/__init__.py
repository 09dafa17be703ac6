"""kpax.consumer — fetcher, positions, group membership, assignors, offset commits.

Public: :class:`Consumer` (sync face), :class:`AsyncConsumer` (``kpax.aio.Consumer``),
:class:`ConsumerRecord`, :class:`ConsumerRebalanceListener` and the consumer errors.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.lazy_names, kpax.cluster, kpax.broker, kpax.proto, kpax.config, kpax.loop_thread,
kpax.structs and the modules of this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

if TYPE_CHECKING:
    from kpax.consumer.client import AsyncConsumer
    from kpax.consumer.errors import (
        CommitFailedError,
        LogTruncationError,
        NoOffsetForPartitionError,
        RebalanceInProgressCommitError,
    )
    from kpax.consumer.listener import ConsumerRebalanceListener
    from kpax.consumer.record import ConsumerRecord, ShareConsumerRecord
    from kpax.consumer.sync import Consumer

__all__ = [
    "AsyncConsumer",
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "LogTruncationError",
    "NoOffsetForPartitionError",
    "RebalanceInProgressCommitError",
    "ShareConsumerRecord",
]

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "AsyncConsumer": "kpax.consumer.client",
    "CommitFailedError": "kpax.consumer.errors",
    "LogTruncationError": "kpax.consumer.errors",
    "NoOffsetForPartitionError": "kpax.consumer.errors",
    "RebalanceInProgressCommitError": "kpax.consumer.errors",
    "ConsumerRebalanceListener": "kpax.consumer.listener",
    "ConsumerRecord": "kpax.consumer.record",
    "ShareConsumerRecord": "kpax.consumer.record",
    "Consumer": "kpax.consumer.sync",
}


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
