"""kpax.producer — partitioner, accumulator, sender, idempotence (transactions later).

Modules: options (config), serializers, partitioner, batch (ProducerBatch,
RecordFuture), accumulator, sender, idempotence (producer id/epoch; the
transaction manager's future slot), client (``AsyncProducer`` =
``kpax.aio.Producer``), sync (``Producer`` = ``kpax.Producer``). See docs/producer.md.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.loop_thread, kpax.structs.
"""

from kpax.producer.batch import BulkFuture, RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer

__all__ = ["AsyncProducer", "BulkFuture", "Producer", "RecordFuture"]
