"""kpax.consumer — fetcher, positions, group membership, assignors, offset commits.

Public: :class:`Consumer` (sync face), :class:`AsyncConsumer` (``kpax.aio.Consumer``),
:class:`ConsumerRecord`, :class:`ConsumerRebalanceListener` and the consumer errors.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.config, kpax.loop_thread,
kpax.structs and the modules of this package.
"""

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
