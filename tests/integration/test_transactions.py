"""Transactions against a real broker: commit, abort, fencing, offsets in a
transaction, timeouts, misuse, and the asyncio face."""

from __future__ import annotations

import time
import uuid

import pytest

import kpax
from kpax.errors import IllegalStateError, KafkaError, ProducerFencedError
from tests.wait import eventually

pytestmark = pytest.mark.integration


def _tid() -> str:
    return f"txn-{uuid.uuid4().hex[:10]}"


def _read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    tps = [kpax.TopicPartition(topic, p) for p in range(partitions)]
    out: list[bytes] = []
    with kpax.Consumer(bootstrap, isolation_level=isolation) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # the last stable offset for read_committed
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            out.extend(r.value for r in consumer.poll(timeout=0.5))
    return sorted(out)


def test_commit_and_abort_visibility(kafka, topic):
    name = topic(2)
    with kpax.Producer(kafka.bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(10):
            producer.send(name, b"committed-%d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(5):
            producer.send(name, b"aborted-%d" % i, partition=i % 2)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(name, b"last", partition=0)
        producer.commit_transaction()
    committed = _read(kafka.bootstrap, name, 2, "read_committed")
    assert committed == sorted([b"committed-%d" % i for i in range(10)] + [b"last"])
    everything = _read(kafka.bootstrap, name, 2, "read_uncommitted")
    assert sum(v.startswith(b"aborted-") for v in everything) == 5


def test_zombie_is_fenced(kafka, topic):
    name, tid = topic(1), _tid()
    old = kpax.Producer(kafka.bootstrap, transactional_id=tid)
    new = kpax.Producer(kafka.bootstrap, transactional_id=tid)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(name, b"from the zombie")
        old.flush()
        new.init_transactions()  # fences the old one and aborts its transaction
        with pytest.raises(ProducerFencedError, match=tid):
            old.send(name, b"more").result(30)
            old.commit_transaction()
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()
        new.begin_transaction()
        new.send(name, b"from the new one")
        new.commit_transaction()
    finally:
        old.close(5)
        new.close(5)
    assert _read(kafka.bootstrap, name, 1, "read_committed") == [b"from the new one"]


def test_offsets_in_a_transaction(kafka, topic):
    source, sink, group = topic(1), topic(1), f"g-{uuid.uuid4().hex[:8]}"
    with kpax.Producer(kafka.bootstrap) as plain:
        for i in range(20):
            plain.send(source, b"in-%d" % i)
    with (
        kpax.Consumer(
            kafka.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        ) as consumer,
        kpax.Producer(kafka.bootstrap, transactional_id=_tid()) as producer,
    ):
        consumer.subscribe([source])
        producer.init_transactions()
        got: list[kpax.ConsumerRecord] = []
        eventually(lambda: got.extend(consumer.poll(timeout=1)) or len(got) >= 20, timeout=30)
        tp = kpax.TopicPartition(source, 0)
        # Aborted: the offsets are not committed.
        producer.begin_transaction()
        producer.send(sink, b"out")
        producer.send_offsets_to_transaction({tp: 10}, consumer.group_metadata())
        producer.abort_transaction()
        with kpax.Admin(kafka.bootstrap) as admin:
            assert admin.list_group_offsets(group) == {}
            producer.begin_transaction()
            producer.send(sink, b"out")
            producer.send_offsets_to_transaction({tp: 20}, consumer.group_metadata())
            producer.commit_transaction()
            eventually(
                lambda: admin.list_group_offsets(group).get(tp) == kpax.OffsetAndMetadata(20)
            )


def test_misuse_is_a_clear_error(kafka, topic):
    name = topic(1)
    with kpax.Producer(kafka.bootstrap, transactional_id=_tid()) as producer:
        with pytest.raises(IllegalStateError, match="init"):
            producer.begin_transaction()
        producer.init_transactions()
        with pytest.raises(IllegalStateError, match="send"):
            producer.send(name, b"outside a transaction")
        with pytest.raises(IllegalStateError):
            producer.commit_transaction()
        producer.begin_transaction()
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        producer.abort_transaction()
    with (
        kpax.Producer(kafka.bootstrap) as plain,
        pytest.raises(IllegalStateError, match="transactional_id"),
    ):
        plain.init_transactions()


def test_transaction_timeout_aborts_on_the_broker(kafka, topic):
    # kpax.testing's brokers look for timed-out transactions every 0.5 s
    # (transaction.abort.timed.out.transaction.cleanup.interval.ms)
    cluster = kafka
    name = topic(1, cluster=cluster)
    with kpax.Producer(
        cluster.bootstrap, transactional_id=_tid(), transaction_timeout_ms=1000
    ) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(name, b"too slow").result(30)
        # the broker aborts the expired transaction (its abort marker moves the last
        # stable offset past it) and bumps the epoch
        tp = kpax.TopicPartition(name, 0)
        with kpax.Admin(cluster.bootstrap) as admin:
            eventually(
                lambda: (
                    admin.list_offsets({tp: "latest"}, isolation_level="read_committed")[tp].offset
                    >= 2
                ),
                timeout=60,
            )
        with pytest.raises(KafkaError):
            producer.commit_transaction()
    assert _read(cluster.bootstrap, name, 1, "read_committed") == []


async def test_asyncio_transactions(kafka, topic):
    name = topic(1)
    async with kpax.aio.Producer(kafka.bootstrap, transactional_id=_tid()) as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send(name, b"async")
        await producer.commit_transaction()
    assert _read(kafka.bootstrap, name, 1, "read_committed") == [b"async"]


def test_a_rebalance_while_processing_fences_the_transactions_offsets(kafka, topic):
    """The fake's check on Kafka: offsets of records handed out before the group
    rebalanced in the background are refused (IllegalGenerationError), not
    committed over the new owner's."""
    from tests.fake.test_background_rebalance_fencing import check_transaction_fenced

    check_transaction_fenced(kafka.bootstrap, topic(2), f"g-{uuid.uuid4().hex[:8]}")
