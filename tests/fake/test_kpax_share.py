"""kpax's share consumer (KIP-932) through FakeKafka: records shared by members
and each accepted once, release and reject, a lock that ends, the delivery
limit, close releasing at once, and the share-group admin calls."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest

import kpax
import kpax.aio
from kpax import AcknowledgeType
from kpax import TopicPartition as TP


def _group(fake, name: str, **configs: str) -> str:
    fake.call(
        lambda c: c.group_configs.setdefault(name, {}).update(
            {"share.auto.offset.reset": "earliest", **configs}
        )
    )
    return name


def _produce(fake, topic: str, n: int, partitions: int = 1) -> None:
    with kpax.Producer(fake.bootstrap, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=i % partitions)


def _read(c: kpax.ShareConsumer, done: Callable[[list], bool], timeout: float = 10) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while not done(got):
        assert time.monotonic() < deadline, f"read {len(got)} records"
        got.extend(c.poll(0.1))
    return got


@pytest.mark.fake_kafka(config={"group.share.partition.max.record.locks": "50"})
def test_members_share_partitions_and_accept_each_record_once(fake_kafka):
    fake_kafka.create_topic("s", 2)
    group = _group(fake_kafka, "sg")
    _produce(fake_kafka, "s", 400, partitions=2)
    a = kpax.ShareConsumer(fake_kafka.bootstrap, group_id=group, max_poll_records=20)
    b = kpax.ShareConsumer(fake_kafka.bootstrap, group_id=group, max_poll_records=20)
    try:
        a.subscribe(["s"])
        b.subscribe(["s"])
        seen: dict[tuple[int, int], int] = {}
        by_member = {"a": 0, "b": 0}
        deadline = time.monotonic() + 15
        while len(seen) < 400:
            assert time.monotonic() < deadline, len(seen)
            for name, c in (("a", a), ("b", b)):
                for r in c.poll(0.05):
                    seen[(r.partition, r.offset)] = seen.get((r.partition, r.offset), 0) + 1
                    by_member[name] += 1
        a.commit()
        b.commit()
    finally:
        a.close()
        b.close()
    assert max(seen.values()) == 1 and by_member["a"] > 0 and by_member["b"] > 0
    assert fake_kafka.call(lambda c: c.share_partitions.start_offsets(group)) == {
        ("s", 0): 200,
        ("s", 1): 200,
    }


def test_release_redelivers_and_reject_archives(fake_kafka):
    fake_kafka.create_topic("r", 1)
    group = _group(fake_kafka, "sr")
    _produce(fake_kafka, "r", 5)
    with kpax.ShareConsumer(
        fake_kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        c.subscribe(["r"])
        first = _read(c, lambda got: len(got) >= 5)
        for r in first:
            kind = {1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT}.get(r.offset)
            c.acknowledge(r, kind or AcknowledgeType.ACCEPT)
        again = _read(c, bool)
        assert [(r.offset, r.delivery_count) for r in again] == [(1, 2)]
        c.acknowledge(again[0])
        assert c.commit() == {TP("r", 0): None}
    assert fake_kafka.call(lambda c: c.share_partitions.start_offsets(group)) == {("r", 0): 5}


@pytest.mark.fake_kafka(config={"group.share.min.record.lock.duration.ms": "100"})
def test_lock_timeout_redelivers_then_the_delivery_limit_archives(fake_kafka):
    fake_kafka.create_topic("l", 1)
    group = _group(
        fake_kafka,
        "sl",
        **{"share.record.lock.duration.ms": "300", "share.delivery.count.limit": "2"},
    )
    _produce(fake_kafka, "l", 3)
    explicit = {"share_acknowledgement_mode": "explicit"}
    with (
        kpax.ShareConsumer(fake_kafka.bootstrap, group_id=group, **explicit) as holder,
        kpax.ShareConsumer(fake_kafka.bootstrap, group_id=group, **explicit) as other,
    ):
        holder.subscribe(["l"])
        assert len(_read(holder, lambda got: len(got) >= 3)) == 3  # held, never acknowledged
        other.subscribe(["l"])
        second = _read(other, lambda got: len(got) >= 3)
        assert {r.delivery_count for r in second} == {2}
        for r in second:
            other.acknowledge(r, AcknowledgeType.RELEASE)
        other.commit()
        _produce(fake_kafka, "l", 1)
        rest = _read(other, bool)
        assert [r.offset for r in rest] == [3]  # the three were archived at the limit


def test_close_releases_at_once(fake_kafka):
    fake_kafka.create_topic("c", 1)
    group = _group(fake_kafka, "sc")
    _produce(fake_kafka, "c", 4)
    explicit = {"share_acknowledgement_mode": "explicit"}
    with kpax.ShareConsumer(fake_kafka.bootstrap, group_id=group, **explicit) as first:
        first.subscribe(["c"])
        _read(first, lambda got: len(got) >= 4)
    start = time.monotonic()
    with kpax.ShareConsumer(fake_kafka.bootstrap, group_id=group, **explicit) as second:
        second.subscribe(["c"])
        again = _read(second, lambda got: len(got) >= 4)
    assert time.monotonic() - start < 10  # not the 30 s lock
    assert {r.delivery_count for r in again} == {2}


def test_share_group_admin(fake_kafka):
    fake_kafka.create_topic("ad", 2)
    _produce(fake_kafka, "ad", 10, partitions=2)
    with kpax.Admin(fake_kafka.bootstrap) as admin:
        res = kpax.ConfigResource(kpax.ConfigResourceType.GROUP, "sa")
        admin.incremental_alter_configs(
            {res: [kpax.AlterConfigOp("share.auto.offset.reset", "earliest")]}
        ).raise_for_errors()
        assert admin.describe_configs([res])[res]["share.auto.offset.reset"].value == "earliest"
        with kpax.ShareConsumer(fake_kafka.bootstrap, group_id="sa") as c:
            c.subscribe(["ad"])
            _read(c, lambda got: len(got) >= 10)
            c.commit()
            described = admin.describe_share_groups(["sa"])["sa"]
            assert len(described.members) == 1
        offsets = admin.list_share_group_offsets("sa")
        assert {tp: o.start_offset for tp, o in offsets.items() if o} == {
            TP("ad", 0): 5,
            TP("ad", 1): 5,
        }
        assert admin.alter_share_group_offsets("sa", {TP("ad", 0): 1}).ok
        assert admin.list_share_group_offsets("sa", [TP("ad", 0)])[TP("ad", 0)].start_offset == 1
        assert "sa" in {g.group_id for g in admin.list_groups()}


@contextlib.asynccontextmanager
async def _holding_one_record(
    fake,
) -> AsyncIterator[tuple[kpax.aio.ShareConsumer, kpax.ShareConsumerRecord]]:
    """An explicit-mode share consumer holding the one record of topic "s"."""
    fake.create_topic("s", 1)
    group = _group(fake, "sg")
    _produce(fake, "s", 1)
    async with kpax.aio.ShareConsumer(
        fake.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        await c.subscribe(["s"])
        deadline = time.monotonic() + 10
        got: list[kpax.ShareConsumerRecord] = []
        while not got:
            assert time.monotonic() < deadline, "no record read"
            got = await c.poll(0.1)
        (rec,) = got
        yield c, rec


async def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


async def test_a_commit_while_a_renew_waits_for_a_new_connection_waits_for_it(fake_kafka):
    """A RENEW sent when the fetch connection is gone waits for a new one (its
    ApiVersions held back here); a commit meanwhile must wait for that RENEW's
    answer, not return at once with nothing (it once found the RENEW neither
    queued nor in flight)."""
    async with _holding_one_record(fake_kafka) as (c, rec):
        assert c.fetcher is not None
        fetch_broker = c.fetcher.cluster.fetch_broker(fake_kafka.leader("s", 0))
        fake_kafka.inject("ApiVersions", delay_ms=300)
        fake_kafka.drop_connections()
        await _until(lambda: fetch_broker._conn is None or fetch_broker._conn.closed, "closed")
        c.acknowledge(rec, AcknowledgeType.RENEW)
        # the RENEW (nothing else) opens the fetch connection again, and waits for it
        await _until(lambda: fetch_broker._connecting is not None, "no reconnection")
        assert await c.commit() == {TP("s", 0): None}


async def test_acknowledgements_failed_with_their_session_fail_the_commit_waiting_for_them(
    fake_kafka,
):
    """Acknowledgements queued while a ShareFetch is in flight, whose connection
    then drops, fail with the share session: the commit waiting for them gets
    that error for their partition (it once got an empty result)."""
    async with _holding_one_record(fake_kafka) as (c, rec):
        c.acknowledge(rec, AcknowledgeType.RENEW)  # held again: the next poll may fetch
        assert await c.commit() == {TP("s", 0): None}
        fetch = fake_kafka.inject("ShareFetch", delay_ms=300, drop="after")
        polling = asyncio.ensure_future(c.poll(2))
        await _until(lambda: fetch.seen > 0, "no ShareFetch")
        c.acknowledge(rec, AcknowledgeType.ACCEPT)
        result = await c.commit()
        assert isinstance(result.get(TP("s", 0)), kpax.KafkaError), result
        assert await polling == []
