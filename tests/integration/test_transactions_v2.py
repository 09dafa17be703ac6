"""Transactions v2 (KIP-890 part 2) and the older path, on real brokers.

Kafka 4.x clusters formatted today run ``transaction.version`` 2: the first
Produce to a partition and the TxnOffsetCommit add them to the transaction, so a
transactional producer sends no AddPartitionsToTxn and no AddOffsetsToTxn there.
A Kafka 3.9 broker has no transaction version 2: the producer adds partitions
and offsets first, as before. Both are checked by the requests the producer
sends (a spy on the broker handles) and by what a read_committed consumer and
the group's committed offsets show: committed transactions visible with their
offsets, aborted ones not, and a commit after an abort working (v2 bumps the
epoch at every end).
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kpax
from kpax.broker.broker import Broker
from kpax.testing.backends import select_backend, start_kafka
from kpax.testing.base import KafkaCluster
from kpax.testing.pytest_plugin import create_topic

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Names of the requests sent through broker handles (not Produce's raw path)."""
    seen: collections.Counter[str] = collections.Counter()
    original = Broker.request

    async def spy(self: Broker, request: Any, **kwargs: Any) -> Any:
        seen[type(request).__name__] += 1
        return await original(self, request, **kwargs)

    monkeypatch.setattr(Broker, "request", spy)
    return seen


@pytest.fixture(scope="module")
def kafka39() -> Iterator[KafkaCluster]:
    if select_backend() == "existing":
        pytest.skip("needs a Kafka 3.9 broker of its own; KPAX_TEST_BOOTSTRAP is shared")
    cluster = start_kafka(version="3.9.2")
    try:
        yield cluster
    finally:
        cluster.stop()


def _read_committed(bootstrap: str, topic: str, partitions: int, want: int) -> list[bytes]:
    with kpax.Consumer(
        bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
    ) as c:
        c.assign([kpax.TopicPartition(topic, p) for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        # past the wanted count, poll a little more: an aborted record must not show up
        extra = time.monotonic() + 1.0
        while time.monotonic() < deadline and (len(out) < want or time.monotonic() < extra):
            out.extend(r.value for r in c.poll(0.2))
            if len(out) < want:
                extra = time.monotonic() + 1.0
        return sorted(out)


def _run_transactions(cluster: KafkaCluster) -> tuple[str, str]:
    t = create_topic(cluster, 3)
    group = "txv2-" + uuid.uuid4().hex[:8]
    meta = kpax.ConsumerGroupMetadata(group)
    tp = kpax.TopicPartition(t, 0)
    with kpax.Producer(cluster.bootstrap, transactional_id="tx-" + uuid.uuid4().hex[:8]) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(30):
            p.send(t, b"commit-%02d" % i, partition=i % 3)
        p.send_offsets_to_transaction({tp: 10}, meta)
        p.commit_transaction()

        p.begin_transaction()
        for i in range(30):
            p.send(t, b"abort-%02d" % i, partition=i % 3)
        p.send_offsets_to_transaction({tp: 99}, meta)
        p.abort_transaction()

        p.begin_transaction()
        p.send(t, b"after-abort", partition=1)
        p.send_offsets_to_transaction({tp: 20}, meta)
        p.commit_transaction()
    return t, group


def _check(cluster: KafkaCluster, topic: str, group: str) -> None:
    want = sorted([b"commit-%02d" % i for i in range(30)] + [b"after-abort"])
    assert _read_committed(cluster.bootstrap, topic, 3, len(want)) == want
    with kpax.Admin(cluster.bootstrap) as admin:
        offsets = admin.list_group_offsets(group)
    assert offsets[kpax.TopicPartition(topic, 0)].offset == 20


@pytest.mark.kafka4
def test_transactions_v2_add_partitions_and_offsets_implicitly(kafka, sent):
    topic, group = _run_transactions(kafka)
    _check(kafka, topic, group)
    assert sent["AddPartitionsToTxnRequest"] == 0, sent
    assert sent["AddOffsetsToTxnRequest"] == 0, sent
    assert sent["TxnOffsetCommitRequest"] >= 3 and sent["EndTxnRequest"] >= 3, sent  # (+ retries)


def test_transactions_on_a_3_9_broker_add_partitions_and_offsets_first(kafka39, sent):
    topic, group = _run_transactions(kafka39)
    _check(kafka39, topic, group)
    assert sent["AddPartitionsToTxnRequest"] >= 3, sent
    assert sent["AddOffsetsToTxnRequest"] >= 3, sent
    assert sent["TxnOffsetCommitRequest"] >= 3 and sent["EndTxnRequest"] >= 3, sent  # (+ retries)


def test_on_a_3_9_broker_an_abort_after_a_failed_batch_bumps_the_epoch(kafka39, sent):
    """Transactions v1 end with the epoch unchanged, so after a batch of the
    transaction failed (here the broker refused it as too large; FakeKafka's test
    drops one unanswered, which leaves a sequence gap) the abort asks the
    coordinator for the next epoch with this producer's id and epoch (KIP-360),
    as the Java client does: sequences restart and the next transactions commit."""
    t = create_topic(kafka39, 1, config={"max.message.bytes": "2000"})
    tid = f"bump-{uuid.uuid4().hex[:8]}"
    with kpax.Producer(kafka39.bootstrap, transactional_id=tid, linger_ms=0) as p:
        p.init_transactions()
        assert not p.aio.txn.v2
        ident = p.aio.identity
        pid, epoch = ident.producer_id, ident.producer_epoch
        inits = sent["InitProducerIdRequest"]
        p.begin_transaction()
        p.send(t, b"aborted", partition=0).result(30)
        with pytest.raises(kpax.KafkaError, match=r"RECORD_TOO_LARGE|MESSAGE_TOO_LARGE"):
            p.send(t, b"x" * 5000, partition=0).result(30)
        p.abort_transaction()
        assert (ident.producer_id, ident.producer_epoch) == (pid, epoch + 1)
        assert sent["InitProducerIdRequest"] > inits  # (CONCURRENT_TRANSACTIONS: sent again)
        for i in range(3):
            p.begin_transaction()
            p.send(t, b"committed-%d" % i, partition=0)
            p.commit_transaction()
        assert ident.producer_epoch == epoch + 1  # (v1: commits keep it)
    assert _read_committed(kafka39.bootstrap, t, 1, 3) == [b"committed-%d" % i for i in range(3)]


@pytest.mark.kafka4
def test_transactions_v2_a_transaction_whose_first_batch_was_refused_aborts(kafka):
    """Kafka 4 (transactions v2) ends, with an epoch bump, an abort of a transaction
    that has nothing added on the broker (its first batch refused), also after a
    committed one; the next transaction commits. (FakeKafka's twin test checks the
    fake agrees.)"""
    t = create_topic(kafka, 1, config={"max.message.bytes": "2000"})
    with kpax.Producer(
        kafka.bootstrap, transactional_id=f"refused-{uuid.uuid4().hex[:8]}", linger_ms=0
    ) as p:
        p.init_transactions()
        assert p.aio.txn.v2
        p.begin_transaction()
        p.send(t, b"first", partition=0)
        p.commit_transaction()
        epoch = p.aio.identity.producer_epoch
        p.begin_transaction()
        with pytest.raises(kpax.KafkaError, match="MESSAGE_TOO_LARGE"):
            p.send(t, b"x" * 5000, partition=0).result(30)
        p.abort_transaction()
        assert p.aio.identity.producer_epoch == epoch + 1
        p.begin_transaction()
        p.send(t, b"next", partition=0)
        p.commit_transaction()
    assert _read_committed(kafka.bootstrap, t, 1, 2) == [b"first", b"next"]
