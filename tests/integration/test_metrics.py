"""producer.metrics(), consumer.metrics(), admin.metrics() against a real broker
(sync and asyncio faces): counts after known traffic, errors the broker refuses,
latencies, buffer memory, consumer lag and commits."""

from __future__ import annotations

import time

import pytest

import kpax
from kpax.producer.fastpath import sendpath
from kpax.structs import TopicPartition

pytestmark = pytest.mark.integration


def test_producer_counts_records_batches_and_latency(kafka, topic):
    t = topic(partitions=2)
    n = 500
    with kpax.Producer(kafka.bootstrap, linger_ms=5) as p:
        futs = [p.send(t, b"v%d" % i, key=b"k%d" % i) for i in range(n)]
        for f in futs:
            f.result(30)
        m = p.metrics()
        assert m["record-send-total"] == n
        assert m[f"record-send-total{{topic={t}}}"] == n
        assert m["record-error-total"] == 0
        assert m[f"record-error-total{{topic={t}}}"] == 0
        assert m["record-send-rate"] > 0
        assert m["batch-size-avg"] > 0 and m["batch-size-max"] >= m["batch-size-avg"]
        assert m[f"byte-total{{topic={t}}}"] > n * 4
        assert m["request-latency-avg"] > 0
        assert m["request-latency-max"] >= m["request-latency-avg"]
        assert m["records-per-request-avg"] >= 1
        assert m["buffer-total-bytes"] == p.config["buffer_memory"]
        assert 0 <= m["buffer-available-bytes"] <= p.config["buffer_memory"]
        assert m["connection-count"] >= 1
        assert m["request-total"] >= m["response-total"] > 0
        assert m["outgoing-byte-total"] > n * 4
        assert m["requests-in-flight"] >= 0


def test_counting_leaves_the_c_send_path_in_place(kafka, topic):
    # The counters are per batch and per request: with them on (the default) the
    # producer's per-record send is still the C appender's, not a Python wrapper.
    if sendpath is None:
        pytest.skip("the C send path is not built here")
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap) as p:
        assert type(p.send).__name__ == "builtin_function_or_method"
        p.send(t, b"v").result(30)
        assert p.metrics()["record-send-total"] == 1


def test_producer_buffer_available_bytes_drops_while_buffered(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap, linger_ms=60_000, batch_size=100_000) as p:
        p.partitions_for(t)
        fut = p.send(t, b"x" * 1000)
        m = p.metrics()
        # (an open batch reserves its first 16 KiB, then more as it fills)
        assert m["buffer-available-bytes"] <= p.config["buffer_memory"] - 16384
        p.flush(30)
        fut.result(30)
        assert p.metrics()["buffer-available-bytes"] == p.config["buffer_memory"]


def test_producer_counts_records_the_broker_refuses(kafka, topic):
    t = topic(partitions=1, config={"max.message.bytes": "1024"})
    with kpax.Producer(kafka.bootstrap, linger_ms=0) as p:
        good = [p.send(t, b"ok%d" % i) for i in range(5)]
        for f in good:
            f.result(30)
        bad = [p.send(t, b"x" * 5000) for _ in range(3)]
        for f in bad:
            with pytest.raises(kpax.KafkaError):
                f.result(30)
        m = p.metrics()
    assert m["record-send-total"] == 5
    assert m["record-error-total"] == 3
    assert m[f"record-error-total{{topic={t}}}"] == 3
    assert m["record-error-rate"] > 0


def test_producer_counts_records_failed_by_close(kafka, topic):
    t = topic(partitions=1)
    p = kpax.Producer(kafka.bootstrap, linger_ms=60_000)
    p.partitions_for(t)
    futs = [p.send(t, b"v") for _ in range(7)]
    p.close(0)
    for f in futs:
        with pytest.raises(kpax.KafkaError):
            f.result(5)
    m = p.metrics()
    assert m["record-error-total"] == 7
    assert m["record-send-total"] == 0


async def test_asyncio_producer_metrics(kafka, topic):
    t = topic(partitions=1)
    async with kpax.aio.Producer(kafka.bootstrap) as p:
        futs = [await p.send(t, b"v%d" % i) for i in range(50)]
        for f in futs:
            await f
        m = p.metrics()
    assert m["record-send-total"] == 50
    assert m["request-latency-avg"] > 0


def _produce(bootstrap: str, t: str, n: int) -> None:
    with kpax.Producer(bootstrap) as p:
        futs = [p.send(t, b"v%d" % i, partition=0) for i in range(n)]
        p.flush(30)
        for f in futs:
            f.result(30)


def test_consumer_counts_consumed_lag_fetches_and_commits(kafka, topic):
    t = topic(partitions=1)
    _produce(kafka.bootstrap, t, 100)
    with kpax.Consumer(
        kafka.bootstrap, group_id=f"g-{t}", auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            got += c.poll(1.0, max_records=30 - len(got))
        assert len(got) == 30
        m = c.metrics()
        assert m["records-consumed-total"] == 30
        assert m["records-consumed-rate"] > 0
        assert m["records-lag-max"] == 70
        assert m[f"records-lag{{topic={t},partition=0}}"] == 70
        assert m["fetch-total"] >= 1 and m["fetch-rate"] > 0
        assert m["fetch-latency-avg"] > 0
        assert m["fetch-size-avg"] > 0
        assert m["commit-total"] == 0
        c.commit()
        c.commit({TopicPartition(t, 0): 30})
        m = c.metrics()
        assert m["commit-total"] == 2
        assert m["commit-latency-avg"] > 0
        assert m["commit-latency-max"] >= m["commit-latency-avg"]
        assert m["connection-count"] >= 2  # the coordinator/metadata one and the fetch one
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got += c.poll(1.0)
        m = c.metrics()
    assert m["records-consumed-total"] == 100
    assert m["records-lag-max"] == 0


async def test_asyncio_consumer_metrics(kafka, topic):
    t = topic(partitions=1)
    _produce(kafka.bootstrap, t, 20)
    async with kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        await c.assign([TopicPartition(t, 0)])
        got = 0
        async for _ in c:
            got += 1
            if got == 20:
                break
        m = c.metrics()
    assert m["records-consumed-total"] == 20
    assert m["records-lag-max"] == 0
    assert m["fetch-total"] >= 1


def test_admin_metrics(kafka, topic):
    t = topic(partitions=1)
    with kpax.Admin(kafka.bootstrap) as a:
        before = a.metrics()
        a.list_offsets({TopicPartition(t, 0): "latest"})
        a.describe_cluster()
        m = a.metrics()
    assert m["request-total"] >= before["request-total"] + 2
    assert m["response-total"] >= before["response-total"] + 2
    assert m["connection-count"] >= 1
    assert m["connection-creation-total"] >= 1
    assert m["request-latency-avg"] > 0
    assert m["incoming-byte-total"] > 0
