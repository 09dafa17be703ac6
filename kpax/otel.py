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

Imports: opentelemetry-api, opentelemetry-instrumentation; kpax._version,
kpax.producer, kpax.consumer, kpax.admin, kpax.parallel (the client types),
kpax.proto.errors, kpax.structs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from contextvars import Token
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context, metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer

from kpax._version import __version__
from kpax.admin.client import AsyncAdmin
from kpax.admin.sync import Admin
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.sync import Consumer
from kpax.parallel.client import AsyncParallelConsumer
from kpax.parallel.sync import ParallelConsumer
from kpax.producer.batch import RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer
from kpax.proto.errors import BrokerResponseError
from kpax.structs import RecordMetadata

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
]

_SCOPE = "kpax"
log = logging.getLogger("kpax.otel")

Headers = list[tuple[str, bytes | None]]

# ---------------------------------------------------------------- headers

#: Header names that carry baggage (W3C; Jaeger's and OpenTracing's prefixes):
#: never read from a record. A record's headers are whatever its producer wrote.
_BAGGAGE = "baggage"
_BAGGAGE_PREFIXES = ("uberctx-", "ot-baggage-")
#: A header value longer than this is not trace context (a W3C traceparent is
#: 55 characters; OpenTelemetry keeps at most 8192 of tracestate): left unread.
MAX_CONTEXT_HEADER = 8192


def _is_baggage(key: str) -> bool:
    k = key.lower()
    return k == _BAGGAGE or k.startswith(_BAGGAGE_PREFIXES)


class _HeaderSetter(Setter[Headers]):
    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode("utf-8")))


class _TraceContextGetter(Getter[Sequence[tuple[str, bytes | None]]]):
    """A record's headers as the propagator sees them: trace context only.
    Baggage headers are invisible, and so is a value too long to be trace
    context (so a hostile header is neither decoded nor logged)."""

    def get(self, carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        if _is_baggage(key):
            return None
        out = [
            v.decode("utf-8", "replace")
            for k, v in carrier
            if k == key and v is not None and len(v) <= MAX_CONTEXT_HEADER
        ]
        return out or None

    def keys(self, carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier if not _is_baggage(k)]


_SETTER = _HeaderSetter()
_GETTER = _TraceContextGetter()


def _headers(headers: Any) -> Headers:
    if not headers:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    return [(k, v.encode("utf-8") if isinstance(v, str) else v) for k, v in items]


def _key_text(key: Any) -> str | None:
    """The key as the conventions want it: its text, or None when it has no
    unambiguous text form (bytes that are not UTF-8)."""
    if key is None:
        return None
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return str(key)


def _body_attrs(attrs: dict[str, Any], value: Any) -> None:
    if value is None:
        attrs["messaging.kafka.message.tombstone"] = True
    elif isinstance(value, (bytes, bytearray)):
        attrs["messaging.message.body.size"] = len(value)
    elif isinstance(value, memoryview):
        attrs["messaging.message.body.size"] = value.nbytes


def _error_type(exc: BaseException) -> str:
    """``error.type``: the Kafka error name for a broker error, else the class."""
    if isinstance(exc, BrokerResponseError):
        return exc.name
    return type(exc).__qualname__


# ---------------------------------------------------------------- per-client facts


def _core(client: Any) -> Any:
    """The asyncio core of a client (the client itself for an asyncio one)."""
    sync = (Producer, Consumer, Admin, ParallelConsumer)
    return client.aio if isinstance(client, sync) else client


def _server(bootstrap: Any) -> tuple[str, int] | None:
    """The first bootstrap address as (host, port)."""
    servers = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap or [])
    if not servers:
        return None
    host, _, port = str(servers[0]).strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    return (host, int(port)) if host and port.isdigit() else None


class _ClientInfo:
    """What every span of one client carries, worked out once."""

    __slots__ = ("attrs", "cluster")

    def __init__(self, client: Any) -> None:
        core = _core(client)
        cfg = core.config
        attrs: dict[str, Any] = {"messaging.system": "kafka"}
        server = _server(cfg.get("bootstrap_servers"))
        if server is not None:
            attrs["server.address"], attrs["server.port"] = server
        if cfg.get("client_id"):
            attrs["messaging.client.id"] = cfg["client_id"]
        if cfg.get("group_id"):
            attrs["messaging.consumer.group.name"] = cfg["group_id"]
        self.attrs = attrs
        self.cluster = core.cluster

    def start_attrs(self) -> dict[str, Any]:
        attrs = dict(self.attrs)
        cluster_id = self.cluster.snapshot.cluster_id
        if cluster_id:
            attrs["messaging.kafka.cluster.id"] = cluster_id
        return attrs


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
        (AsyncConsumer, ("poll", "getmany", "__aiter__", "close")),
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


# ---------------------------------------------------------------- wrappers

_W = TypeVar("_W", bound="_Wrapper")
_AW = TypeVar("_AW", bound="_AsyncWrapper")


class _Wrapper:
    """Delegates every attribute it does not define to ``client``."""

    def __init__(self, client: Any, tracer: Tracer) -> None:
        self.client = client
        self._tracing = _Tracing(tracer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"<traced {self.client!r}>"

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.client.__exit__(t, e, tb)  # the client's own (a consumer's commits on error)


class _AsyncWrapper(_Wrapper):
    """An asyncio client's wrapper: ``async with`` starts and closes it."""

    async def __aenter__(self: _AW) -> _AW:
        await self.client.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._tracing.end_processing(self.client)
        await self.client.__aexit__(*exc)


class TracedProducer(_Wrapper):
    """A traced :class:`kpax.Producer` (see the module docstring)."""

    client: Producer

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
        return _traced_send(
            self._tracing,
            self.client,
            _untraced(Producer, "send", self.client),
            topic,
            value,
            key,
            partition=partition,
            timestamp=timestamp,
            headers=headers,
            callback=callback,
        )


class TracedAsyncProducer(_AsyncWrapper):
    """A traced :class:`kpax.aio.Producer` (see the module docstring)."""

    client: AsyncProducer

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
        return await _traced_asend(
            self._tracing,
            self.client,
            _untraced(AsyncProducer, "send", self.client),
            topic,
            value,
            key,
            partition=partition,
            timestamp=timestamp,
            headers=headers,
            callback=callback,
        )

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any:
        return await (await self.send(topic, value, key, **kw))


class TracedConsumer(_Wrapper):
    """A traced :class:`kpax.Consumer` (see the module docstring)."""

    client: Consumer

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        poll = _untraced(Consumer, "poll", self.client)
        return self._tracing.received(self.client, poll(timeout, max_records))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        records = _untraced(Consumer, "__iter__", self.client)()
        return self._tracing.processed(self.client, records)


class TracedAsyncConsumer(_AsyncWrapper):
    """A traced :class:`kpax.aio.Consumer` (see the module docstring)."""

    client: AsyncConsumer

    async def poll(
        self, timeout: float = 0.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        self._tracing.end_processing(self.client)
        poll = _untraced(AsyncConsumer, "poll", self.client)
        return self._tracing.received(self.client, await poll(timeout, max_records))

    getmany = poll

    def __aiter__(self) -> _TracedAsyncIterator:
        records = _untraced(AsyncConsumer, "__aiter__", self.client)()
        return _TracedAsyncIterator(self._tracing, self.client, records)

    async def close(self, *args: Any, **kwargs: Any) -> None:
        self._tracing.end_processing(self.client)
        await _untraced(AsyncConsumer, "close", self.client)(*args, **kwargs)


class TracedParallelConsumer(_Wrapper):
    """A traced :class:`kpax.ParallelConsumer` (see the module docstring)."""

    client: ParallelConsumer

    def run(self, handler: Callable[[Any], Any], **kwargs: Any) -> None:
        run = _untraced(ParallelConsumer, "run", self.client)
        run(self._tracing.handler(self.client, handler), **kwargs)


class TracedAsyncParallelConsumer(_AsyncWrapper):
    """A traced :class:`kpax.aio.ParallelConsumer` (see the module docstring)."""

    client: AsyncParallelConsumer

    async def run(
        self, handler: Callable[[Any], Any], *, executor: Any = None, **kwargs: Any
    ) -> None:
        run = _untraced(AsyncParallelConsumer, "run", self.client)
        wrap = self._tracing.handler if executor is not None else self._tracing.async_handler
        await run(wrap(self.client, handler), executor=executor, **kwargs)


def _tracer(tracer_provider: trace.TracerProvider | None) -> Tracer:
    return trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)


def instrument(client: Any, tracer_provider: trace.TracerProvider | None = None) -> Any:
    """A traced wrapper of ``client`` (kpax.Producer, kpax.Consumer,
    kpax.ParallelConsumer or their asyncio faces); ``tracer_provider`` defaults
    to the global one."""
    tracer = _tracer(tracer_provider)
    if isinstance(client, Producer):
        return TracedProducer(client, tracer)
    if isinstance(client, AsyncProducer):
        return TracedAsyncProducer(client, tracer)
    if isinstance(client, Consumer):
        return TracedConsumer(client, tracer)
    if isinstance(client, AsyncConsumer):
        return TracedAsyncConsumer(client, tracer)
    if isinstance(client, ParallelConsumer):
        return TracedParallelConsumer(client, tracer)
    if isinstance(client, AsyncParallelConsumer):
        return TracedAsyncParallelConsumer(client, tracer)
    raise TypeError(
        f"kpax.otel.instrument takes a kpax producer or consumer, not {type(client).__name__}"
    )


# ---------------------------------------------------------------- the instrumentor


class _TracedSend:
    """``send`` of an instrumented producer class. A data descriptor, so it
    comes before an instance's own ``send`` (the C send path), which it calls."""

    def __init__(self, cls: type, tracing: _Tracing, asynchronous: bool) -> None:
        self._cls = cls
        self._original = _ORIGINAL[cls, "send"]
        self._traced = partial(_traced_asend if asynchronous else _traced_send, tracing)

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:  # the class's own (the C send path's fallback is taken so)
            return self._original
        return partial(self._traced, client, _untraced(self._cls, "send", client))

    def __set__(self, client: Any, value: Any) -> None:
        client.__dict__["send"] = value


def _patches(tracing: _Tracing) -> dict[tuple[type, str], Any]:
    """The traced methods of the four client classes."""
    orig = _ORIGINAL

    def poll(self: Consumer, timeout: float = 0.0, max_records: int | None = None) -> Any:
        return tracing.received(self, orig[Consumer, "poll"](self, timeout, max_records))

    def iterate(self: Consumer) -> Iterator[ConsumerRecord]:
        return tracing.processed(self, orig[Consumer, "__iter__"](self))

    async def apoll(
        self: AsyncConsumer, timeout: float = 0.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        tracing.end_processing(self)
        return tracing.received(self, await orig[AsyncConsumer, "poll"](self, timeout, max_records))

    def aiterate(self: AsyncConsumer) -> _TracedAsyncIterator:
        return _TracedAsyncIterator(tracing, self, orig[AsyncConsumer, "__aiter__"](self))

    async def aclose(self: AsyncConsumer, *args: Any, **kwargs: Any) -> None:
        tracing.end_processing(self)
        await orig[AsyncConsumer, "close"](self, *args, **kwargs)

    def prun(self: ParallelConsumer, handler: Callable[[Any], Any], **kwargs: Any) -> None:
        orig[ParallelConsumer, "run"](self, tracing.handler(self, handler), **kwargs)

    async def aprun(
        self: AsyncParallelConsumer,
        handler: Callable[[Any], Any],
        *,
        executor: Any = None,
        **kwargs: Any,
    ) -> None:
        wrap = tracing.handler if executor is not None else tracing.async_handler
        await orig[AsyncParallelConsumer, "run"](
            self, wrap(self, handler), executor=executor, **kwargs
        )

    for fn, original in (
        (poll, orig[Consumer, "poll"]),
        (apoll, orig[AsyncConsumer, "poll"]),
        (aclose, orig[AsyncConsumer, "close"]),
        (prun, orig[ParallelConsumer, "run"]),
        (aprun, orig[AsyncParallelConsumer, "run"]),
    ):
        fn.__doc__ = original.__doc__
    return {
        (Producer, "send"): _TracedSend(Producer, tracing, asynchronous=False),
        (AsyncProducer, "send"): _TracedSend(AsyncProducer, tracing, asynchronous=True),
        (Consumer, "poll"): poll,
        (Consumer, "__iter__"): iterate,
        (AsyncConsumer, "poll"): apoll,
        (AsyncConsumer, "getmany"): apoll,
        (AsyncConsumer, "__aiter__"): aiterate,
        (AsyncConsumer, "close"): aclose,
        (ParallelConsumer, "run"): prun,
        (AsyncParallelConsumer, "run"): aprun,
    }


class KpaxInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces every kpax producer and consumer (``kpax.Producer``,
    ``kpax.Consumer``, ``kpax.aio.Producer``, ``kpax.aio.Consumer``, and the
    handlers of ``kpax.ParallelConsumer`` and ``kpax.aio.ParallelConsumer``),
    those made before ``instrument()`` too, and exports the metrics of each
    from its first traced send, poll or handler call.

    ``instrument(tracer_provider=None, meter_provider=None, metrics=True)``;
    ``uninstrument()`` puts the classes' own methods back and ends the metrics
    exports. ``opentelemetry-instrument`` calls ``instrument()`` through the
    ``opentelemetry_instrumentor`` entry point ``kpax`` (leave kpax out with
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=kpax``)."""

    _exports: list[MetricsExport]

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # kpax itself: always there

    def _instrument(self, **kwargs: Any) -> None:
        self._exports = []
        first_use: Callable[[Any], None] | None = None
        if kwargs.get("metrics", True):
            meter_provider = kwargs.get("meter_provider")

            def first_use(client: Any) -> None:
                self._exports.append(export_metrics(client, meter_provider))

        tracing = _Tracing(_tracer(kwargs.get("tracer_provider")), first_use)
        for (cls, name), method in _patches(tracing).items():
            setattr(cls, name, method)

    def _uninstrument(self, **kwargs: Any) -> None:
        for (cls, name), method in _ORIGINAL.items():
            setattr(cls, name, method)
        exports, self._exports = self._exports, []
        for export in exports:
            export.close()


# ---------------------------------------------------------------- metrics

#: Metric names a client reports only with tags (per topic or partition), so
#: not in the snapshot of a client that has not sent or fetched yet.
_TAGGED_ONLY = {"producer": ("byte-total",), "consumer": ("records-lag",), "admin": ()}


def _kind(client: Any) -> str:
    if isinstance(client, (Producer, AsyncProducer)):
        return "producer"
    if isinstance(client, (Consumer, AsyncConsumer, ParallelConsumer, AsyncParallelConsumer)):
        return "consumer"
    if isinstance(client, (Admin, AsyncAdmin)):
        return "admin"
    raise TypeError(
        "kpax.otel.export_metrics takes a kpax producer, consumer or admin client, "
        f"not {type(client).__name__}"
    )


def _parse(key: str) -> tuple[str, dict[str, str]]:
    """``records-lag{topic=t,partition=3}`` -> ``records-lag``, ``{topic: t, partition: 3}``."""
    name, brace, rest = key.partition("{")
    if not brace:
        return key, {}
    tags = dict(item.split("=", 1) for item in rest.rstrip("}").split(",") if "=" in item)
    return name, tags


def instrument_name(kind: str, name: str) -> str:
    """The OpenTelemetry instrument of a kpax metric: ``kafka.producer.record_send_total``."""
    return f"kafka.{kind}.{name.replace('-', '_')}"


class MetricsExport:
    """One client's metrics in a MeterProvider (from :func:`export_metrics`).

    The client is weakly held: its metrics go when it is garbage-collected, or
    at :meth:`close`."""

    def __init__(self, client: Any, kind: str, bridge: _MetricsBridge) -> None:
        self.kind = kind
        self._client = weakref.ref(client)
        self._bridge = bridge
        self._attrs = {"client-id": str(_core(client).config.get("client_id") or "")}
        self._lock = threading.Lock()
        #: The snapshot being reported: base name -> [(attributes, value)], and
        #: the instruments that have reported from it (a second report from one
        #: of them is the next collection: a new snapshot).
        self._snapshot: dict[str, list[tuple[dict[str, str], float]]] | None = None
        self._read: set[str] = set()
        self.closed = False

    def names(self) -> list[str]:
        client = self._client()
        if client is None:
            return []
        found = {_parse(key)[0] for key in client.metrics()}
        return sorted(found.union(_TAGGED_ONLY[self.kind]))

    def _take(self) -> dict[str, list[tuple[dict[str, str], float]]] | None:
        client = self._client()
        if client is None:
            self.close()
            return None
        grouped: dict[str, list[tuple[dict[str, str], float]]] = {}
        for key, value in client.metrics().items():
            if value is None or math.isnan(value):
                continue  # no recording in the window (Java's NaN): nothing to report
            name, tags = _parse(key)
            grouped.setdefault(name, []).append(({**self._attrs, **tags}, float(value)))
        for name, rows in grouped.items():
            # A name reported per topic too: only the finest rows (as Java's bridge),
            # so that summing over the attributes does not count twice.
            if len(rows) > 1:
                finest = max(len(attrs) for attrs, _ in rows)
                grouped[name] = [row for row in rows if len(row[0]) == finest]
        return grouped

    def observe(self, name: str) -> list[Observation]:
        if self.closed:
            return []
        with self._lock:
            if self._snapshot is None or name in self._read:
                self._snapshot = self._take()
                self._read = set()
                if self._snapshot is None:
                    return []
            self._read.add(name)
            rows = self._snapshot.get(name, ())
        return [Observation(value, attrs) for attrs, value in rows]

    def close(self) -> None:
        """Stop reporting this client's metrics."""
        self.closed = True
        self._bridge.remove(self)


class _MetricsBridge:
    """The instruments of one MeterProvider, shared by the clients exported to
    it (a meter registers an instrument name once)."""

    def __init__(self, provider: MeterProvider | None) -> None:
        self.meter = metrics.get_meter(_SCOPE, __version__, meter_provider=provider)
        self._exports: list[MetricsExport] = []
        self._instruments: set[str] = set()
        self._lock = threading.Lock()

    def add(self, export: MetricsExport) -> None:
        names = export.names()
        with self._lock:
            self._exports.append(export)
            for name in names:
                full = instrument_name(export.kind, name)
                if full in self._instruments:
                    continue
                self._instruments.add(full)
                callback = partial(self._observe, export.kind, name)
                if name.endswith("-total"):
                    self.meter.create_observable_counter(full, [callback])
                else:
                    self.meter.create_observable_gauge(full, [callback])

    def remove(self, export: MetricsExport) -> None:
        with self._lock:
            if export in self._exports:
                self._exports.remove(export)

    def _observe(self, kind: str, name: str, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            exports = [e for e in self._exports if e.kind == kind]
        out: list[Observation] = []
        for export in exports:
            out += export.observe(name)
        return out


#: One bridge per MeterProvider (the global one when none is given).
_BRIDGES: weakref.WeakKeyDictionary[Any, _MetricsBridge] = weakref.WeakKeyDictionary()
_BRIDGES_LOCK = threading.Lock()


def export_metrics(client: Any, meter_provider: MeterProvider | None = None) -> MetricsExport:
    """Report ``client.metrics()`` (a producer, consumer or admin client, sync
    or asyncio, or a traced wrapper of one) through ``meter_provider`` (default:
    the global one) until the export is closed or the client is gone."""
    if isinstance(client, _Wrapper):
        client = client.client
    kind = _kind(client)
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _BRIDGES_LOCK:
        bridge = _BRIDGES.get(provider)
        if bridge is None:
            bridge = _BRIDGES[provider] = _MetricsBridge(provider)
    export = MetricsExport(client, kind, bridge)
    bridge.add(export)
    return export
