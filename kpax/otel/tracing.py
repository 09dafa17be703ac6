"""The spans of :mod:`kpax.otel`: one tracer's publish, receive and process spans
for any number of clients, and the untraced methods the tracing wraps.

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: opentelemetry-api; kpax.otel.{_common,clients,headers}, kpax.producer,
kpax.consumer, kpax.parallel (the client types), kpax.structs.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import Token
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer

from kpax.consumer.client import AsyncConsumer
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.sync import Consumer
from kpax.otel._common import Headers, log
from kpax.otel.clients import _ClientInfo
from kpax.otel.headers import _GETTER, _SETTER, _body_attrs, _error_type, _headers, _key_text
from kpax.parallel.client import AsyncParallelConsumer
from kpax.parallel.sync import ParallelConsumer
from kpax.producer.batch import RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer
from kpax.structs import RecordMetadata

# ---------------------------------------------------------------- tracing


class _Tracing:
    """One tracer's spans for any number of clients."""

    def __init__(self, tracer: Tracer, first_use: Callable[[Any], None] | None = None) -> None:
        self.tracer = tracer
        self._first_use = first_use
        self._info: weakref.WeakKeyDictionary[Any, _ClientInfo] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        #: Per asyncio consumer: the "process" span of the record the
        #: application is handling, the token that made it current, and the
        #: task it is current in.
        self._processing: weakref.WeakKeyDictionary[
            Any, tuple[trace.Span, Token[Context], asyncio.Task[Any] | None]
        ] = weakref.WeakKeyDictionary()

    def info(self, client: Any) -> _ClientInfo:
        info = self._info.get(client)
        if info is None:
            with self._lock:
                info = self._info.get(client)
                if info is None:
                    info = self._info[client] = _ClientInfo(client)
                    if self._first_use is not None:
                        try:
                            self._first_use(client)
                        except Exception:  # never the application's send or poll
                            log.exception("kpax.otel: exporting the metrics of %r failed", client)
        return info

    # ------------------------------------------------------------ producer

    def start_publish(  # noqa: PLR0917 - send's arguments
        self, client: Any, topic: str, value: Any, key: Any, partition: int | None, headers: Any
    ) -> tuple[trace.Span, Headers]:
        attrs = self.info(client).start_attrs()
        attrs["messaging.operation.name"] = "publish"
        attrs["messaging.operation.type"] = "send"
        attrs["messaging.destination.name"] = topic
        if partition is not None:
            attrs["messaging.destination.partition.id"] = str(partition)
        text = _key_text(key)
        if text is not None:
            attrs["messaging.kafka.message.key"] = text
        _body_attrs(attrs, value)
        span = self.tracer.start_span(f"{topic} publish", kind=SpanKind.PRODUCER, attributes=attrs)
        carrier = _headers(headers)
        propagate.inject(carrier, context=trace.set_span_in_context(span), setter=_SETTER)
        return span, carrier

    @staticmethod
    def failed(span: trace.Span, exc: BaseException) -> None:
        span.record_exception(exc)
        span.set_attribute("error.type", _error_type(exc))
        span.set_status(Status(StatusCode.ERROR, str(exc)))
        span.end()

    def watch(self, client: Any, span: trace.Span, fut: RecordFuture) -> None:
        info = self.info(client)

        def done(meta: RecordMetadata | None, err: BaseException | None) -> None:
            if err is not None:
                _Tracing.failed(span, err)
                return
            if meta is not None:
                span.set_attribute("messaging.destination.partition.id", str(meta.partition))
                if meta.offset >= 0:
                    span.set_attribute("messaging.kafka.offset", meta.offset)
            cluster_id = info.cluster.snapshot.cluster_id
            if cluster_id:
                span.set_attribute("messaging.kafka.cluster.id", cluster_id)
            span.end()

        fut.add_callback(done)

    # ------------------------------------------------------------ consumer

    def consumer_span(self, client: Any, rec: ConsumerRecord, operation: str) -> trace.Span:
        attrs = self.info(client).start_attrs()
        attrs["messaging.operation.name"] = operation
        attrs["messaging.operation.type"] = operation
        attrs["messaging.destination.name"] = rec.topic
        attrs["messaging.destination.partition.id"] = str(rec.partition)
        attrs["messaging.kafka.offset"] = rec.offset
        text = _key_text(rec.key)
        if text is not None:
            attrs["messaging.kafka.message.key"] = text
        _body_attrs(attrs, rec.value)
        links = []
        if rec.headers:
            producer = trace.get_current_span(
                propagate.extract(rec.headers, context=Context(), getter=_GETTER)
            ).get_span_context()
            if producer.is_valid:
                links.append(Link(producer))
        return self.tracer.start_span(
            f"{rec.topic} {operation}", kind=SpanKind.CONSUMER, attributes=attrs, links=links
        )

    def received(self, client: Any, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        for rec in records:
            self.consumer_span(client, rec, "receive").end()
        return records

    def processed(self, client: Any, records: Iterator[ConsumerRecord]) -> Iterator[ConsumerRecord]:
        """The sync face's iteration: each record's "process" span is current
        while the loop body runs."""
        for rec in records:
            span = self.consumer_span(client, rec, "process")
            token = context.attach(trace.set_span_in_context(span))
            try:
                yield rec
            finally:
                context.detach(token)
                span.end()

    def handler(self, client: Any, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """A parallel consumer's handler run on a thread: each call in a current
        "process" span."""

        def traced(rec: Any) -> Any:
            span = self.consumer_span(client, rec, "process")
            token = context.attach(trace.set_span_in_context(span))
            try:
                result = handler(rec)
            except BaseException as exc:
                _Tracing.failed(span, exc)
                raise
            finally:
                context.detach(token)
            span.end()
            return result

        return traced

    def async_handler(self, client: Any, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """A parallel consumer's handler run as a task: each call in a current
        "process" span (the task's own context)."""

        async def traced(rec: Any) -> Any:
            span = self.consumer_span(client, rec, "process")
            token = context.attach(trace.set_span_in_context(span))
            try:
                result = handler(rec)
                if inspect.isawaitable(result):
                    result = await result
            except BaseException as exc:
                _Tracing.failed(span, exc)
                raise
            finally:
                context.detach(token)
            span.end()
            return result

        return traced

    def start_processing(self, client: Any, rec: ConsumerRecord) -> None:
        span = self.consumer_span(client, rec, "process")
        token = context.attach(trace.set_span_in_context(span))
        self._processing[client] = (span, token, asyncio.current_task())

    def end_processing(self, client: Any) -> None:
        """End an asyncio consumer's current "process" span; make it no longer
        current if this is the task it was made current in (a token cannot be
        detached elsewhere)."""
        current = self._processing.pop(client, None)
        if current is None:
            return
        span, token, task = current
        try:
            same_task = asyncio.current_task() is task
        except RuntimeError:  # no running loop
            same_task = False
        if same_task:
            context.detach(token)
        span.end()


class _TracedAsyncIterator:
    """``async for rec in consumer``: each record's "process" span is current in
    the iterating task until the next record is asked for, the iterator is
    closed (``contextlib.aclosing``), or the consumer is polled or closed."""

    def __init__(self, tracing: _Tracing, client: Any, records: AsyncIterator[Any]) -> None:
        self._tracing = tracing
        self._client = client
        self._it = records

    def __aiter__(self) -> _TracedAsyncIterator:
        return self

    async def __anext__(self) -> ConsumerRecord:
        self._tracing.end_processing(self._client)
        rec: ConsumerRecord = await self._it.__anext__()
        self._tracing.start_processing(self._client, rec)
        return rec

    async def aclose(self) -> None:
        self._tracing.end_processing(self._client)
        aclose = getattr(self._it, "aclose", None)
        if aclose is not None:
            await aclose()


# ---------------------------------------------------------------- the untraced methods

#: The clients' own methods, taken before any instrumentation: the wrappers
#: call these, so a wrapped client of an instrumented class is traced once.
_ORIGINAL: dict[tuple[type, str], Any] = {
    (cls, name): cls.__dict__[name]
    for cls, names in (
        (Producer, ("send",)),
        (AsyncProducer, ("send",)),
        (Consumer, ("poll", "__iter__")),
        (AsyncConsumer, ("poll", "__aiter__", "close")),
        (ParallelConsumer, ("run",)),
        (AsyncParallelConsumer, ("run",)),
    )
    for name in names
}


def _untraced(cls: type, name: str, client: Any) -> Any:
    """``client.<name>`` as the class had it before instrumentation (an
    instance's own ``send``, the C send path, comes first)."""
    own = client.__dict__.get(name)
    if own is not None:
        return own
    return _ORIGINAL[cls, name].__get__(client, cls)


def _traced_send(  # noqa: PLR0917 - send's signature, after what partial() binds
    tracing: _Tracing,
    client: Any,
    send: Callable[..., RecordFuture],
    topic: str,
    value: Any = None,
    key: Any = None,
    *,
    partition: int | None = None,
    timestamp: int | None = None,
    headers: Any = None,
    callback: Any = None,
) -> RecordFuture:
    span, carrier = tracing.start_publish(client, topic, value, key, partition, headers)
    try:
        fut = send(
            topic,
            value,
            key,
            partition=partition,
            timestamp=timestamp,
            headers=carrier,
            callback=callback,
        )
    except BaseException as exc:
        _Tracing.failed(span, exc)
        raise
    tracing.watch(client, span, fut)
    return fut


async def _traced_asend(  # noqa: PLR0917 - send's signature, after what partial() binds
    tracing: _Tracing,
    client: Any,
    send: Callable[..., Any],
    topic: str,
    value: Any = None,
    key: Any = None,
    *,
    partition: int | None = None,
    timestamp: int | None = None,
    headers: Any = None,
    callback: Any = None,
) -> RecordFuture:
    span, carrier = tracing.start_publish(client, topic, value, key, partition, headers)
    try:
        fut: RecordFuture = await send(
            topic,
            value,
            key,
            partition=partition,
            timestamp=timestamp,
            headers=carrier,
            callback=callback,
        )
    except BaseException as exc:
        _Tracing.failed(span, exc)
        raise
    tracing.watch(client, span, fut)
    return fut
