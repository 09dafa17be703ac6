"""OpenTelemetry for kpax clients: traces and metrics (optional extra: ``pip install kpax[otel]``).

Role: opt-in tracing with the messaging semantic conventions, and kpax's
``metrics()`` through an OpenTelemetry MeterProvider. Nothing in kpax imports
this module; a client that is not instrumented pays nothing. Three ways in:

- ``kpax.otel.instrument(client)`` returns a traced wrapper of one producer or
  consumer (sync or asyncio); every other attribute is the client's own, and
  the unwrapped client stays untraced;
- :class:`KpaxInstrumentor` (``opentelemetry-instrument`` finds it through the
  ``opentelemetry_instrumentor`` entry point ``kpax``; or
  ``KpaxInstrumentor().instrument()``) traces every ``kpax.Producer``,
  ``kpax.Consumer``, ``kpax.aio.Producer``, ``kpax.aio.Consumer`` and the
  parallel consumers until ``uninstrument()``, which puts the classes back as
  they were, and exports each traced client's metrics from its first send or
  poll;
- ``kpax.otel.export_metrics(client)`` exports one client's metrics.

Producer: each ``send`` starts a span ``"<topic> publish"`` (kind PRODUCER,
child of the current context, ``messaging.operation.name=publish``,
``messaging.operation.type=send``) and injects its context into the record
headers with the global propagator. The span ends when the record is
acknowledged (partition and offset set) or fails (exception, ``error.type``,
ERROR status): its duration is the delivery latency. ``send_many`` is not
traced (one span per record is what it exists to avoid).

Parallel consumer (``kpax.ParallelConsumer``, ``kpax.aio.ParallelConsumer``):
each handler call (every attempt of a record) gets a ``"<topic> process"``
span, current while the handler runs (on its thread, or in its task), ended
when it returns, with the error and ERROR status when it raises; linked to the
producer's span like the consumer's.

Consumer: ``poll`` gives each record a ``"<topic> receive"`` span (kind
CONSUMER, ended at once); iterating gives each record a ``"<topic> process"``
span, current while the loop body runs, ended when the next record is asked
for (asyncio, after a ``break``: when the consumer is polled, iterated or
closed again, or at the break with ``contextlib.aclosing``). Each links to
the producer's span context read from the record headers -- only the trace
context: baggage headers are never read, nor a header value too long to be
trace context.

Attributes (docs/observability.md has the table): ``messaging.system``,
``messaging.operation.name``/``type``, ``messaging.destination.name``,
``messaging.destination.partition.id``, ``messaging.kafka.offset``,
``messaging.kafka.message.key``, ``messaging.kafka.message.tombstone``,
``messaging.message.body.size``, ``messaging.consumer.group.name``,
``messaging.client.id``, ``messaging.kafka.cluster.id``, ``server.address``,
``server.port``.

Metrics: one observable instrument per metric name, named as OpenTelemetry's
Java Kafka-client bridge names them (``kafka.producer.record_send_total``:
``kafka.<producer|consumer|admin>.`` and the Java name with ``_`` for ``-``), a
counter for ``-total`` and a gauge otherwise, with the Java tags as attributes
(``client-id``, ``topic``, ``partition``). One ``metrics()`` call per client per
collection.

Imports: kpax.otel.{instrumentor,metrics,wrappers} (the parts: also _common,
clients, headers, tracing).
"""

from __future__ import annotations

from kpax.otel.instrumentor import KpaxInstrumentor
from kpax.otel.metrics import MetricsExport, export_metrics, instrument_name
from kpax.otel.wrappers import (
    TracedAsyncConsumer,
    TracedAsyncParallelConsumer,
    TracedAsyncProducer,
    TracedConsumer,
    TracedParallelConsumer,
    TracedProducer,
    instrument,
)

__all__ = [
    "KpaxInstrumentor",
    "MetricsExport",
    "TracedAsyncConsumer",
    "TracedAsyncParallelConsumer",
    "TracedAsyncProducer",
    "TracedConsumer",
    "TracedParallelConsumer",
    "TracedProducer",
    "export_metrics",
    "instrument",
    "instrument_name",
]
