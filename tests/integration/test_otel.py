"""kpax.otel against a real broker, with opentelemetry-sdk's in-memory span
exporter and metric reader: producer and consumer spans named and attributed
as the messaging semantic conventions say (sync and asyncio), the trace
context carried in the record headers from producer to consumer (and only the
trace context: a hostile baggage header is not read), the instrumentor found
through its entry point and undone by ``uninstrument()``, and the clients'
metrics exported through a MeterProvider."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import math
import time

import pytest

import kpax

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.instrumentation")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

import kpax.otel
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.sync import Consumer
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer
from tests.wait import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def instrumentor():
    inst = kpax.otel.KpaxInstrumentor()
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()


def _by_kind(exporter, kind):
    return [s for s in exporter.get_finished_spans() if s.kind is kind]


def _host_port(bootstrap):
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


def _check_common(span, kafka, client_id):
    a = span.attributes
    host, port = _host_port(kafka.bootstrap)
    assert a["messaging.system"] == "kafka"
    assert a["server.address"] == host
    assert a["server.port"] == port
    assert a["messaging.client.id"] == client_id
    assert len(a["messaging.kafka.cluster.id"]) >= 16  # the broker's cluster id


def _check_producer_span(span, t, kafka, client_id):
    assert span.name == f"{t} publish"
    assert span.kind is SpanKind.PRODUCER
    a = span.attributes
    # the operation in the span's name is messaging.operation.name
    assert a["messaging.operation.name"] == "publish"
    assert a["messaging.operation.type"] == "send"
    assert a["messaging.destination.name"] == t
    _check_common(span, kafka, client_id)


def _check_links(producer_spans, consumer_spans, t, operation):
    by_offset = {s.attributes["messaging.kafka.offset"]: s for s in producer_spans}
    assert len(consumer_spans) == len(producer_spans)
    for cs in consumer_spans:
        assert cs.name == f"{t} {operation}"
        assert cs.kind is SpanKind.CONSUMER
        assert cs.attributes["messaging.system"] == "kafka"
        assert cs.attributes["messaging.operation.name"] == operation
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
    p = kpax.otel.instrument(kpax.Producer(kafka.bootstrap, client_id="p-1"), provider)
    with p:
        futs = [p.send(t, b"v%d" % i, key=b"k%d" % i, headers=[("app", b"x")]) for i in range(3)]
        metas = [f.result(30) for f in futs]
        p.send(t, None, key=b"gone").result(30)  # a tombstone
        p.send(t, b"v", key=b"\xff\xfe").result(30)  # a key with no text form
    producer_spans = sorted(
        _by_kind(exporter, SpanKind.PRODUCER), key=lambda s: s.attributes["messaging.kafka.offset"]
    )
    assert len(producer_spans) == 5
    for i, s in enumerate(producer_spans[:3]):
        _check_producer_span(s, t, kafka, "p-1")
        a = s.attributes
        assert a["messaging.kafka.message.key"] == f"k{i}"
        assert a["messaging.destination.partition.id"] == "0"
        assert a["messaging.kafka.offset"] == metas[i].offset
        assert a["messaging.message.body.size"] == 2
        assert "messaging.kafka.message.tombstone" not in a
        assert s.status.status_code is not StatusCode.ERROR
    tomb, binary_key = producer_spans[3:]
    assert tomb.attributes["messaging.kafka.message.tombstone"] is True
    assert "messaging.message.body.size" not in tomb.attributes
    assert "messaging.kafka.message.key" not in binary_key.attributes

    c = kpax.otel.instrument(
        kpax.Consumer(
            kafka.bootstrap, group_id=f"g-{t}", client_id="c-1", auto_offset_reset="earliest"
        ),
        tracer_provider=provider,
    )
    with c:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += c.poll(1.0)
    assert len(got) == 5
    trace_id = f"{producer_spans[0].context.trace_id:032x}"
    for rec in got[:3]:
        hdrs = dict(rec.headers)
        assert hdrs["app"] == b"x"
        assert hdrs["traceparent"].startswith(b"00-")
        assert len(hdrs["traceparent"].split(b"-")[1]) == len(trace_id)
    consumer_spans = _by_kind(exporter, SpanKind.CONSUMER)
    _check_links(producer_spans, consumer_spans, t, "receive")
    for s in consumer_spans:
        _check_common(s, kafka, "c-1")
        assert s.attributes["messaging.consumer.group.name"] == f"g-{t}"


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
    assert ps.attributes["error.type"] == "MESSAGE_TOO_LARGE"
    assert any(e.name == "exception" for e in ps.events)


async def test_asyncio_producer_and_consumer_spans(kafka, topic, spans):
    provider, exporter = spans
    t = topic(partitions=1)
    p = kpax.otel.instrument(
        kpax.aio.Producer(kafka.bootstrap, client_id="ap"), tracer_provider=provider
    )
    c = kpax.otel.instrument(
        kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest", client_id="ac"),
        tracer_provider=provider,
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
    producer_spans = _by_kind(exporter, SpanKind.PRODUCER)
    for s in producer_spans:
        _check_producer_span(s, t, kafka, "ap")
        assert s.attributes["messaging.kafka.message.key"] == "k"
    consumer_spans = _by_kind(exporter, SpanKind.CONSUMER)
    _check_links(producer_spans, consumer_spans, t, "process")
    for s in consumer_spans:
        _check_common(s, kafka, "ac")
        assert "messaging.consumer.group.name" not in s.attributes  # no group_id
    ids = {s.attributes["messaging.kafka.offset"]: s.context.span_id for s in consumer_spans}
    assert ids == seen


def test_a_hostile_baggage_header_is_not_read(kafka, topic, spans, caplog):
    """A record's headers are what its producer wrote: a 300 KB ``baggage``
    header (and an oversized ``tracestate``) next to a valid ``traceparent``
    is neither parsed nor logged; the trace context still links."""
    provider, exporter = spans
    t = topic(partitions=1)
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    hostile = [
        ("traceparent", f"00-{trace_id}-{span_id}-01".encode()),
        ("tracestate", b"x" * 20_000),
        ("baggage", b"k=" + b"v" * 300_000),
        ("uberctx-user", b"u" * 300_000),
    ]
    with kpax.Producer(kafka.bootstrap, max_request_size=4_000_000) as p:
        for _ in range(3):
            p.send(t, b"v", headers=hostile).result(30)
    c = kpax.otel.instrument(
        kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest"), tracer_provider=provider
    )
    caplog.set_level(logging.DEBUG, logger="opentelemetry")
    got = []
    with c:
        c.assign([kpax.TopicPartition(t, 0)])
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += c.poll(1.0)
    assert len(got) == 3
    logged = [r for r in caplog.records if r.name.startswith("opentelemetry")]
    assert not logged, f"{len(logged)} OpenTelemetry log lines, {len(caplog.text)} characters"
    for s in _by_kind(exporter, SpanKind.CONSUMER):
        (link,) = s.links
        assert f"{link.context.trace_id:032x}" == trace_id
        assert f"{link.context.span_id:016x}" == span_id
        assert len(link.context.trace_state) == 0  # the oversized tracestate: left unread


def test_instrument_refuses_other_objects():
    with pytest.raises(TypeError, match="producer or consumer"):
        kpax.otel.instrument(object())
    with pytest.raises(TypeError, match="producer, consumer or admin"):
        kpax.otel.export_metrics(object())


# ---------------------------------------------------------------- the instrumentor


def test_the_instrumentor_is_found_through_its_entry_point():
    """``opentelemetry-instrument`` loads every ``opentelemetry_instrumentor``
    entry point and calls ``instrument()`` on what it names."""
    (ep,) = importlib.metadata.entry_points(group="opentelemetry_instrumentor", name="kpax")
    assert ep.load() is kpax.otel.KpaxInstrumentor
    assert ep.dist is not None and ep.dist.name == "kpax"


def test_instrument_and_uninstrument_every_client(kafka, topic, spans, instrumentor):
    provider, exporter = spans
    t = topic(partitions=1)
    before = kpax.Producer(kafka.bootstrap)  # made before instrument(): traced too
    patched = [
        (Producer, "send"),
        (AsyncProducer, "send"),
        (Consumer, "poll"),
        (Consumer, "__iter__"),
        (AsyncConsumer, "poll"),
        (AsyncConsumer, "__aiter__"),
        (AsyncConsumer, "close"),
    ]
    originals = {(cls, name): cls.__dict__[name] for cls, name in patched}
    try:
        instrumentor.instrument(tracer_provider=provider, metrics=False)
        with kpax.Producer(kafka.bootstrap) as p:
            p.send(t, b"a", key=b"1").result(30)
            before.send(t, b"b", key=b"2").result(30)
            # a wrapped client of an instrumented class: one span per send, not two
            kpax.otel.instrument(p, provider).send(t, b"c", key=b"3").result(30)
        assert len(_by_kind(exporter, SpanKind.PRODUCER)) == 3

        async def asyncio_side():
            async with kpax.aio.Producer(kafka.bootstrap) as ap:
                await ap.send_and_wait(t, b"d", key=b"4")
            async with kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as ac:
                await ac.assign([kpax.TopicPartition(t, 0)])
                got = []
                async for rec in ac:
                    got.append(rec)
                    if len(got) == 4:
                        break
                return got

        got = asyncio.run(asyncio_side())
        assert len(got) == 4
        assert len(_by_kind(exporter, SpanKind.PRODUCER)) == 4
        processed = _by_kind(exporter, SpanKind.CONSUMER)
        assert len(processed) == 4
        _check_links(_by_kind(exporter, SpanKind.PRODUCER), processed, t, "process")

        with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([kpax.TopicPartition(t, 0)])
            polled = eventually(lambda: c.poll(1.0), timeout=30)
        assert {s.name for s in _by_kind(exporter, SpanKind.CONSUMER)[4:]} == {f"{t} receive"}
        assert len(_by_kind(exporter, SpanKind.CONSUMER)) == 4 + len(polled)
    finally:
        instrumentor.uninstrument()
    for (cls, name), original in originals.items():
        assert cls.__dict__[name] is original, (cls, name)
    exporter.clear()
    with before:
        before.send(t, b"e").result(30)  # no longer traced
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(t, 0)])
        eventually(lambda: c.poll(1.0), timeout=30)
    assert exporter.get_finished_spans() == ()


# ---------------------------------------------------------------- metrics


def _points(reader):
    """{instrument name: [(attributes, value)]} of one collection."""
    out = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(
                    (dict(p.attributes), p.value) for p in m.data.data_points
                )
    return out


def test_metrics_exported_through_a_meter_provider(kafka, topic):
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    t = topic(partitions=2)
    try:
        with (
            kpax.Producer(kafka.bootstrap, client_id="mp") as p,
            kpax.Consumer(kafka.bootstrap, client_id="mc", auto_offset_reset="earliest") as c,
        ):
            pe = kpax.otel.export_metrics(p, provider)
            kpax.otel.export_metrics(c, provider)
            for i in range(10):
                p.send(t, b"v", partition=i % 2)
            p.flush(30)
            c.assign([kpax.TopicPartition(t, 0), kpax.TopicPartition(t, 1)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                got += c.poll(1.0)
            assert len(got) == 10
            points = _points(reader)
            # the Java names, with the Java tags
            assert points["kafka.producer.record_send_total"] == [
                ({"client-id": "mp", "topic": t}, 10.0)
            ]
            assert points["kafka.producer.byte_total"][0][0] == {"client-id": "mp", "topic": t}
            assert points["kafka.consumer.records_consumed_total"] == [({"client-id": "mc"}, 10.0)]
            lags = points["kafka.consumer.records_lag"]
            assert sorted((a["client-id"], a["topic"], a["partition"]) for a, _ in lags) == [
                ("mc", t, "0"),
                ("mc", t, "1"),
            ]
            assert all(v >= 0 for _, v in lags)
            assert points["kafka.producer.request_total"][0][1] > 0
            assert points["kafka.consumer.fetch_total"][0][1] > 0
            # every metric the clients report (NaN: none recorded yet) has its instrument
            for client, kind in ((p, "producer"), (c, "consumer")):
                for key, value in client.metrics().items():
                    name = kpax.otel.instrument_name(kind, key.partition("{")[0])
                    assert math.isnan(value) or name in points, key
            # a new collection reads the clients again
            p.send(t, b"v", partition=0).result(30)
            again = _points(reader)
            assert again["kafka.producer.record_send_total"][0][1] == 11.0
            pe.close()
            assert "kafka.producer.record_send_total" not in _points(reader)
    finally:
        provider.shutdown()


def test_the_instrumentor_exports_the_metrics_of_traced_clients(kafka, topic, spans, instrumentor):
    provider, _ = spans
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    t = topic(partitions=1)
    try:
        instrumentor.instrument(tracer_provider=provider, meter_provider=meters)
        with kpax.Producer(kafka.bootstrap, client_id="ip") as p:
            p.send(t, b"v").result(30)
            points = _points(reader)
            assert points["kafka.producer.record_send_total"] == [
                ({"client-id": "ip", "topic": t}, 1.0)
            ]
        instrumentor.uninstrument()
        assert "kafka.producer.record_send_total" not in _points(reader)
    finally:
        meters.shutdown()
