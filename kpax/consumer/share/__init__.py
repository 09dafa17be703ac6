"""kpax.consumer.share — share groups (KIP-932, "queues for Kafka").

Public: :class:`ShareConsumer` (sync face), :class:`AsyncShareConsumer`
(``kpax.aio.ShareConsumer``), :class:`AcknowledgeType`.

Imports: the modules of this package.
"""

from kpax.consumer.share.acks import AcknowledgeType
from kpax.consumer.share.client import AsyncShareConsumer
from kpax.consumer.share.sync import ShareConsumer

__all__ = ["AcknowledgeType", "AsyncShareConsumer", "ShareConsumer"]
