"""kpax consumers in groups with other clients on the same broker: a group
with a kpax member and a kafka-python / confluent-kafka member shares the
partitions; committed offsets cross both ways; a KIP-848 group with
confluent-kafka (group.protocol=consumer) and kpax members."""

from __future__ import annotations

import threading
import time
import uuid
import warnings

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.integration.test_consumer import produce, values

pytestmark = pytest.mark.integration

FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300, "auto_offset_reset": "earliest"}


def gid() -> str:
    return "gi-" + uuid.uuid4().hex[:10]


def _kpax_consume(c: kpax.Consumer, seen: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        seen.extend(values(c.poll(0.1)))


def test_group_with_kpax_and_kafka_python_members(kafka, topic):
    from kafka import KafkaConsumer

    t = topic(partitions=4)
    produce(kafka.bootstrap, t, 4000, partitions=4)
    g = gid()
    k = kpax.Consumer(kafka.bootstrap, group_id=g, partition_assignment_strategy="range", **FAST)
    k.subscribe([t])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = KafkaConsumer(
            t,
            bootstrap_servers=kafka.bootstrap,
            group_id=g,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
    seen_k: list[int] = []
    seen_o: list[int] = []
    stop = threading.Event()
    th = threading.Thread(target=_kpax_consume, args=(k, seen_k, stop))
    th.start()
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for recs in other.poll(timeout_ms=100).values():
                seen_o.extend(int(r.value) for r in recs)
            mine = k.assignment()
            theirs = {TP(tp.topic, tp.partition) for tp in other.assignment()}
            if len(mine) == 2 and len(theirs) == 2 and len(set(seen_k) | set(seen_o)) == 4000:
                break
        assert len(mine) == 2 and len(theirs) == 2 and not (mine & theirs)
        assert set(seen_k) | set(seen_o) == set(range(4000))
        # after the split each member reads only its own partitions
        n_k, n_o = len(seen_k), len(seen_o)
        produce(kafka.bootstrap, t, 400, partitions=4, start=4000)
        while len(set(seen_k[n_k:]) | set(seen_o[n_o:])) < 400 and time.monotonic() < deadline:
            for recs in other.poll(timeout_ms=100).values():
                seen_o.extend(int(r.value) for r in recs)
        assert set(seen_k[n_k:]) | set(seen_o[n_o:]) == set(range(4000, 4400))
        assert {v % 4 for v in seen_k[n_k:]} <= {tp.partition for tp in mine}
        assert {v % 4 for v in seen_o[n_o:]} <= {tp.partition for tp in theirs}
    finally:
        stop.set()
        th.join()
        k.close()
        other.close()


def test_group_with_kpax_and_confluent_members(kafka, topic):
    from confluent_kafka import Consumer as CK

    t = topic(partitions=4)
    produce(kafka.bootstrap, t, 2000, partitions=4)
    g = gid()
    k = kpax.Consumer(kafka.bootstrap, group_id=g, **FAST)
    k.subscribe([t])
    other = CK(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": g,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )
    other.subscribe([t])
    seen_k: list[int] = []
    seen_o: list[int] = []
    stop = threading.Event()
    th = threading.Thread(target=_kpax_consume, args=(k, seen_k, stop))
    th.start()
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for m in other.consume(100, 0.1):
                if m.error() is None:
                    seen_o.append(int(m.value()))
            mine = k.assignment()
            theirs = {TP(tp.topic, tp.partition) for tp in other.assignment()}
            if len(mine) == 2 and len(theirs) == 2 and len(set(seen_k) | set(seen_o)) == 2000:
                break
        assert len(mine) == 2 and len(theirs) == 2 and not (mine & theirs)
        assert set(seen_k) | set(seen_o) == set(range(2000))
    finally:
        stop.set()
        th.join()
        k.close()
        other.close()


def test_committed_offsets_cross_between_kpax_and_confluent(kafka, topic):
    from confluent_kafka import Consumer as CK
    from confluent_kafka import TopicPartition as CTP

    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 100, partitions=2)  # committed offsets inside the log
    g = gid()
    with kpax.Consumer(kafka.bootstrap, group_id=g, enable_auto_commit=False) as k:
        k.assign([TP(t, 0), TP(t, 1)])
        k.commit({TP(t, 0): kpax.OffsetAndMetadata(17, "from kpax")})
    ck = CK({"bootstrap.servers": kafka.bootstrap, "group.id": g, "enable.auto.commit": False})
    try:
        got = ck.committed([CTP(t, 0)], timeout=10)
        assert (got[0].offset, got[0].metadata) == (17, "from kpax")
        ck.commit(offsets=[CTP(t, 1, 23)], asynchronous=False)
    finally:
        ck.close()
    with kpax.Consumer(kafka.bootstrap, group_id=g) as k:
        k.assign([TP(t, 0), TP(t, 1)])
        assert k.committed([TP(t, 1)])[TP(t, 1)].offset == 23
        assert k.position(TP(t, 1)) == 23  # a new member starts at the committed offset
        assert k.position(TP(t, 0)) == 17


@pytest.mark.kafka4
def test_kip848_group_with_confluent_member(kafka, topic):
    from confluent_kafka import Consumer as CK

    t = topic(partitions=4)
    produce(kafka.bootstrap, t, 2000, partitions=4)
    g = gid()
    k = kpax.Consumer(
        kafka.bootstrap, group_id=g, group_protocol="consumer", auto_offset_reset="earliest"
    )
    k.subscribe([t])
    other = CK(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": g,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    other.subscribe([t])
    seen_k: list[int] = []
    seen_o: list[int] = []
    stop = threading.Event()
    th = threading.Thread(target=_kpax_consume, args=(k, seen_k, stop))
    th.start()
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            for m in other.consume(100, 0.1):
                if m.error() is None:
                    seen_o.append(int(m.value()))
            mine = k.assignment()
            theirs = {TP(tp.topic, tp.partition) for tp in other.assignment()}
            if len(mine) == 2 and len(theirs) == 2 and len(set(seen_k) | set(seen_o)) == 2000:
                break
        assert len(mine) == 2 and len(theirs) == 2 and not (mine & theirs)
        assert set(seen_k) | set(seen_o) == set(range(2000))
    finally:
        stop.set()
        th.join()
        k.close()
        other.close()
