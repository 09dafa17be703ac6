"""``kpax.otel.instrument(client)``: a traced wrapper of one producer or consumer
(sync or asyncio, and the parallel consumers); every other attribute is the
client's own.

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: opentelemetry-api; kpax._version, kpax.otel.{_common,tracing},
kpax.producer, kpax.consumer, kpax.parallel (the client types).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Tracer

from kpax._version import __version__
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.sync import Consumer
from kpax.otel._common import _SCOPE
from kpax.otel.tracing import _traced_asend, _traced_send, _TracedAsyncIterator, _Tracing, _untraced
from kpax.parallel.client import AsyncParallelConsumer
from kpax.parallel.sync import ParallelConsumer
from kpax.producer.batch import RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer

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

    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[Any, list[ConsumerRecord]]:
        # the class's own getmany, on this wrapper: it groups what the traced poll returns
        getmany = AsyncConsumer.__dict__["getmany"]
        return await getmany(self, *partitions, timeout_ms=timeout_ms, max_records=max_records)  # type: ignore[no-any-return]

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
