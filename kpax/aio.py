"""kpax.aio — the asyncio face: ``kpax.aio.Producer``, ``Consumer``, ``Admin``.

Imports: kpax.admin, kpax.producer, kpax.consumer.
"""

from kpax.admin.client import AsyncAdmin as Admin
from kpax.consumer.client import AsyncConsumer as Consumer
from kpax.consumer.record import ConsumerRecord
from kpax.producer.client import AsyncProducer as Producer

__all__ = ["Admin", "Producer", "Consumer", "ConsumerRecord"]
