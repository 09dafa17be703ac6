"""The producer's metadata follows the cluster (real broker, auto-create on).

* Partitions added to a topic are used at the next metadata refresh, periodic
  or not, as the Java producer does: keyed records hash modulo the new count
  (the same partition every other producer picks), keyless ones reach the new
  partitions, and ``send(partition=5)`` refreshes the metadata before it fails.
  (The counts used to follow only error-triggered refreshes: 40 s after 3 -> 6,
  records still went to 0-2 and ``send(partition=5)`` failed.)
* A topic not sent to for ``metadata_max_idle_ms`` leaves the metadata
  requests, so a deleted topic is not re-created by auto-creation for the
  producer's whole life (and the request does not grow without bound).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import kpax
from kpax.producer.partitioner import partition_for_key
from tests.wait import eventually

pytestmark = pytest.mark.integration

#: Keys whose partition differs between 3 and 6 partitions.
MOVED = [k for k in (b"key-%d" % i for i in range(500)) if partition_for_key(k, 6) >= 3][:20]


def _grow(bootstrap: str, topic: str, total: int) -> None:
    """Add partitions and wait until the broker's metadata has them all led."""
    with kpax.Admin(bootstrap) as admin:
        admin.create_partitions({topic: total}).raise_for_errors()

        def led() -> bool:
            parts = admin.describe_topics([topic])[topic].partitions
            return len(parts) == total and all(p.leader >= 0 for p in parts)

        eventually(led, timeout=30)


def test_sync_producer_uses_partitions_added_at_the_next_periodic_refresh(kafka, topic):
    t = topic(partitions=3)
    with kpax.Producer(kafka.bootstrap, metadata_max_age_ms=500, linger_ms=0, batch_size=1024) as p:
        assert p.send(t, b"v", key=MOVED[0]).result(20).partition == partition_for_key(MOVED[0], 3)
        _grow(kafka.bootstrap, t, 6)

        def keyed_modulo_6() -> bool:
            metas = [f.result(20) for f in [p.send(t, b"v", key=k) for k in MOVED]]
            assert [m.partition for m in metas] == [partition_for_key(k, 6) for k in MOVED]
            return True

        eventually(keyed_modulo_6, timeout=15, interval=0.2)

        def keyless_reach_new() -> set[int]:
            futs = [p.send(t, b"x" * 200) for _ in range(200)]
            return {f.result(20).partition for f in futs} & {3, 4, 5}

        eventually(keyless_reach_new, timeout=15, interval=0.2)
        assert p.send(t, b"v", partition=5).result(20).partition == 5


async def test_asyncio_producer_uses_partitions_added_at_the_next_periodic_refresh(kafka, topic):
    t = topic(partitions=3)
    async with kpax.aio.Producer(
        kafka.bootstrap, metadata_max_age_ms=500, linger_ms=0, batch_size=1024
    ) as p:
        await p.send_and_wait(t, b"v", key=MOVED[0])
        await asyncio.to_thread(_grow, kafka.bootstrap, t, 6)
        deadline = time.monotonic() + 15
        while True:
            metas = await asyncio.gather(*[p.send_and_wait(t, b"v", key=k) for k in MOVED])
            if [m.partition for m in metas] == [partition_for_key(k, 6) for k in MOVED]:
                break
            assert time.monotonic() < deadline, [m.partition for m in metas]
            await asyncio.sleep(0.2)
        seen: set[int] = set()
        while not seen & {3, 4, 5}:
            assert time.monotonic() < deadline, seen
            futs = [await p.send(t, b"x" * 200) for _ in range(200)]
            seen |= {(await f).partition for f in futs}
        assert (await p.send_and_wait(t, b"v", partition=5)).partition == 5


def test_sync_send_to_a_new_partition_refreshes_first(kafka, topic):
    """With the periodic refresh minutes away, ``send(partition=5)`` after the
    topic grew refreshes the metadata itself (bounded by max_block_ms) and
    succeeds; a partition that does not exist still fails, after that one
    refresh, naming the count."""
    t = topic(partitions=3)
    with kpax.Producer(kafka.bootstrap, max_block_ms=20_000) as p:
        assert p.partitions_for(t) == [0, 1, 2]
        _grow(kafka.bootstrap, t, 6)
        md = p.send(t, b"v", partition=5).result(20)
        assert (md.topic, md.partition) == (t, 5)
        assert p.send_many(t, [b"a", b"b"], partition=4).result(20) == 2
        assert p.partitions_for(t) == list(range(6))
        t0 = time.monotonic()
        with pytest.raises(ValueError, match=r"has no partition 6 \(it has 6: 0..5\)"):
            p.send(t, b"v", partition=6)
        assert time.monotonic() - t0 < 5


async def test_asyncio_send_to_a_new_partition_refreshes_first(kafka, topic):
    t = topic(partitions=3)
    async with kpax.aio.Producer(kafka.bootstrap, max_block_ms=20_000) as p:
        assert await p.partitions_for(t) == [0, 1, 2]
        await asyncio.to_thread(_grow, kafka.bootstrap, t, 6)
        metas = await asyncio.gather(
            *[p.send_and_wait(t, b"%d" % i, partition=5) for i in range(20)]
        )
        assert [m.offset for m in metas] == list(range(20))  # in call order too
        with pytest.raises(ValueError, match="has no partition 9"):
            await p.send(t, b"v", partition=9)


# ------------------------------------------------------------ metadata_max_idle_ms


def _record_metadata_requests(producer: kpax.Producer) -> list[tuple[float, list[str] | None]]:
    """(time, topics asked for) of each Metadata request the producer makes from now on."""
    asked: list[tuple[float, list[str] | None]] = []
    cluster = producer.aio.cluster
    original = cluster._metadata_from

    async def recording(broker: Any, topics: list[str] | None, **kw: Any) -> Any:
        asked.append((time.monotonic(), None if topics is None else list(topics)))
        return await original(broker, topics, **kw)

    cluster._metadata_from = recording  # type: ignore[method-assign]
    return asked


def test_an_idle_topic_is_forgotten_and_once_deleted_stays_deleted(kafka, topic):
    t = topic()
    idle_ms = 300
    with (
        kpax.Producer(kafka.bootstrap, metadata_max_age_ms=1500, metadata_max_idle_ms=idle_ms) as p,
        kpax.Admin(kafka.bootstrap) as admin,
    ):
        asked = _record_metadata_requests(p)
        p.send(t, b"v").result(20)
        used = time.monotonic()
        eventually(lambda: time.monotonic() - used > 2 * idle_ms / 1000, timeout=5)
        admin.delete_topics([t]).raise_for_errors()
        eventually(lambda: t not in admin.list_topics(), timeout=15)
        deleted = time.monotonic()
        # two metadata refreshes later (auto-creation on): nothing named it, it is gone
        eventually(lambda: len([a for a in asked if a[0] > deleted]) >= 2, timeout=10)
        after = [topics for at, topics in asked if at > deleted]
        assert all(topics is not None and t not in topics for topics in after), after
        assert t not in admin.list_topics()
        assert t not in p.aio.cluster.interest
        assert t not in p.aio.num_partitions and t not in p.aio.accumulator.queues
        # a later send looks it up again (and auto-creation makes it, as for any new topic)
        assert p.send(t, b"again").result(20).offset == 0
        assert t in p.aio.cluster.interest


def test_a_forgotten_topic_goes_on_with_the_idempotent_sequence(kafka, topic):
    t = topic()
    with kpax.Producer(kafka.bootstrap, metadata_max_age_ms=200, metadata_max_idle_ms=200) as p:
        assert p.config["enable_idempotence"]
        first = [f.result(20).offset for f in [p.send(t, b"%d" % i) for i in range(10)]]
        eventually(lambda: t not in p.aio.cluster.interest, timeout=10)
        again = [f.result(20).offset for f in [p.send(t, b"%d" % i) for i in range(10, 20)]]
    assert first + again == list(range(20))  # no OUT_OF_ORDER_SEQUENCE_NUMBER, no gap


def test_metadata_max_idle_ms_is_checked(kafka):
    with pytest.raises(kpax.ConfigError, match="metadata_max_idle_ms"):
        kpax.Producer(kafka.bootstrap, metadata_max_idle_ms=0)
    with pytest.raises(kpax.ConfigError, match="metadata_max_idle_ms"):
        kpax.Producer(kafka.bootstrap, metadata_max_idle_ms="5 minutes")
    with kpax.Producer(kafka.bootstrap) as p:
        assert p.config["metadata_max_idle_ms"] == 300_000  # Java's default
