"""Nothing waits behind a long-poll Fetch: a broker handles one request per
connection at a time, so the consumer's fetches have a connection of their
own and commits, heartbeats and offset requests go on the other one.

Real broker: the consumer's fetch waits ``fetch_max_wait_ms`` (5 s, 20 s) on
an idle partition while the test commits, looks up offsets and stays in its
group."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

import pytest

import kpax
from tests.wait import eventually

pytestmark = pytest.mark.integration


def _fill(bootstrap: str, topic: str, n: int) -> None:
    with kpax.Producer(bootstrap) as p:
        p.send_many(topic, [b"r%d" % i for i in range(n)]).result(30)


def _long_poll_outstanding(core: kpax.aio.Consumer) -> bool:
    """A Fetch is in flight on a fetch connection of this consumer."""
    cluster = core.cluster
    fetch = cluster._fetch_brokers.values()
    return any(b._conn is not None and b._conn.in_flight > 0 for b in fetch)


@pytest.mark.parametrize(
    "protocol", ["classic", pytest.param("consumer", marks=pytest.mark.kafka4)]
)
def test_commit_returns_at_once_while_a_5s_long_poll_is_outstanding(kafka, topic, protocol):
    t = topic()
    _fill(kafka.bootstrap, t, 10)
    with kpax.Consumer(
        kafka.bootstrap,
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        group_protocol=protocol,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=5000,
    ) as c:
        c.subscribe([t])
        got: list[bytes] = []
        eventually(lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) == 10, 60)
        times = []
        tp = kpax.TopicPartition(t, 0)
        for i in range(5):
            eventually(lambda: _long_poll_outstanding(c.aio), 10, 0.005)
            t0 = time.monotonic()
            c.commit({tp: 10 - i})  # a new offset each time: each one goes to the broker
            times.append(time.monotonic() - t0)
            assert c.committed([tp])[tp].offset == 10 - i
        # the fetch is still waiting on the broker (no records came): it did not
        # have to finish for the commits to be answered
        assert _long_poll_outstanding(c.aio)
    print(f"\ncommit latency with a 5 s long poll outstanding ({protocol}): {times}")
    assert statistics.median(times) < 0.1, times
    assert max(times) < 1.0, times


def test_asyncio_commit_and_offset_lookups_do_not_wait_for_the_long_poll(kafka, topic):
    t = topic()
    _fill(kafka.bootstrap, t, 5)

    async def main() -> list[float]:
        async with kpax.aio.Consumer(
            kafka.bootstrap,
            group_id=f"g-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=5000,
        ) as c:
            await c.subscribe([t])
            n = 0
            while n < 5:
                n += len(await c.poll(timeout=1.0))
            tp = kpax.TopicPartition(t, 0)
            times = []
            for i in range(5):
                while not _long_poll_outstanding(c):  # noqa: ASYNC110 - state of another task
                    await asyncio.sleep(0.005)
                t0 = time.monotonic()
                await c.commit({tp: 5 - i})  # a new offset each time
                await c.end_offsets([tp])
                times.append(time.monotonic() - t0)
            return times

    times = asyncio.run(asyncio.wait_for(main(), 120))
    assert statistics.median(times) < 0.1, times


def test_idle_member_with_a_long_fetch_wait_keeps_its_group(kafka, topic):
    """fetch_max_wait_ms (20 s) above session_timeout_ms (10 s): heartbeats do
    not queue behind the fetch, so the idle member is not evicted and its
    commit succeeds."""
    t = topic()
    _fill(kafka.bootstrap, t, 3)
    with kpax.Consumer(
        kafka.bootstrap,
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        group_protocol="classic",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=20_000,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=1000,
    ) as c:
        c.subscribe([t])
        got: list[bytes] = []
        eventually(lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) == 3, 60)
        member = c.group_metadata().member_id
        # idle for longer than the session timeout, a fetch waiting all along
        idle_until = time.monotonic() + 12
        while time.monotonic() < idle_until:
            assert c.poll(1.0) == []
        c.commit()
        assert c.group_metadata().member_id == member
        assert c.assignment() == {kpax.TopicPartition(t, 0)}
