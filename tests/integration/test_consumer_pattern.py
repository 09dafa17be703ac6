"""Pattern subscriptions against a real broker: ``subscribe(pattern=...)`` under the
classic protocol (matched in the client against every metadata refresh) and
KIP-848 (the regex sent to the broker), sync and asyncio faces. Topics created
later that match join without re-subscribing; a deleted one leaves; others are
never read. ``metadata_max_age_ms=500`` so the client sees new topics soon."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest

import kpax
from kpax.testing.pytest_plugin import create_topic
from tests.integration.test_consumer import produce
from tests.integration.test_consumer_group import FAST, gid, poll_until
from tests.wait import eventually

pytestmark = pytest.mark.integration

QUICK = {**FAST, "metadata_max_age_ms": 500, "enable_auto_commit": False}


def prefix() -> str:
    return "p" + uuid.uuid4().hex[:8]


def topics_of(recs: dict[int, list[kpax.ConsumerRecord]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in recs.values():
        for r in v:
            out[r.topic] = out.get(r.topic, 0) + 1
    return out


def assigned_topics(c: kpax.Consumer) -> set[str]:
    return {tp.topic for tp in c.assignment()}


def test_classic_pattern_reads_matching_topics_new_ones_join_deleted_ones_leave(kafka):
    p = prefix()
    a, b = (create_topic(kafka, 2, name=f"{p}-orders-{x}") for x in "ab")
    # not matched: another name, and one the regex only finds inside (fullmatch)
    others = [create_topic(kafka, 1, name=n) for n in (f"{p}-payments", f"x{p}-orders-c")]
    for t in (a, b, *others):
        produce(kafka.bootstrap, t, 20, partitions=2 if t in (a, b) else 1)
    c = kpax.Consumer(kafka.bootstrap, group_id=gid(), **QUICK)
    recs: dict[int, list[kpax.ConsumerRecord]] = {}
    try:
        c.subscribe(pattern=f"{p}-orders-.*")
        poll_until(
            [c], lambda: topics_of(recs).get(a) == 20 and topics_of(recs).get(b) == 20, sink=recs
        )
        assert c.subscription() == {a, b}
        assert assigned_topics(c) == {a, b}
        # a topic created afterwards that matches joins, without subscribing again
        late = create_topic(kafka, 1, name=f"{p}-orders-late")
        produce(kafka.bootstrap, late, 7)
        poll_until([c], lambda: topics_of(recs).get(late) == 7, sink=recs)
        assert c.subscription() == {a, b, late}
        # a deleted matched topic leaves the subscription and the assignment
        with kpax.Admin(kafka.bootstrap) as admin:
            admin.delete_topics([b]).raise_for_errors()
        poll_until([c], lambda: b not in assigned_topics(c) and assigned_topics(c), sink=recs)
        assert c.subscription() == {a, late}
        assert assigned_topics(c) == {a, late}
        assert not set(topics_of(recs)) & set(others)
        # unsubscribe clears it; subscribing by names works again
        c.unsubscribe()
        assert c.subscription() == set() and c.assignment() == set()
        c.subscribe([others[0]])
        poll_until([c], lambda: topics_of(recs).get(others[0]) == 20, sink=recs)
        assert c.subscription() == {others[0]}
    finally:
        c.close()


async def test_classic_pattern_asyncio_face(kafka):
    p = prefix()
    a, b, other = (create_topic(kafka, 1, name=f"{p}-{x}") for x in ("ev-1", "ev-2", "other"))
    for t in (a, b, other):
        produce(kafka.bootstrap, t, 10)
    got: dict[str, int] = {}
    async with kpax.aio.Consumer(kafka.bootstrap, group_id=gid(), **QUICK) as c:
        await c.subscribe(re.compile(re.escape(p) + r"-ev-\d"))  # a compiled pattern, positional

        async def read_until(done) -> None:
            deadline = time.monotonic() + 30
            while not done():
                assert time.monotonic() < deadline, f"read only {got}"
                for r in await c.poll(0.1):
                    got[r.topic] = got.get(r.topic, 0) + 1

        await read_until(lambda: got.get(a) == 10 and got.get(b) == 10)
        assert c.subscription() == {a, b}
        late = await asyncio.to_thread(create_topic, kafka, 1, name=f"{p}-ev-3")
        await asyncio.to_thread(produce, kafka.bootstrap, late, 4)
        await read_until(lambda: got.get(late) == 4)
        assert c.subscription() == {a, b, late}
        assert other not in got
        await c.unsubscribe()
        assert c.subscription() == set()


@pytest.fixture(scope="module")
def kafka848(kafka):
    """The session's broker: kpax.testing's local brokers have KIP848_BROKER_CONFIG's
    settings and re-resolve regexes every 10 s (the broker's lowest; it re-resolves
    at most that often anyway)."""
    return kafka


KIP848 = {
    k: v for k, v in QUICK.items() if k not in ("session_timeout_ms", "heartbeat_interval_ms")
}


@pytest.mark.kafka4
def test_kip848_pattern_is_resolved_by_the_broker_and_new_topics_join(kafka848):
    p = prefix()
    a, b = (create_topic(kafka848, 2, name=f"{p}-orders-{x}") for x in "ab")
    other = create_topic(kafka848, 1, name=f"{p}-payments")
    for t in (a, b, other):
        produce(kafka848.bootstrap, t, 20, partitions=2 if t != other else 1)
    c = kpax.Consumer(kafka848.bootstrap, group_id=gid(), group_protocol="consumer", **KIP848)
    recs: dict[int, list[kpax.ConsumerRecord]] = {}
    try:
        c.subscribe(pattern=f"{p}-orders-.*")
        poll_until(
            [c], lambda: topics_of(recs).get(a) == 20 and topics_of(recs).get(b) == 20, sink=recs
        )
        assert c.subscription() == {a, b} == assigned_topics(c)
        late = create_topic(kafka848, 1, name=f"{p}-orders-late")
        produce(kafka848.bootstrap, late, 7)
        # the broker re-resolves the regex when its metadata changed, at most every 10 s
        poll_until([c], lambda: topics_of(recs).get(late) == 7, timeout=45, sink=recs)
        assert c.subscription() == {a, b, late}
        assert other not in topics_of(recs)
        c.unsubscribe()
        assert c.subscription() == set() and c.assignment() == set()
        c.subscribe([other])
        poll_until([c], lambda: topics_of(recs).get(other) == 20, sink=recs)
    finally:
        c.close()


@pytest.mark.kafka4
async def test_kip848_pattern_asyncio_face(kafka848):
    p = prefix()
    a, b, other = (create_topic(kafka848, 1, name=f"{p}-{x}") for x in ("ev-1", "ev-2", "zz"))
    for t in (a, b, other):
        produce(kafka848.bootstrap, t, 10)
    got: dict[str, int] = {}
    async with kpax.aio.Consumer(
        kafka848.bootstrap, group_id=gid(), group_protocol="consumer", **KIP848
    ) as c:
        await c.subscribe(pattern=p + r"-ev-\d")
        deadline = time.monotonic() + 30
        while not (got.get(a) == 10 and got.get(b) == 10):
            assert time.monotonic() < deadline, f"read only {got}"
            for r in await c.poll(0.1):
                got[r.topic] = got.get(r.topic, 0) + 1
        assert c.subscription() == {a, b}
        assert other not in got


@pytest.mark.parametrize(
    "protocol", ["classic", pytest.param("consumer", marks=pytest.mark.kafka4)]
)
def test_internal_topics_never_match(kafka848, protocol):
    p = prefix()
    t = create_topic(kafka848, 1, name=f"{p}-x")
    produce(kafka848.bootstrap, t, 5)
    kw = KIP848 if protocol == "consumer" else QUICK
    c = kpax.Consumer(kafka848.bootstrap, group_id=gid(), group_protocol=protocol, **kw)
    recs: dict[int, list[kpax.ConsumerRecord]] = {}
    try:
        c.committed([kpax.TopicPartition(t, 0)])  # FindCoordinator: __consumer_offsets exists
        with kpax.Admin(kafka848.bootstrap) as admin:
            eventually(lambda: "__consumer_offsets" in admin.list_topics(internal=True))
        # the broker's regex (KIP-848) matches __consumer_offsets too: kpax leaves it out
        c.subscribe(pattern=f"__consumer_offsets|{p}-x")
        poll_until([c], lambda: topics_of(recs).get(t) == 5, sink=recs)
        assert assigned_topics(c) == {t} and c.subscription() == {t}
    finally:
        c.close()


def test_classic_deleted_topic_leaves_promptly_with_auto_commit(kafka):
    # The rebalance after a deletion commits the revoked partitions' positions
    # first (auto-commit); a commit for the deleted topic would be retried until
    # default_api_timeout_ms (60 s), holding the rebalance up.
    p = prefix()
    a, b = (create_topic(kafka, 1, name=f"{p}-{x}") for x in "ab")
    for t in (a, b):
        produce(kafka.bootstrap, t, 10)
    kw = {**QUICK, "enable_auto_commit": True, "auto_commit_interval_ms": 600_000}
    c = kpax.Consumer(kafka.bootstrap, group_id=gid(), **kw)
    recs: dict[int, list[kpax.ConsumerRecord]] = {}
    try:
        c.subscribe(pattern=f"{p}-.*")
        poll_until(
            [c], lambda: topics_of(recs).get(a) == 10 and topics_of(recs).get(b) == 10, sink=recs
        )
        with kpax.Admin(kafka.bootstrap) as admin:
            admin.delete_topics([b]).raise_for_errors()
        poll_until([c], lambda: assigned_topics(c) == {a}, timeout=20, sink=recs)
        assert c.committed([kpax.TopicPartition(a, 0)])[kpax.TopicPartition(a, 0)].offset == 10
    finally:
        c.close()
