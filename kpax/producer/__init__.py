"""kpax.producer — partitioner, accumulator, sender, idempotence, transactions.

Modules: options (config, ProducerSettings; its fields generated in settings_fields),
serializers, partitioner, planning
(record checks, send_many's plan), batch (ProducerBatch, RecordFuture,
BulkFuture), fastpath and _sendpath (the C send path), accumulator, sealer
(batches encoded at close), sender, idempotence (producer id and epoch),
transactions (the transaction manager), waiting (sends waiting for their topic's
metadata, in call order), client (``AsyncProducer`` =
``kpax.aio.Producer``), sync (``Producer`` = ``kpax.Producer``). See docs/producer.md.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.lazy_names, kpax.cluster, kpax.broker, kpax.proto, kpax.loop_thread, kpax.sync_face,
kpax.metrics, kpax.structs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

if TYPE_CHECKING:
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

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "BulkFuture": "kpax.producer.batch",
    "RecordFuture": "kpax.producer.batch",
    "AsyncProducer": "kpax.producer.client",
    "SerializationContext": "kpax.producer.serializers",
    "with_context": "kpax.producer.serializers",
    "Producer": "kpax.producer.sync",
}


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
