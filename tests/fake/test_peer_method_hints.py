"""A peer's method name (confluent-kafka's produce, aiokafka's getmany, the
admin's list_consumer_groups...) on a kpax client: the AttributeError names
what to call in kpax instead of only saying the attribute is missing."""

from __future__ import annotations

import asyncio

import pytest

import kpax
from kpax.testing.fake import FakeKafka


def test_sync_clients_name_the_kpax_method(fake_kafka: FakeKafka) -> None:
    with kpax.Producer(fake_kafka.bootstrap) as p:
        with pytest.raises(AttributeError, match=r"'produce'.*in kpax, send\(topic"):
            p.produce("t", b"x")
        with pytest.raises(AttributeError, match=r"has no attribute 'no_such'$"):
            p.no_such  # noqa: B018
        assert not hasattr(p, "poll")
    with (
        kpax.Consumer(fake_kafka.bootstrap) as c,
        pytest.raises(AttributeError, match=r"in kpax, group_metadata\(\)"),
    ):
        c.consumer_group_metadata()
    with (
        kpax.Admin(fake_kafka.bootstrap) as a,
        pytest.raises(AttributeError, match=r"in kpax, list_groups\(\)"),
    ):
        a.list_consumer_groups()


def test_asyncio_clients_name_the_kpax_method(fake_kafka: FakeKafka) -> None:
    fake_kafka.create_topic("gm", 2)

    async def main() -> None:
        async with kpax.aio.Producer(fake_kafka.bootstrap) as p:
            for i in range(3):
                await p.send_and_wait("gm", b"%d" % i, partition=i % 2)
        async with kpax.aio.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c:
            await c.assign([kpax.TopicPartition("gm", 0), kpax.TopicPartition("gm", 1)])
            got: dict[kpax.TopicPartition, list[bytes | None]] = {}
            while sum(len(v) for v in got.values()) < 3:  # aiokafka's shape: by partition
                for tp, recs in (await c.getmany(timeout_ms=1000)).items():
                    got.setdefault(tp, []).extend(r.value for r in recs)
            assert got == {
                kpax.TopicPartition("gm", 0): [b"0", b"2"],
                kpax.TopicPartition("gm", 1): [b"1"],
            }
            with pytest.raises(AttributeError, match=r"in kpax, group_metadata\(\)"):
                c.consumer_group_metadata()
        async with kpax.aio.Producer(fake_kafka.bootstrap) as p:
            with pytest.raises(AttributeError, match=r"in kpax, close\(\)"):
                await p.stop()
        async with kpax.aio.Admin(fake_kafka.bootstrap) as a:
            with pytest.raises(AttributeError, match=r"describe_groups\(group_ids\)"):
                await a.describe_consumer_groups(["g"])

    asyncio.run(main())


def test_kafka_python_poll_and_options_say_what_kpax_takes(fake_kafka: FakeKafka) -> None:
    with (
        kpax.Consumer(fake_kafka.bootstrap) as c,
        pytest.raises(TypeError, match=r"timeout= in seconds.*poll\(timeout=1.0\)"),
    ):
        c.poll(timeout_ms=1000)
    with pytest.raises(kpax.ConfigError, match="asks each broker for its API versions"):
        kpax.Producer(fake_kafka.bootstrap, api_version=(2, 5, 0))
    with pytest.raises(kpax.ConfigError, match="top-level options"):
        kpax.Consumer({"bootstrap.servers": fake_kafka.bootstrap, "default.topic.config": {}})
