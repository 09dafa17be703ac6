"""Admin calls that take names: a bare name is one name, never its letters
(``delete_topics("orders")`` once tried to delete topics ``o``, ``r``, ``d``...)."""

from __future__ import annotations

import asyncio

import kpax
from kpax.testing.fake import FakeKafka


def _setup(fake: FakeKafka) -> None:
    for name in ("orders", "o", "r", "d", "e", "s"):
        fake.create_topic(name, 1)


def test_a_bare_topic_name_is_one_topic_sync(fake_kafka: FakeKafka) -> None:
    _setup(fake_kafka)
    with kpax.Admin(fake_kafka.bootstrap) as admin:
        described = admin.describe_topics("orders")
        assert list(described) == ["orders"]
        admin.delete_topics("orders")
    assert set(fake_kafka.topics()) >= {"o", "r", "d", "e", "s"}
    assert "orders" not in fake_kafka.topics()


def test_a_bare_name_is_one_name_asyncio(fake_kafka: FakeKafka) -> None:
    _setup(fake_kafka)

    async def main() -> None:
        async with kpax.aio.Admin(fake_kafka.bootstrap) as admin:
            assert list(await admin.describe_topics("orders")) == ["orders"]
            groups = await admin.describe_groups("gg")
            assert list(groups) == ["gg"]
            await admin.delete_topics("orders")

    asyncio.run(main())
    assert set(fake_kafka.topics()) >= {"o", "r", "d", "e", "s"}
    assert "orders" not in fake_kafka.topics()
