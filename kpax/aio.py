"""kpax.aio — the asyncio face: ``kpax.aio.Producer``, ``Consumer``, ``Admin``.

Imports: kpax.admin (and kpax.producer, kpax.consumer as they land).
"""

from kpax.admin.client import AsyncAdmin as Admin
from kpax.consumer.client import AsyncConsumer as Consumer
from kpax.consumer.record import ConsumerRecord
from kpax.producer.client import AsyncProducer as Producer

__all__ = ["Admin", "Producer", "Consumer", "ConsumerRecord"]
