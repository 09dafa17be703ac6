"""kpax.otel and the parallel consumer, through FakeKafka: a "process" span per
handler call (every attempt), current while the handler runs (on its thread,
or in its task), with the error when it raises; the instrumentor traces
parallel consumers too; their metrics export through a MeterProvider."""

from __future__ import annotations

import asyncio
import threading

import pytest

import kpax

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.instrumentation")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import kpax.otel

FAST = {"auto_offset_reset": "earliest", "session_timeout_ms": 10_000, "heartbeat_interval_ms": 300}


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _produce(bootstrap: str, topic: str, n: int) -> None:
    with kpax.Producer(bootstrap) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=0)
        p.flush(10)


def test_a_process_span_per_handler_call_current_in_the_handler(fake_kafka, spans):
    provider, exporter = spans
    fake_kafka.create_topic("tr", 1)
    _produce(fake_kafka.bootstrap, "tr", 3)
    tracer = provider.get_tracer("app")
    failed_once = threading.Event()
    done = []
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap, group_id="g-tr", max_attempts=2, retry_delay_ms=10, **FAST
    )
    traced = kpax.otel.instrument(pc, tracer_provider=provider)

    def handle(rec):
        with tracer.start_as_current_span(f"work {rec.offset}"):
            if rec.offset == 1 and not failed_once.is_set():
                failed_once.set()
                raise ValueError("once")
        done.append(rec.offset)
        if len(done) == 3:
            traced.stop()

    with traced:
        traced.subscribe(["tr"])
        traced.run(handle, handle_signals=False)
    finished = exporter.get_finished_spans()
    process = [s for s in finished if s.kind is SpanKind.CONSUMER]
    assert sorted(s.attributes["messaging.kafka.offset"] for s in process) == [0, 1, 1, 2]
    for s in process:
        assert s.name == "tr process"
        assert s.attributes["messaging.operation.name"] == "process"
        assert s.attributes["messaging.destination.name"] == "tr"
        assert s.attributes["messaging.consumer.group.name"] == "g-tr"
    errors = [s for s in process if s.status.status_code is StatusCode.ERROR]
    assert len(errors) == 1 and errors[0].attributes["error.type"] == "ValueError"
    by_id = {s.context.span_id: s for s in process}
    for work in (s for s in finished if s.name.startswith("work")):
        parent = by_id[work.parent.span_id]  # the handler's spans are the process span's children
        assert work.name == f"work {parent.attributes['messaging.kafka.offset']}"


def test_the_instrumentor_traces_asyncio_parallel_consumers(fake_kafka, spans):
    provider, exporter = spans
    fake_kafka.create_topic("ai", 1)
    _produce(fake_kafka.bootstrap, "ai", 5)
    inst = kpax.otel.KpaxInstrumentor()
    inst.instrument(tracer_provider=provider, metrics=False)
    try:

        async def main() -> list[bool]:
            current = []
            async with kpax.aio.ParallelConsumer(
                fake_kafka.bootstrap, group_id="g-ai", **FAST
            ) as pc:
                await pc.subscribe(["ai"])

                async def handle(rec):
                    await asyncio.sleep(0.01)
                    span = trace.get_current_span()
                    current.append(span.get_span_context().is_valid)
                    if len(current) == 5:
                        pc.stop()

                await pc.run(handle)
            return current

        current = asyncio.run(main())
    finally:
        inst.uninstrument()
    assert current == [True] * 5
    process = [s for s in exporter.get_finished_spans() if s.name == "ai process"]
    assert sorted(s.attributes["messaging.kafka.offset"] for s in process) == [0, 1, 2, 3, 4]


def test_parallel_consumer_metrics_export(fake_kafka):
    fake_kafka.create_topic("me", 1)
    _produce(fake_kafka.bootstrap, "me", 4)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    done = []
    with kpax.ParallelConsumer(
        fake_kafka.bootstrap, group_id="g-me", client_id="pc-1", **FAST
    ) as pc:
        export = kpax.otel.export_metrics(pc, meters)
        pc.subscribe(["me"])

        def handle(rec):
            done.append(rec.offset)
            if len(done) == 4:
                pc.stop()

        pc.run(handle, handle_signals=False)
        data = reader.get_metrics_data()
        export.close()
    points = {
        m.name: [p.value for p in m.data.data_points]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert points["kafka.consumer.records_processed_total"] == [4]
    assert points["kafka.consumer.records_in_flight"] == [0]
    assert "kafka.consumer.records_queued" in points
    meters.shutdown()
