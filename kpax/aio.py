"""kpax.aio — the asyncio face: ``kpax.aio.Producer``, ``Consumer``, ``ShareConsumer``,
``ParallelConsumer``, ``Admin``.

Imports: kpax.admin, kpax.producer, kpax.consumer, kpax.parallel.
"""

from kpax.admin.client import AsyncAdmin as Admin
from kpax.consumer.client import AsyncConsumer as Consumer
from kpax.consumer.record import ConsumerRecord, ShareConsumerRecord
from kpax.consumer.share.acks import AcknowledgeType
from kpax.consumer.share.client import AsyncShareConsumer as ShareConsumer
from kpax.parallel.client import AsyncParallelConsumer as ParallelConsumer
from kpax.producer.client import AsyncProducer as Producer

__all__ = [
    "AcknowledgeType",
    "Admin",
    "Consumer",
    "ConsumerRecord",
    "ParallelConsumer",
    "Producer",
    "ShareConsumer",
    "ShareConsumerRecord",
]
