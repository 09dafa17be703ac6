"""kpax.otel against a real broker, with opentelemetry-sdk's in-memory span
exporter: producer spans with the messaging attributes and a W3C traceparent
in the record headers; consumer spans linked to the producer's span."""

from __future__ import annotations

import contextlib
import time

import pytest

import kpax

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

import kpax.otel

pytestmark = pytest.mark.integration


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _by_kind(exporter, kind):
    return [s for s in exporter.get_finished_spans() if s.kind is kind]


def _check_links(producer_spans, consumer_spans, t, operation):
    by_offset = {s.attributes["messaging.kafka.offset"]: s for s in producer_spans}
    assert len(consumer_spans) == len(producer_spans)
    for cs in consumer_spans:
        assert cs.name == f"{t} {operation}"
        assert cs.attributes["messaging.system"] == "kafka"
        assert cs.attributes["messaging.operation.type"] == operation
        assert cs.attributes["messaging.destination.name"] == t
        assert cs.attributes["messaging.destination.partition.id"] == "0"
        ps = by_offset[cs.attributes["messaging.kafka.offset"]]
        assert len(cs.links) == 1
        link = cs.links[0].context
        assert link.trace_id == ps.context.trace_id
        assert link.span_id == ps.context.span_id
        assert cs.context.trace_id != ps.context.trace_id  # linked, not a child


def test_sync_producer_and_consumer_spans(kafka, topic, spans):
    provider, exporter = spans
    t = topic(partitions=1)
    with kpax.otel.instrument(kpax.Producer(kafka.bootstrap), tracer_provider=provider) as p:
        futs = [p.send(t, b"v%d" % i, key=b"k%d" % i, headers=[("app", b"x")]) for i in range(3)]
        metas = [f.result(30) for f in futs]
    producer_spans = _by_kind(exporter, SpanKind.PRODUCER)
    assert len(producer_spans) == 3
    for i, s in enumerate(
        sorted(producer_spans, key=lambda s: s.attributes["messaging.kafka.offset"])
    ):
        assert s.name == f"{t} publish"
        a = s.attributes
        assert a["messaging.system"] == "kafka"
        assert a["messaging.destination.name"] == t
        assert a["messaging.kafka.message.key"] == f"k{i}"
        assert a["messaging.destination.partition.id"] == "0"
        assert a["messaging.kafka.offset"] == metas[i].offset
        assert s.status.status_code is not StatusCode.ERROR

    c = kpax.otel.instrument(
        kpax.Consumer(kafka.bootstrap, group_id=f"g-{t}", auto_offset_reset="earliest"),
        tracer_provider=provider,
    )
    with c:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += c.poll(1.0)
    assert len(got) == 3
    for rec in got:
        hdrs = dict(rec.headers)
        assert hdrs["app"] == b"x"
        trace_id = f"{producer_spans[0].context.trace_id:032x}"
        assert hdrs["traceparent"].startswith(b"00-")
        assert len(hdrs["traceparent"].split(b"-")[1]) == len(trace_id)
    consumer_spans = _by_kind(exporter, SpanKind.CONSUMER)
    _check_links(producer_spans, consumer_spans, t, "receive")
    assert all(s.attributes["messaging.consumer.group.name"] == f"g-{t}" for s in consumer_spans)


def test_traceparent_continues_the_callers_trace(kafka, topic, spans):
    provider, exporter = spans
    t = topic(partitions=1)
    tracer = provider.get_tracer("app")
    p = kpax.otel.instrument(kpax.Producer(kafka.bootstrap), tracer_provider=provider)
    with p, tracer.start_as_current_span("request") as parent:
        p.send(t, b"v").result(30)
    (ps,) = _by_kind(exporter, SpanKind.PRODUCER)
    assert ps.context.trace_id == parent.get_span_context().trace_id
    assert ps.parent.span_id == parent.get_span_context().span_id


def test_iteration_spans_are_current_in_the_loop_body(kafka, topic, spans):
    provider, exporter = spans
    t = topic(partitions=1)
    with kpax.otel.instrument(kpax.Producer(kafka.bootstrap), tracer_provider=provider) as p:
        for i in range(2):
            p.send(t, b"v%d" % i).result(30)
    c = kpax.otel.instrument(
        kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000),
        tracer_provider=provider,
    )
    seen = []
    with c:
        c.assign([kpax.TopicPartition(t, 0)])
        for rec in c:
            current = trace.get_current_span()
            seen.append((rec.offset, current.get_span_context().span_id))
            if len(seen) == 2:
                break
    consumer_spans = _by_kind(exporter, SpanKind.CONSUMER)
    _check_links(_by_kind(exporter, SpanKind.PRODUCER), consumer_spans, t, "process")
    ids = {s.attributes["messaging.kafka.offset"]: s.context.span_id for s in consumer_spans}
    assert dict(seen) == ids


def test_failed_send_ends_its_span_with_an_error(kafka, topic, spans):
    provider, exporter = spans
    t = topic(partitions=1, config={"max.message.bytes": "1024"})
    p = kpax.otel.instrument(kpax.Producer(kafka.bootstrap), tracer_provider=provider)
    with p, pytest.raises(kpax.KafkaError):
        p.send(t, b"x" * 5000).result(30)
    (ps,) = _by_kind(exporter, SpanKind.PRODUCER)
    assert ps.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in ps.events)


async def test_asyncio_producer_and_consumer_spans(kafka, topic, spans):
    provider, exporter = spans
    t = topic(partitions=1)
    p = kpax.otel.instrument(kpax.aio.Producer(kafka.bootstrap), tracer_provider=provider)
    c = kpax.otel.instrument(
        kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest"), tracer_provider=provider
    )
    async with p, c:
        for i in range(3):
            await (await p.send(t, b"v%d" % i, key=b"k"))
        await c.assign([kpax.TopicPartition(t, 0)])
        seen = {}
        async with contextlib.aclosing(aiter(c)) as it:
            async for rec in it:
                seen[rec.offset] = trace.get_current_span().get_span_context().span_id
                if len(seen) == 3:
                    break
        # the iterator closed at the break: its last span ended, no longer current
        assert not trace.get_current_span().get_span_context().is_valid
        assert len(_by_kind(exporter, SpanKind.CONSUMER)) == 3
        # after a break without aclosing, the span stays current until the
        # consumer is iterated, polled or closed again
        await (await p.send(t, b"v3", key=b"k"))
        async for rec in c:
            seen[rec.offset] = trace.get_current_span().get_span_context().span_id
            break
        assert trace.get_current_span().get_span_context().span_id == seen[3]
        assert len(_by_kind(exporter, SpanKind.CONSUMER)) == 3
        await c.poll(0)
        assert not trace.get_current_span().get_span_context().is_valid
        assert len(_by_kind(exporter, SpanKind.CONSUMER)) == 4
    consumer_spans = _by_kind(exporter, SpanKind.CONSUMER)
    _check_links(_by_kind(exporter, SpanKind.PRODUCER), consumer_spans, t, "process")
    ids = {s.attributes["messaging.kafka.offset"]: s.context.span_id for s in consumer_spans}
    assert ids == seen


def test_instrument_refuses_other_objects():
    with pytest.raises(TypeError, match="producer or consumer"):
        kpax.otel.instrument(object())
