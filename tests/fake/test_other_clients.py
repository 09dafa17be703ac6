"""Other Kafka clients through FakeKafka: confluent-kafka (librdkafka),
kafka-python and aiokafka produce, consume in a group and commit."""

from __future__ import annotations

import asyncio
import time

import pytest


def test_confluent_kafka_round_trip(fake_kafka):
    ck = pytest.importorskip("confluent_kafka")
    fake_kafka.create_topic("ck", 2)
    p = ck.Producer(
        {
            "bootstrap.servers": fake_kafka.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "lz4",
        }
    )
    for i in range(50):
        p.produce("ck", value=b"v%d" % i, key=b"k%d" % i)
    assert p.flush(10) == 0
    c = ck.Consumer(
        {
            "bootstrap.servers": fake_kafka.bootstrap,
            "group.id": "ckg",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe(["ck"])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 50:
            assert time.monotonic() < deadline, f"got {len(got)}"
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(50))
    committed = fake_kafka.committed("ckg")
    assert sum(committed.values()) == 50


def test_kafka_python_round_trip(fake_kafka):
    kp = pytest.importorskip("kafka")
    fake_kafka.create_topic("kp", 2)
    p = kp.KafkaProducer(bootstrap_servers=fake_kafka.bootstrap, linger_ms=5)
    for i in range(30):
        p.send("kp", value=b"v%d" % i, key=b"k%d" % i)
    p.flush(10)
    p.close()
    c = kp.KafkaConsumer(
        "kp",
        bootstrap_servers=fake_kafka.bootstrap,
        group_id="kpg",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 30:
            assert time.monotonic() < deadline, f"got {len(got)}"
            for recs in c.poll(timeout_ms=200).values():
                got.extend(recs)
        c.commit()
    finally:
        c.close()
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(30))
    assert sum(fake_kafka.committed("kpg").values()) == 30


def test_aiokafka_round_trip(fake_kafka):
    aiokafka = pytest.importorskip("aiokafka")
    fake_kafka.create_topic("ak", 2)

    async def main() -> list[bytes]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=fake_kafka.bootstrap)
        await p.start()
        try:
            for i in range(20):
                await p.send_and_wait("ak", b"v%d" % i, key=b"k%d" % i)
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(
            "ak",
            bootstrap_servers=fake_kafka.bootstrap,
            group_id="akg",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 20:
                assert time.monotonic() < deadline, f"got {len(got)}"
                for recs in (await c.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in recs)
            await c.commit()
        finally:
            await c.stop()
        return got

    got = asyncio.run(main())
    assert sorted(got) == sorted(b"v%d" % i for i in range(20))
    assert sum(fake_kafka.committed("akg").values()) == 20
