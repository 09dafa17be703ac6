"""OpenTelemetry tracing for kpax clients (optional extra: ``pip install kpax[otel]``).

Role: opt-in tracing with the messaging semantic conventions. Nothing in kpax
imports this module; a client that is not instrumented pays nothing.

``kpax.otel.instrument(client)`` returns a traced wrapper of a producer or
consumer (sync or asyncio); every other attribute is the client's own, and the
unwrapped client stays untraced::

    producer = kpax.otel.instrument(kpax.Producer("host:9092"))
    producer.send("orders", b"v")          # span "orders publish", traceparent in headers

    consumer = kpax.otel.instrument(kpax.Consumer("host:9092", group_id="g"))
    for rec in consumer: ...               # span "orders process" per record

Producer: each ``send`` starts a span ``"<topic> publish"`` (kind PRODUCER,
child of the current context) with ``messaging.system=kafka``,
``messaging.operation.type=send``, ``messaging.destination.name``,
``messaging.kafka.message.key`` (when there is a key),
``messaging.destination.partition.id`` (when given), and injects the span's
context into the record headers with the global propagator (W3C
``traceparent``/``tracestate`` by default; an existing header of the same
name is replaced). The span ends when the record is acknowledged, with
``messaging.destination.partition.id`` and ``messaging.kafka.offset`` set,
or fails, with the exception recorded and an ERROR status: its duration is
the delivery latency. A ``send`` that raises ends it at once. ``send_many``
is not traced (one span per record is what it exists to avoid); call it on
the wrapped client's ``.client`` explicitly.

Consumer: ``poll`` gives each record a ``"<topic> receive"`` span (kind
CONSUMER, ended at once); iterating (``for rec in consumer`` /
``async for``) gives each record a ``"<topic> process"`` span that is the
current span while the loop body runs and ends when the next record is asked
for (after a ``break``: sync, when the loop's generator is closed, at once in
CPython; asyncio, when the consumer is polled, iterated or closed again, or at
the break with ``contextlib.aclosing``). Both carry ``messaging.system``,
``messaging.operation.type`` (``receive``/``process``), ``messaging.destination.name``,
``messaging.destination.partition.id``, ``messaging.kafka.offset``,
``messaging.kafka.message.key``, ``messaging.consumer.group.name`` and a span
link to the producer's context extracted from the record headers (the span's
parent is the current context, not the producer: a consumer batch is its own
trace, as the conventions suggest).

Imports: opentelemetry-api; kpax.producer, kpax.consumer (the client types), kpax.structs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextvars import Token
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer

from kpax.consumer.client import AsyncConsumer
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.sync import Consumer
from kpax.producer.batch import RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer
from kpax.structs import RecordMetadata

__all__ = [
    "TracedAsyncConsumer",
    "TracedAsyncProducer",
    "TracedConsumer",
    "TracedProducer",
    "instrument",
]

_SCOPE = "kpax"
_SYSTEM = "kafka"

Headers = list[tuple[str, bytes | None]]


class _HeaderSetter(Setter[Headers]):
    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode("utf-8")))


class _HeaderGetter(Getter[Sequence[tuple[str, bytes | None]]]):
    def get(self, carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        out = [v.decode("utf-8", "replace") for k, v in carrier if k == key and v is not None]
        return out or None

    def keys(self, carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier]


_SETTER = _HeaderSetter()
_GETTER = _HeaderGetter()


def _key_str(key: Any) -> str | None:
    if key is None:
        return None
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key).decode("utf-8", "replace")
    return str(key)


def _headers(headers: Any) -> Headers:
    if not headers:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    out: Headers = []
    for k, v in items:
        out.append((k, v.encode("utf-8") if isinstance(v, str) else v))
    return out


def _tracer(tracer_provider: trace.TracerProvider | None) -> Tracer:
    from kpax._version import __version__

    return trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)


# ---------------------------------------------------------------- producer


class _ProducerTracing:
    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def start(
        self, topic: str, key: Any, partition: int | None, headers: Any
    ) -> tuple[trace.Span, Headers]:
        attrs: dict[str, Any] = {
            "messaging.system": _SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": topic,
        }
        k = _key_str(key)
        if k is not None:
            attrs["messaging.kafka.message.key"] = k
        if partition is not None:
            attrs["messaging.destination.partition.id"] = str(partition)
        span = self.tracer.start_span(f"{topic} publish", kind=SpanKind.PRODUCER, attributes=attrs)
        carrier = _headers(headers)
        propagate.inject(carrier, context=trace.set_span_in_context(span), setter=_SETTER)
        return span, carrier

    @staticmethod
    def failed(span: trace.Span, exc: BaseException) -> None:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, str(exc)))
        span.end()

    @staticmethod
    def watch(span: trace.Span, fut: RecordFuture) -> None:
        def done(meta: RecordMetadata | None, err: BaseException | None) -> None:
            if err is not None:
                _ProducerTracing.failed(span, err)
                return
            if meta is not None:
                span.set_attribute("messaging.destination.partition.id", str(meta.partition))
                if meta.offset >= 0:
                    span.set_attribute("messaging.kafka.offset", meta.offset)
            span.end()

        fut.add_callback(done)


_W = TypeVar("_W", bound="_Wrapper")
_AW = TypeVar("_AW", bound="_AsyncWrapper")


class _Wrapper:
    """Delegates every attribute it does not define to ``client``."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"<traced {self.client!r}>"

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _AsyncWrapper(_Wrapper):
    """An asyncio client's wrapper: ``async with`` starts and closes it."""

    async def __aenter__(self: _AW) -> _AW:
        await self.client.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class TracedProducer(_Wrapper):
    """A traced :class:`kpax.Producer` (see the module docstring)."""

    client: Producer

    def __init__(self, client: Producer, tracer: Tracer) -> None:
        super().__init__(client)
        self._tracing = _ProducerTracing(tracer)

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Any = None,
        callback: Any = None,
    ) -> RecordFuture:
        span, carrier = self._tracing.start(topic, key, partition, headers)
        try:
            fut = self.client.send(
                topic,
                value,
                key,
                partition=partition,
                timestamp=timestamp,
                headers=carrier,
                callback=callback,
            )
        except BaseException as exc:
            _ProducerTracing.failed(span, exc)
            raise
        _ProducerTracing.watch(span, fut)
        return fut


class TracedAsyncProducer(_AsyncWrapper):
    """A traced :class:`kpax.aio.Producer` (see the module docstring)."""

    client: AsyncProducer

    def __init__(self, client: AsyncProducer, tracer: Tracer) -> None:
        super().__init__(client)
        self._tracing = _ProducerTracing(tracer)

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Any = None,
        callback: Any = None,
    ) -> RecordFuture:
        span, carrier = self._tracing.start(topic, key, partition, headers)
        try:
            fut = await self.client.send(
                topic,
                value,
                key,
                partition=partition,
                timestamp=timestamp,
                headers=carrier,
                callback=callback,
            )
        except BaseException as exc:
            _ProducerTracing.failed(span, exc)
            raise
        _ProducerTracing.watch(span, fut)
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any:
        return await (await self.send(topic, value, key, **kw))


# ---------------------------------------------------------------- consumer


class _ConsumerTracing:
    def __init__(self, tracer: Tracer, group: str | None) -> None:
        self.tracer = tracer
        self.group = group

    def span(self, rec: ConsumerRecord, operation: str) -> trace.Span:
        attrs: dict[str, Any] = {
            "messaging.system": _SYSTEM,
            "messaging.operation.type": operation,
            "messaging.operation.name": "poll" if operation == "receive" else "process",
            "messaging.destination.name": rec.topic,
            "messaging.destination.partition.id": str(rec.partition),
            "messaging.kafka.offset": rec.offset,
        }
        k = _key_str(rec.key)
        if k is not None:
            attrs["messaging.kafka.message.key"] = k
        if self.group is not None:
            attrs["messaging.consumer.group.name"] = self.group
        links = []
        if rec.headers:
            producer_ctx = trace.get_current_span(
                propagate.extract(rec.headers, context=context.Context(), getter=_GETTER)
            ).get_span_context()
            if producer_ctx.is_valid:
                links.append(Link(producer_ctx))
        return self.tracer.start_span(
            f"{rec.topic} {operation}", kind=SpanKind.CONSUMER, attributes=attrs, links=links
        )

    def received(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        for rec in records:
            self.span(rec, "receive").end()
        return records


class TracedConsumer(_Wrapper):
    """A traced :class:`kpax.Consumer` (see the module docstring)."""

    client: Consumer

    def __init__(self, client: Consumer, tracer: Tracer) -> None:
        super().__init__(client)
        self._tracing = _ConsumerTracing(tracer, client.aio.config.get("group_id"))

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._tracing.received(self.client.poll(timeout, max_records))

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.client.__exit__(t, e, tb)  # an exception: commits only what was processed

    def __iter__(self) -> Iterator[ConsumerRecord]:
        for rec in self.client:
            span = self._tracing.span(rec, "process")
            token = context.attach(trace.set_span_in_context(span))
            try:
                yield rec
            finally:
                context.detach(token)
                span.end()


class TracedAsyncConsumer(_AsyncWrapper):
    """A traced :class:`kpax.aio.Consumer` (see the module docstring)."""

    client: AsyncConsumer

    def __init__(self, client: AsyncConsumer, tracer: Tracer) -> None:
        super().__init__(client)
        self._tracing = _ConsumerTracing(tracer, client.config.get("group_id"))
        #: The "process" span of the record the application is handling, the
        #: context token that made it current, and the task it is current in.
        self._processing: tuple[trace.Span, Token[Context], asyncio.Task[Any] | None] | None = None

    def _end_processing(self) -> None:
        """End the current "process" span; make it no longer current if this is
        the task it was made current in (a token cannot be detached elsewhere)."""
        current = self._processing
        if current is None:
            return
        self._processing = None
        span, token, task = current
        try:
            same_task = asyncio.current_task() is task
        except RuntimeError:  # no running loop
            same_task = False
        if same_task:
            context.detach(token)
        span.end()

    async def poll(
        self, timeout: float = 0.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        self._end_processing()
        return self._tracing.received(await self.client.poll(timeout, max_records))

    getmany = poll

    def __aiter__(self) -> _TracedAsyncIterator:
        return _TracedAsyncIterator(self)

    async def close(self, timeout: float = 30.0, *, commit_in_hand: bool = True) -> None:
        self._end_processing()
        await self.client.close(timeout, commit_in_hand=commit_in_hand)

    async def __aexit__(self, *exc: object) -> None:
        await self.close(commit_in_hand=exc[0] is None)  # an exception: only what was processed


class _TracedAsyncIterator:
    """``async for rec in traced_consumer``: each record's "process" span is
    current in the iterating task until the next record is asked for, the
    iterator is closed (``contextlib.aclosing``), or the consumer is polled or
    closed."""

    def __init__(self, owner: TracedAsyncConsumer) -> None:
        self._owner = owner
        self._it = owner.client.__aiter__()

    def __aiter__(self) -> _TracedAsyncIterator:
        return self

    async def __anext__(self) -> ConsumerRecord:
        owner = self._owner
        owner._end_processing()
        rec = await self._it.__anext__()
        span = owner._tracing.span(rec, "process")
        token = context.attach(trace.set_span_in_context(span))
        owner._processing = (span, token, asyncio.current_task())
        return rec

    async def aclose(self) -> None:
        self._owner._end_processing()
        aclose = getattr(self._it, "aclose", None)
        if aclose is not None:
            await aclose()


# ---------------------------------------------------------------- entry point


def instrument(client: Any, tracer_provider: trace.TracerProvider | None = None) -> Any:
    """A traced wrapper of ``client`` (kpax.Producer, kpax.Consumer or their
    asyncio faces); ``tracer_provider`` defaults to the global one."""
    tracer = _tracer(tracer_provider)
    if isinstance(client, Producer):
        return TracedProducer(client, tracer)
    if isinstance(client, AsyncProducer):
        return TracedAsyncProducer(client, tracer)
    if isinstance(client, Consumer):
        return TracedConsumer(client, tracer)
    if isinstance(client, AsyncConsumer):
        return TracedAsyncConsumer(client, tracer)
    raise TypeError(
        f"kpax.otel.instrument takes a kpax producer or consumer, not {type(client).__name__}"
    )
