"""kpax.producer — partitioner, accumulator, sender, idempotence, transactions.

Modules: options (config, ProducerSettings), serializers, partitioner, planning
(record checks, send_many's plan), batch (ProducerBatch, RecordFuture,
BulkFuture), fastpath and _sendpath (the C send path), accumulator, sealer
(batches encoded at close), sender, idempotence (producer id and epoch),
transactions (the transaction manager), waiting (sends waiting for their topic's
metadata, in call order), client (``AsyncProducer`` =
``kpax.aio.Producer``), sync (``Producer`` = ``kpax.Producer``). See docs/producer.md.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.loop_thread, kpax.sync_face,
kpax.metrics, kpax.structs.
"""

from kpax.producer.batch import BulkFuture, RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.serializers import SerializationContext, with_context
from kpax.producer.sync import Producer

__all__ = [
    "AsyncProducer",
    "BulkFuture",
    "Producer",
    "RecordFuture",
    "SerializationContext",
    "with_context",
]
