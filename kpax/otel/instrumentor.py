"""``KpaxInstrumentor``: every kpax client class traced until ``uninstrument()``
(found by ``opentelemetry-instrument`` through the entry point ``kpax``).

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: opentelemetry-instrumentation; kpax.otel.{metrics,tracing,wrappers},
kpax.producer, kpax.consumer, kpax.parallel (the client types).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from functools import partial
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from kpax.consumer.client import AsyncConsumer
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.sync import Consumer
from kpax.otel.metrics import MetricsExport, export_metrics
from kpax.otel.tracing import (
    _ORIGINAL,
    _traced_asend,
    _traced_send,
    _TracedAsyncIterator,
    _Tracing,
    _untraced,
)
from kpax.otel.wrappers import _tracer
from kpax.parallel.client import AsyncParallelConsumer
from kpax.parallel.sync import ParallelConsumer
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer

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
