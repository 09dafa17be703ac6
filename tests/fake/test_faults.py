"""Each kind of injected fault, as a kpax client observes it through FakeKafka:
errors on the n-th request, delays, connections dropped before or after the
request is applied, partitions offline, leaders and coordinators moved, brokers
stopped and started."""

from __future__ import annotations

import time

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.wait import eventually

THREE = pytest.mark.parametrize("fake_kafka", [3], indirect=True)


def _values(fake, topic: str, partition: int = 0) -> list[bytes | None]:
    return [v for _o, _k, v in fake.records(topic, partition)]


def _send_all(bootstrap: str, topic: str, n: int, **opts) -> list:
    """Send ``n`` records one at a time (one Produce request each)."""
    with kpax.Producer(bootstrap, linger_ms=0, **opts) as p:
        return [p.send(topic, b"%d" % i, partition=0).result(20) for i in range(n)]


@THREE
def test_not_leader_on_the_third_produce_is_retried_once(fake_kafka):
    fake_kafka.create_topic("t", 1)
    leader = fake_kafka.leader("t", 0)
    fault = fake_kafka.inject("Produce", error="NOT_LEADER_OR_FOLLOWER", nth=3, broker=leader)
    metas = _send_all(fake_kafka.bootstrap, "t", 10)
    assert fault.hits == 1 and fault.seen == 3
    assert [m.offset for m in metas] == list(range(10))
    assert _values(fake_kafka, "t") == [b"%d" % i for i in range(10)]  # once each, in order


def test_drop_after_apply_gives_no_duplicate_with_idempotence(fake_kafka):
    fake_kafka.create_topic("d", 1)
    fault = fake_kafka.inject("Produce", drop="after", nth=2)
    metas = _send_all(fake_kafka.bootstrap, "d", 5)
    assert fault.hits == 1
    assert [m.offset for m in metas] == list(range(5))
    assert _values(fake_kafka, "d") == [b"%d" % i for i in range(5)]


def test_drop_after_apply_duplicates_without_idempotence(fake_kafka):
    """The ambiguity the fault exists for: written, not acknowledged, sent again."""
    fake_kafka.create_topic("dup", 1)
    fake_kafka.inject("Produce", drop="after", nth=1)
    _send_all(fake_kafka.bootstrap, "dup", 1, enable_idempotence=False, acks=1)
    assert _values(fake_kafka, "dup") == [b"0", b"0"]


def test_drop_before_apply_is_retried(fake_kafka):
    fake_kafka.create_topic("db", 1)
    fault = fake_kafka.inject("Produce", drop="before", nth=1)
    _send_all(fake_kafka.bootstrap, "db", 3, enable_idempotence=False, acks=1)
    assert fault.hits == 1
    assert _values(fake_kafka, "db") == [b"0", b"1", b"2"]


def test_delay_past_the_request_timeout_gives_no_duplicate(fake_kafka):
    fake_kafka.create_topic("dl", 1)
    fake_kafka.inject("Produce", delay_ms=1500, nth=1)
    start = time.monotonic()
    metas = _send_all(
        fake_kafka.bootstrap, "dl", 2, request_timeout_ms=500, delivery_timeout_ms=10000
    )
    assert time.monotonic() - start >= 0.5
    assert [m.offset for m in metas] == [0, 1]
    assert _values(fake_kafka, "dl") == [b"0", b"1"]


@THREE
def test_moved_leader_is_found_by_producer_and_consumer(fake_kafka):
    fake_kafka.create_topic("m", 1, replication_factor=1)
    old = fake_kafka.leader("m", 0)
    new = next(n for n in (1, 2, 3) if n != old)
    tp = TP("m", 0)
    with (
        kpax.Producer(fake_kafka.bootstrap, linger_ms=0) as p,
        kpax.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c,
    ):
        c.assign([tp])
        p.send("m", b"before", partition=0).result(10)
        got = []
        eventually(lambda: got.extend(r.value for r in c.poll(timeout=0.1)) or got, 10)
        fake_kafka.move_leader("m", 0, to=new)
        assert p.send("m", b"after", partition=0).result(10).offset == 1
        eventually(lambda: got.extend(r.value for r in c.poll(timeout=0.1)) or len(got) == 2, 10)
    assert got == [b"before", b"after"]
    assert fake_kafka.leader("m", 0) == new


def test_partition_offline_then_online(fake_kafka):
    fake_kafka.create_topic("off", 1)
    fake_kafka.set_offline("off", 0)
    with kpax.Producer(fake_kafka.bootstrap, linger_ms=0, delivery_timeout_ms=40000) as p:
        fut = p.send("off", b"waits", partition=0)
        time.sleep(0.3)
        assert not fut.done()
        fake_kafka.set_online("off", 0)
        assert fut.result(10).offset == 0


@THREE
def test_moved_group_coordinator_answers_not_coordinator(fake_kafka):
    fake_kafka.create_topic("gc", 1)
    tp = TP("gc", 0)
    with kpax.Consumer(fake_kafka.bootstrap, group_id="gcg", enable_auto_commit=False) as c:
        c.assign([tp])
        c.commit({tp: kpax.OffsetAndMetadata(1, "")})
        old = fake_kafka.coordinator(group="gcg")
        new = next(n for n in (1, 2, 3) if n != old)
        fake_kafka.move_coordinator(group="gcg", to=new)
        fault = fake_kafka.inject("OffsetCommit", error="NOT_COORDINATOR", nth=1, broker=new)
        c.commit({tp: kpax.OffsetAndMetadata(2, "")})
        assert fault.hits == 1  # the new coordinator once refused; the client found it again
    assert fake_kafka.committed("gcg") == {("gc", 0): 2}


@THREE
def test_moved_transaction_coordinator(fake_kafka):
    fake_kafka.create_topic("tc", 1)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id="tc-id") as p:
        p.init_transactions()
        old = fake_kafka.coordinator(transactional_id="tc-id")
        fake_kafka.move_coordinator(
            transactional_id="tc-id", to=next(n for n in (1, 2, 3) if n != old)
        )
        p.begin_transaction()
        p.send("tc", b"x", partition=0)
        p.commit_transaction()
    assert _values(fake_kafka, "tc") == [b"x"]


@THREE
def test_stopped_broker_refuses_and_its_partitions_move(fake_kafka):
    fake_kafka.create_topic("s", 1, replication_factor=3)
    leader = fake_kafka.leader("s", 0)
    with kpax.Producer(fake_kafka.bootstrap, linger_ms=0) as p:
        p.send("s", b"a", partition=0).result(10)
        fake_kafka.stop_broker(leader)
        assert fake_kafka.leader("s", 0) != leader
        import socket

        host, port = fake_kafka.addresses[leader].split(":")
        with pytest.raises(OSError):
            socket.create_connection((host, int(port)), timeout=1).close()
        assert p.send("s", b"b", partition=0).result(10).offset == 1
        fake_kafka.start_broker(leader)
        socket.create_connection((host, int(port)), timeout=1).close()
        fake_kafka.move_leader("s", 0, to=leader)
        assert p.send("s", b"c", partition=0).result(10).offset == 2
    assert _values(fake_kafka, "s") == [b"a", b"b", b"c"]


def test_join_group_error_on_the_first_join(fake_kafka):
    fake_kafka.create_topic("j", 2)
    fault = fake_kafka.inject("JoinGroup", error="COORDINATOR_LOAD_IN_PROGRESS", nth=1)
    with kpax.Consumer(fake_kafka.bootstrap, group_id="jg") as c:
        c.subscribe(["j"])
        eventually(lambda: c.poll(timeout=0.1) is not None and len(c.assignment()) == 2, 10)
    assert fault.hits == 1


def test_fetch_error_on_a_partition(fake_kafka):
    fake_kafka.create_topic("fe", 2)
    with kpax.Producer(fake_kafka.bootstrap) as p:
        for i in range(4):
            p.send("fe", b"%d" % i, partition=i % 2)
    fault = fake_kafka.inject("Fetch", error="NOT_LEADER_OR_FOLLOWER", topic="fe", partition=1)
    with kpax.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP("fe", 0), TP("fe", 1)])
        got: list = []
        eventually(lambda: got.extend(c.poll(timeout=0.1)) or len(got) == 4, 10)
    assert fault.hits == 1
    assert sorted(r.value for r in got) == [b"0", b"1", b"2", b"3"]


def test_probability_faults_are_seeded(fake_kafka):
    """Two clusters with the same seed hit the same requests."""
    from kpax.testing.fake import FakeCluster

    def hits(seed: int) -> list[bool]:
        cluster = FakeCluster(1, seed=seed)
        fault = cluster.inject(
            "Metadata", error="LEADER_NOT_AVAILABLE", probability=0.5, times=None
        )
        out = []
        for _ in range(20):
            before = fault.hits
            cluster.faults.match("Metadata", 1, set)
            out.append(fault.hits > before)
        return out

    assert hits(7) == hits(7)
    assert hits(7) != hits(8)
