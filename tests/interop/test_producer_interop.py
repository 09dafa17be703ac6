"""Records cross between kpax's producer and other clients on a real broker:
kpax-produced records read by kafka-python and confluent-kafka with keys,
values, headers and timestamps intact (every codec), and records produced by
kafka-python and confluent-kafka fetched and decoded by kpax. The partition
choice against the Java client itself is tests/integration/test_java_partitioner.py."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer as CkProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

import kpax
from kpax.broker.options import connection_options
from kpax.cluster.cluster import Cluster
from kpax.producer.partitioner import partition_for_key
from kpax.proto.messages import FetchRequest
from kpax.proto.records import decode_batches
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration

TS0 = 1_700_000_000_000


def _expected(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    return [
        (
            None if i % 5 == 0 else b"key-%d" % i,
            None if i % 7 == 3 and i % 5 else b"value-%d" % i * (1 + i % 3),
            [] if i % 4 == 0 else [("h1", b"a%d" % i), ("h2", b"")],
            TS0 + i * 1000,
        )
        for i in range(n)
    ]


def _kafka_python_read(bootstrap: str, topic: str, n: int) -> list[tuple[object, ...]]:
    """What kafka-python reads of partition 0; a consumer that read nothing in 15 s
    (kafka-python's own start can stall on a loaded machine: one CI run read
    nothing for 30 s while confluent-kafka had just read the same records) is
    replaced once by a fresh one."""
    out = _kafka_python_read_once(bootstrap, topic, n, 15)
    return out or _kafka_python_read_once(bootstrap, topic, n, 30)


def _kafka_python_read_once(
    bootstrap: str, topic: str, n: int, seconds: float
) -> list[tuple[object, ...]]:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    try:
        c.assign([KpTopicPartition(topic, 0)])
        c.seek_to_beginning()
        out = []
        deadline = time.monotonic() + seconds
        while len(out) < n and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                out.extend(
                    (r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in recs
                )
        return out
    finally:
        c.close()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kpax_records_read_by_kafka_python_and_confluent(kafka, topic, compression):
    t = topic()
    want = _expected(200)
    with kpax.Producer(
        kafka.bootstrap, compression_type=compression, partitioner=lambda *a: 0
    ) as p:
        for key, value, headers, ts in want:
            p.send(t, value, key=key, headers=headers or None, timestamp=ts)
        p.flush(30)
    got_ck = [
        (m.key(), m.value(), m.headers() or [], m.timestamp()[1])
        for m in read_back(kafka.bootstrap, t, 1, len(want))
    ]
    assert got_ck == want
    if _kafka_python_has(compression):
        assert _kafka_python_read(kafka.bootstrap, t, len(want)) == want


def _kafka_python_has(codec: str) -> bool:
    import kafka.codec

    return codec == "none" or bool(getattr(kafka.codec, f"has_{codec}")())


async def _kpax_fetch(bootstrap: str, topic: str, n: int) -> list[tuple[object, ...]]:
    """Fetch partition 0 of ``topic`` with kpax's own broker connection and decoder."""
    cluster = Cluster([bootstrap], connection_options({}))
    await cluster.start()
    try:
        broker, _ = await cluster.leader(topic, 0, timeout=10)
        out: list[tuple[object, ...]] = []
        offset = 0
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            req = FetchRequest(
                max_wait_ms=200,
                min_bytes=1,
                max_bytes=1 << 24,
                topics=[
                    FetchRequest.FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchRequest.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 24
                            )
                        ],
                    )
                ],
            )
            resp = await broker.request(req, max_version=12)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0
            for batch in decode_batches(part.records or b""):
                for r in batch:
                    if r.offset >= offset:
                        out.append((r.key, r.value, list(r.headers), r.timestamp))
                        offset = r.offset + 1
        return out
    finally:
        await cluster.close()


def test_kafka_python_and_confluent_records_decoded_by_kpax(kafka, topic):
    t = topic()
    want = _expected(100)
    kp = KafkaProducer(bootstrap_servers=kafka.bootstrap, compression_type="gzip")
    for key, value, headers, ts in want[:50]:
        kp.send(t, value=value, key=key, headers=headers, timestamp_ms=ts, partition=0)
    kp.flush()
    kp.close()
    ck = CkProducer({"bootstrap.servers": kafka.bootstrap, "compression.type": "lz4"})
    for key, value, headers, ts in want[50:]:
        ck.produce(t, value=value, key=key, headers=headers or None, timestamp=ts, partition=0)
    ck.flush(30)
    got = asyncio.run(_kpax_fetch(kafka.bootstrap, t, len(want)))
    assert got == want


def test_keyed_records_land_where_confluent_and_kafka_python_put_them(kafka, topic):
    # confluent-kafka's default partitioner is not Java's (consistent_random); its
    # 'murmur2_random' is. kafka-python's default is murmur2. All three must agree.
    t = topic(partitions=7)
    keys = [b"user-%d" % i for i in range(300)]
    ck = CkProducer({"bootstrap.servers": kafka.bootstrap, "partitioner": "murmur2_random"})
    ck_parts: dict[bytes, int] = {}
    for k in keys:
        ck.produce(
            t, b"v", key=k, on_delivery=lambda err, m: ck_parts.__setitem__(m.key(), m.partition())
        )
    ck.flush(30)
    kp = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    kp_parts = {k: kp.send(t, b"v", key=k).get(30).partition for k in keys}
    kp.close()
    with kpax.Producer(kafka.bootstrap) as p:
        ours = {k: p.send(t, b"v", key=k).result(30).partition for k in keys}
    assert ours == ck_parts == kp_parts == {k: partition_for_key(k, 7) for k in keys}
