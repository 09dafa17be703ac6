"""What users of confluent-kafka, aiokafka and kafka-python write, against a real
broker: the asyncio face's plain ``seek``/``subscribe``, transactions as context
managers and ``await begin_transaction()``, a consumer without a group reading
every partition, ``next(consumer)``, dotted option names with string values."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.wait import eventually

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    with kpax.Producer(bootstrap) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=i % partitions)
        p.flush(30)


def test_aio_seek_and_subscribe_work_without_await(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    """aiokafka's ``consumer.seek(tp, 5)`` (no await) positions the consumer;
    earlier it was a coroutine silently never run (records from ``latest``)."""
    name = topic(1)
    _produce(kafka.bootstrap, name, 10)
    tp = TP(name, 0)

    async def main() -> list[int]:
        async with kpax.aio.Consumer(kafka.bootstrap) as c:
            await c.assign([tp])
            c.seek(tp, 5)
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                got += [r.offset for r in await c.poll(1.0)]
            await c.seek(tp, 8)  # awaiting the result works too (earlier versions' way)
            c.seek_to_beginning(tp)
            assert await c.position(tp) == 0
            return got

    assert asyncio.run(main()) == [5, 6, 7, 8, 9]


def test_aio_group_subscribe_is_a_plain_method(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    name = topic(2)
    _produce(kafka.bootstrap, name, 20, partitions=2)

    async def main() -> int:
        async with kpax.aio.Consumer(
            kafka.bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest"
        ) as c:
            c.subscribe([name])  # no await, as aiokafka's
            got = 0
            deadline = time.monotonic() + 60
            while got < 20 and time.monotonic() < deadline:
                got += len(await c.poll(1.0))
            return got

    assert asyncio.run(main()) == 20


def test_consumer_without_group_reads_every_partition_of_its_topics(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    """kafka-python's ``KafkaConsumer("topic", bootstrap_servers=...)`` without a
    group_id reads all partitions (no commits); so does kpax.Consumer, and
    ``next(consumer)`` returns one record at a time."""
    name = topic(3)
    _produce(kafka.bootstrap, name, 30, partitions=3)
    with kpax.Consumer(
        kafka.bootstrap, name, auto_offset_reset="earliest", consumer_timeout_ms=5000
    ) as c:
        assert c.assignment() == {TP(name, p) for p in range(3)}
        assert c.subscription() == {name}
        first = next(c)
        rest = [r.value for r in c]  # ends after consumer_timeout_ms without records
    assert sorted([first.value, *rest], key=int) == [b"%d" % i for i in range(30)]
    with pytest.raises(StopIteration):
        next(c)  # closed

    async def aio() -> set[TP]:
        async with kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
            await c.subscribe([name])  # the partitions are looked up: await to see errors
            return c.assignment()

    assert asyncio.run(aio()) == {TP(name, p) for p in range(3)}


def test_failed_consumer_constructor_leaves_no_thread(kafka) -> None:  # type: ignore[no-untyped-def]
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(kpax.errors.InvalidTopicError):
        kpax.Consumer(kafka.bootstrap, "no good!")
    with pytest.raises(kpax.errors.ConfigError):
        kpax.Consumer(kafka.bootstrap, "t", group_id="g", **{"enable.auto.commit": "perhaps"})
    eventually(lambda: {t.ident for t in threading.enumerate()} <= before)


def test_transaction_context_managers(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    name = topic(1)
    tid = f"txn-{uuid.uuid4().hex[:8]}"
    with kpax.Producer(kafka.bootstrap, transactional_id=tid) as p:
        p.init_transactions()
        with p.transaction():
            p.send(name, b"kept")
        with pytest.raises(RuntimeError), p.transaction():
            p.send(name, b"dropped")
            raise RuntimeError("processing failed")
        with p.transaction():  # the producer can go on
            p.send(name, b"kept too")

    async def aio() -> None:
        async with kpax.aio.Producer(kafka.bootstrap, transactional_id=tid + "a") as ap:
            await ap.init_transactions()
            await ap.begin_transaction()  # awaitable, as aiokafka's and confluent's asyncio
            await ap.send(name, b"aio kept")
            await ap.commit_transaction()
            async with ap.transaction():
                await ap.send(name, b"aio kept too")
            with pytest.raises(ValueError):
                async with ap.transaction():
                    await ap.send(name, b"aio dropped")
                    raise ValueError("no")

    asyncio.run(aio())
    tp = TP(name, 0)
    with kpax.Consumer(kafka.bootstrap, isolation_level="read_committed") as c:
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            got += [r.value for r in c.poll(1.0)]
    assert got == [b"kept", b"kept too", b"aio kept", b"aio kept too"]


def test_dotted_names_with_string_values(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    """confluent-kafka's examples' configuration, as written there."""
    name = topic(1)
    with kpax.Producer(
        **{
            "bootstrap.servers": kafka.bootstrap,
            "acks": "all",
            "linger.ms": "5",
            "message.timeout.ms": "60000",
            "enable.idempotence": "true",
        }
    ) as p:
        assert p.config["delivery_timeout_ms"] == 60000
        assert p.config["linger_ms"] == 5
        p.send(name, b"x").result(30)
    with kpax.Consumer(
        **{
            "bootstrap.servers": kafka.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": "false",
            "auto.offset.reset": "smallest",
            "session.timeout.ms": "6000",
        }
    ) as c:
        assert c.aio.settings.enable_auto_commit is False
        c.subscribe([name])
        eventually(lambda: [r.value for r in c.poll(0.5)] == [b"x"], timeout=60)
    # confluent-kafka's shape: the configuration dict as the first argument
    conf = {"bootstrap.servers": kafka.bootstrap, "auto.offset.reset": "earliest"}
    with kpax.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": "0"}) as p:
        assert p.config["linger_ms"] == 0
    with kpax.Consumer(conf, name) as c:
        assert c.subscription() == {name}
    with kpax.Admin({"bootstrap.servers": kafka.bootstrap}) as admin:
        assert name in admin.list_topics()
