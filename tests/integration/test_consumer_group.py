"""Consumer groups against a real broker: the classic protocol (range,
roundrobin, sticky, cooperative-sticky, static membership, listeners,
commits, max_poll_interval_ms) and KIP-848 (group_protocol="consumer")."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.integration.test_consumer import produce, values

pytestmark = pytest.mark.integration

FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300, "auto_offset_reset": "earliest"}


def gid() -> str:
    return "g-" + uuid.uuid4().hex[:10]


class Recorder(kpax.ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TP]]] = []

    def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self.events.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[TP]) -> None:
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost: set[TP]) -> None:
        self.events.append(("lost", set(lost)))

    def revoked(self) -> set[TP]:
        return set().union(*[s for e, s in self.events if e in ("revoked", "lost")])


def poll_until(
    consumers: list[kpax.Consumer], cond: Callable[[], bool], timeout: float = 30.0, sink=None
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        for c in consumers:
            recs = c.poll(0.05)
            if sink is not None:
                sink.setdefault(id(c), []).extend(recs)


def balanced(consumers: list[kpax.Consumer], total: int) -> Callable[[], bool]:
    def cond() -> bool:
        sets = [c.assignment() for c in consumers]
        union = set().union(*sets)
        return len(union) == total and sum(len(s) for s in sets) == total and all(sets)

    return cond


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_three_members_share_six_partitions_and_see_every_record_once(kafka, topic, strategy):
    t = topic(partitions=6)
    produce(kafka.bootstrap, t, 6000, partitions=6)
    g = gid()
    cs = [
        kpax.Consumer(kafka.bootstrap, group_id=g, partition_assignment_strategy=strategy, **FAST)
        for _ in range(3)
    ]
    try:
        for c in cs:
            c.subscribe([t])
        seen: dict[int, list[kpax.ConsumerRecord]] = {}
        poll_until(cs, balanced(cs, 6), sink=seen)
        assert [len(c.assignment()) for c in cs] == [2, 2, 2]
        at_balance = {id(c): len(seen.get(id(c), [])) for c in cs}
        poll_until(cs, lambda: sum(len(v) for v in seen.values()) >= 6000, sink=seen)
        for c in cs:
            seen.setdefault(id(c), []).extend(c.poll(0.3))
        allv = [int(r.value) for v in seen.values() for r in v]
        # records read before the split were committed on revocation: still once
        assert sorted(allv) == list(range(6000))
        for c in cs:
            parts = {(r.topic, r.partition) for r in seen.get(id(c), [])[at_balance[id(c)] :]}
            assert parts <= {tuple(tp) for tp in c.assignment()}
    finally:
        for c in cs:
            c.close()


def test_members_leaving_and_joining_lose_nothing_with_commits(kafka, topic):
    t = topic(partitions=6)
    g = gid()
    total = 6000
    produce(kafka.bootstrap, t, 2000, partitions=6)
    seen: list[int] = []
    kw = dict(group_id=g, enable_auto_commit=False, **FAST)

    def consume(c: kpax.Consumer, rounds: int) -> None:
        for _ in range(rounds):
            recs = c.poll(0.05)
            seen.extend(values(recs))
            if recs:
                c.commit()

    c1 = kpax.Consumer(kafka.bootstrap, **kw)
    c1.subscribe([t])
    c2 = kpax.Consumer(kafka.bootstrap, **kw)
    c2.subscribe([t])
    for _ in range(20):
        consume(c1, 1)
        consume(c2, 1)
    produce(kafka.bootstrap, t, 2000, partitions=6, start=2000)
    c3 = kpax.Consumer(kafka.bootstrap, **kw)
    c3.subscribe([t])
    for _ in range(20):
        for c in (c1, c2, c3):
            consume(c, 1)
    c1.close()  # leaves: its partitions move, from its last commit
    produce(kafka.bootstrap, t, 2000, partitions=6, start=4000)
    deadline = time.monotonic() + 40
    while len(set(seen)) < total and time.monotonic() < deadline:
        consume(c2, 1)
        consume(c3, 1)
    c2.close()
    c3.close()
    assert set(seen) == set(range(total))  # at least once


def test_cooperative_sticky_keeps_partitions_that_stay(kafka, topic):
    t = topic(partitions=6)
    g = gid()
    kw = dict(group_id=g, partition_assignment_strategy="cooperative-sticky", **FAST)
    r1, r2 = Recorder(), Recorder()
    c1 = kpax.Consumer(kafka.bootstrap, **kw)
    c1.subscribe([t], listener=r1)
    poll_until([c1], lambda: len(c1.assignment()) == 6)
    before = c1.assignment()
    c2 = kpax.Consumer(kafka.bootstrap, **kw)
    c2.subscribe([t], listener=r2)
    try:
        poll_until([c1, c2], balanced([c1, c2], 6))
        kept = c1.assignment()
        assert len(kept) == 3 and kept < before
        # only the partitions that moved were revoked: never one c1 kept
        assert r1.revoked() == before - kept
        assert r2.revoked() == set()
        assert ("assigned", c2.assignment()) in r2.events
    finally:
        c2.close()
        c1.close()


def test_static_members_rejoin_without_a_rebalance(kafka, topic):
    t = topic(partitions=4)
    g = gid()
    kw = dict(group_id=g, partition_assignment_strategy="range", **FAST)
    r1 = Recorder()
    c1 = kpax.Consumer(kafka.bootstrap, group_instance_id="a", **kw)
    c1.subscribe([t], listener=r1)
    c2 = kpax.Consumer(kafka.bootstrap, group_instance_id="b", **kw)
    c2.subscribe([t])
    try:
        settled = balanced([c1, c2], 4)
        # (the listener hears of an assignment at a later poll than assignment() shows it)
        poll_until(
            [c1, c2], lambda: settled() and r1.events[-1:] == [("assigned", c1.assignment())]
        )
        mine, theirs = c1.assignment(), c2.assignment()
        events = len(r1.events)
        c2.close()  # static: no LeaveGroup
        c2 = kpax.Consumer(kafka.bootstrap, group_instance_id="b", **kw)
        c2.subscribe([t])
        poll_until([c1, c2], lambda: c2.assignment() == theirs, timeout=15)
        for _ in range(10):
            c1.poll(0.1)
        assert c1.assignment() == mine
        assert len(r1.events) == events  # c1 saw no rebalance at all
    finally:
        c1.close()
        c2.close()


def test_commit_sync_async_and_restart_resumes_at_committed(kafka, topic):
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 100, partitions=2)
    g = gid()
    kw = dict(group_id=g, enable_auto_commit=False, **FAST)
    with kpax.Consumer(kafka.bootstrap, **kw) as c:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 100 and time.monotonic() < deadline:
            got.extend(c.poll(0.2))
        assert len(got) == 100
        c.commit({TP(t, 0): 30})  # explicit offsets
        assert c.committed([TP(t, 0)])[TP(t, 0)].offset == 30
        done = threading.Event()
        result: list[object] = []

        def cb(offsets, exc):
            result.append((offsets, exc))
            done.set()

        c.commit_async({TP(t, 1): kpax.OffsetAndMetadata(20, "meta")}, callback=cb).result(10)
        assert done.wait(10) and result[0][1] is None
        om = c.committed([TP(t, 1)])[TP(t, 1)]
        assert (om.offset, om.metadata) == (20, "meta")
    with kpax.Consumer(kafka.bootstrap, **kw) as c:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 50 and time.monotonic() < deadline:
            got.extend(c.poll(0.2))
        assert sorted(r.offset for r in got if r.partition == 0) == list(range(30, 50))
        assert sorted(r.offset for r in got if r.partition == 1) == list(range(20, 50))
        c.commit()  # current positions
        assert c.committed([TP(t, 0), TP(t, 1)]) == {
            TP(t, 0): kpax.OffsetAndMetadata(50, "", 0),
            TP(t, 1): kpax.OffsetAndMetadata(50, "", 0),
        }


def test_negative_commit_offsets_are_refused_and_change_nothing(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 5)
    with kpax.Consumer(kafka.bootstrap, group_id=gid(), enable_auto_commit=False) as c:
        c.assign([TP(t, 0)])
        c.commit({TP(t, 0): 5})
        for bad in (-1, -5, kpax.OffsetAndMetadata(-2), "3", 2.0):
            with pytest.raises(ValueError, match=f"cannot commit offset.*{t}"):
                c.commit({TP(t, 0): bad})
        assert c.committed([TP(t, 0)])[TP(t, 0)].offset == 5


def test_a_commit_of_unchanged_positions_sends_nothing(kafka, topic):
    """commit() sends only positions that moved since the member last knew the
    committed offset: re-sending an old one could only write back a stale
    offset after another member moved it on (a backward commit)."""
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 20, partitions=2)
    with kpax.Consumer(
        kafka.bootstrap, group_id=gid(), auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.subscribe([t])
        got: list[kpax.ConsumerRecord] = []
        deadline = time.monotonic() + 60
        while len(got) < 20:
            assert time.monotonic() < deadline, f"{len(got)} of 20 records"
            got.extend(c.poll(0.5))
        c.commit()
        sent = c.metrics()["commit-total"]
        c.commit()  # nothing consumed since
        c.commit_async().result(10)
        assert c.metrics()["commit-total"] == sent
        assert {tp.partition: om.offset for tp, om in c.committed(c.assignment()).items()} == {
            0: 10,
            1: 10,
        }


def test_auto_commit_on_close(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 40)
    g = gid()
    with kpax.Consumer(kafka.bootstrap, group_id=g, **FAST) as c:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 40 and time.monotonic() < deadline:
            got.extend(c.poll(0.2))
    with kpax.Admin(kafka.bootstrap) as a:
        offsets = a.list_group_offsets(g)
    assert offsets[TP(t, 0)].offset == 40


def test_exceeding_max_poll_interval_leaves_and_commit_fails(kafka, topic):
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 10, partitions=2)
    g = gid()
    r = Recorder()
    kw = dict(group_id=g, enable_auto_commit=False, max_poll_interval_ms=1500, **FAST)
    c1 = kpax.Consumer(kafka.bootstrap, **kw)
    c1.subscribe([t], listener=r)
    c2 = kpax.Consumer(kafka.bootstrap, **kw)
    c2.subscribe([t])
    try:
        poll_until([c1, c2], balanced([c1, c2], 2))
        deadline = time.monotonic() + 15
        while len(c2.assignment()) < 2:  # only c2 polls: c1 is "processing"
            assert time.monotonic() < deadline
            c2.poll(0.1)
        with pytest.raises(kpax.CommitFailedError, match="max_poll_interval_ms"):
            c1.commit({TP(t, 0): 1})
        c1.poll(0.1)  # lost partitions reported, then it rejoins
        assert any(e == "lost" for e, _ in r.events)
        poll_until([c1, c2], balanced([c1, c2], 2))
    finally:
        c1.close()
        c2.close()


def test_close_leaves_the_group_promptly(kafka, topic):
    t = topic(partitions=2)
    g = gid()
    c1 = kpax.Consumer(kafka.bootstrap, group_id=g, **FAST)
    c1.subscribe([t])
    c2 = kpax.Consumer(kafka.bootstrap, group_id=g, **FAST)
    c2.subscribe([t])
    poll_until([c1, c2], balanced([c1, c2], 2))
    t0 = time.monotonic()
    c1.close(timeout=5)
    assert time.monotonic() - t0 < 5
    # far sooner than the 6 s session timeout: LeaveGroup was sent
    poll_until([c2], lambda: len(c2.assignment()) == 2, timeout=4)
    c2.close()


@pytest.mark.parametrize(
    "protocol", ["classic", pytest.param("consumer", marks=pytest.mark.kafka4)]
)
def test_subscribing_to_a_topic_that_does_not_exist_yet_picks_it_up(kafka, topic, protocol):
    """As the Java consumer: subscribe returns at once; when the topic is
    created, the group assigns it and its records arrive."""
    name = "later-" + uuid.uuid4().hex[:8]
    existing = topic()
    produce(kafka.bootstrap, existing, 3)
    with kpax.Consumer(
        kafka.bootstrap, group_id=gid(), group_protocol=protocol, auto_offset_reset="earliest"
    ) as c:
        t0 = time.monotonic()
        c.subscribe([existing, name])
        assert time.monotonic() - t0 < 1.0
        sink: dict[int, list[kpax.ConsumerRecord]] = {}
        poll_until([c], lambda: c.assignment() == {TP(existing, 0)}, sink=sink)
        with kpax.Admin(kafka.bootstrap) as admin:
            admin.create_topics([kpax.NewTopic(name, 2, 1)]).raise_for_errors()
        produce(kafka.bootstrap, name, 10, partitions=2)
        want = {TP(existing, 0), TP(name, 0), TP(name, 1)}
        poll_until([c], lambda: c.assignment() == want, timeout=60, sink=sink)
        poll_until([c], lambda: len(sink.get(id(c), [])) >= 13, timeout=60, sink=sink)
        got = sink[id(c)]
        assert sorted((r.topic, int(r.value)) for r in got) == sorted(
            [(existing, i) for i in range(3)] + [(name, i) for i in range(10)]
        )


async def test_asyncio_group_member(kafka, topic):
    t = topic(partitions=3)
    produce(kafka.bootstrap, t, 300, partitions=3)
    events: list[str] = []

    class L(kpax.ConsumerRebalanceListener):
        async def on_partitions_assigned(self, assigned):
            events.append(f"assigned {len(assigned)}")

    async with kpax.aio.Consumer(kafka.bootstrap, group_id=gid(), **FAST) as c:
        await c.subscribe([t], listener=L())
        assert len(await c.wait_for_assignment(20)) == 3
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 300 and time.monotonic() < deadline:
            got.extend(values(await c.poll(0.5)))
        assert sorted(got) == list(range(300))
        await c.commit()
        assert (await c.committed([TP(t, 0)]))[TP(t, 0)].offset == 100
    assert events == ["assigned 3"]


# ---------------------------------------------------------------- KIP-848


#: KIP-848 heartbeats and sessions kept short: kpax.testing's local brokers set
#: these (the session's ``kafka`` too); a test starting a broker of its own for
#: KIP-848 groups passes them.
KIP848_BROKER_CONFIG = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def kafka848(kafka):
    """The session's broker: its KIP-848 settings are KIP848_BROKER_CONFIG's."""
    return kafka


def _topic848(kafka848, partitions: int) -> str:
    name = "k848-" + uuid.uuid4().hex[:8]
    with kpax.Admin(kafka848.bootstrap) as a:
        a.create_topics([kpax.NewTopic(name, partitions, 1)])
    with kpax.Consumer(kafka848.bootstrap) as c:
        assert len(c.partitions_for_topic(name)) == partitions
    return name


@pytest.mark.kafka4
def test_kip848_members_share_and_rebalance_without_loss(kafka848):
    t = _topic848(kafka848, 6)
    produce(kafka848.bootstrap, t, 3000, partitions=6)
    g = gid()
    kw = dict(group_id=g, group_protocol="consumer", enable_auto_commit=False, **FAST)
    kw.pop("session_timeout_ms")
    kw.pop("heartbeat_interval_ms")
    recs: dict[int, list[kpax.ConsumerRecord]] = {}
    r1 = Recorder()
    c1 = kpax.Consumer(kafka848.bootstrap, **kw)
    c1.subscribe([t], listener=r1)
    c2 = kpax.Consumer(kafka848.bootstrap, **kw)
    c2.subscribe([t])
    c3 = kpax.Consumer(kafka848.bootstrap, **kw)
    c3.subscribe([t])
    cs = [c1, c2, c3]
    try:
        poll_until(cs, balanced(cs, 6), sink=recs)
        assert sorted(len(c.assignment()) for c in cs) == [2, 2, 2]
        # KIP-848 revokes only what moves: c1 never lost a partition it kept
        assert not (r1.revoked() & c1.assignment())
        poll_until(
            cs, lambda: len({int(r.value) for v in recs.values() for r in v}) >= 3000, sink=recs
        )
        for c in cs:
            # the 3000 may all have come from another member before this one looked up
            # where to start: a commit sends only partitions with a known position
            for tp in c.assignment():
                c.position(tp)
            c.commit()
        # a member leaves: its partitions move to the others, from the commits
        c3.close()
        cs = [c1, c2]
        poll_until(cs, balanced(cs, 6), sink=recs)
        produce(kafka848.bootstrap, t, 600, partitions=6, start=3000)
        poll_until(
            cs, lambda: len({int(r.value) for v in recs.values() for r in v}) >= 3600, sink=recs
        )
        allv = [int(r.value) for v in recs.values() for r in v]
        assert set(allv) == set(range(3600))
        committed = c1.committed(c1.assignment())
        assert all(om is not None for om in committed.values())
    finally:
        for c in cs:
            c.close()


@pytest.mark.kafka4
async def test_kip848_asyncio_member_and_commit(kafka848):
    t = _topic848(kafka848, 2)
    produce(kafka848.bootstrap, t, 100, partitions=2)
    g = gid()
    async with kpax.aio.Consumer(
        kafka848.bootstrap, group_id=g, group_protocol="consumer", auto_offset_reset="earliest"
    ) as c:
        await c.subscribe([t])
        assert len(await c.wait_for_assignment(20)) == 2
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 100 and time.monotonic() < deadline:
            got.extend(await c.poll(0.5))
        await c.commit()
        assert (await c.committed([TP(t, 1)]))[TP(t, 1)].offset == 50
    t0 = time.monotonic()
    async with kpax.aio.Consumer(kafka848.bootstrap, group_id=g, group_protocol="consumer") as c:
        await c.subscribe([t])
        # A member that joins right after another left may first get an empty
        # assignment from the broker, and the partitions at its next heartbeat.
        while TP(t, 0) not in c.assignment():
            assert time.monotonic() - t0 < 15
            await c.poll(0.1)
        assert await c.position(TP(t, 0)) == 50
    assert time.monotonic() - t0 < 15


def test_committed_position_beyond_its_epoch_is_truncation(kafka, topic):
    """KIP-320: a committed offset carries the leader epoch it was read in; when
    the leader's log for that epoch ends below it (as after an unclean leader
    change), the position is validated with OffsetForLeaderEpoch and found
    truncated."""
    t = topic()
    produce(kafka.bootstrap, t, 10)
    g = gid()
    with kpax.Consumer(kafka.bootstrap, group_id=g, enable_auto_commit=False) as c:
        c.assign([TP(t, 0)])
        c.commit({TP(t, 0): kpax.OffsetAndMetadata(25, "", 0)})  # epoch 0 ends at 10
    with kpax.Consumer(
        kafka.bootstrap, group_id=g, enable_auto_commit=False, auto_offset_reset="none"
    ) as c:
        c.assign([TP(t, 0)])
        with pytest.raises(kpax.consumer.LogTruncationError, match=f"{t}-0.*10.*25"):
            for _ in range(20):
                c.poll(0.25)
    with kpax.Consumer(
        kafka.bootstrap, group_id=g, enable_auto_commit=False, auto_offset_reset="earliest"
    ) as c:
        c.assign([TP(t, 0)])
        assert c.position(TP(t, 0)) == 10  # moved back to where the epoch ends


def test_commit_of_a_partition_given_away_while_processing_is_refused(kafka, topic):
    """The fake's check on Kafka: after a background rebalance gave a partition to
    another member, commit(offsets) of its records is refused, not committed over
    the new owner's offset."""
    from tests.fake.test_background_rebalance_fencing import check_commit_refused

    check_commit_refused(kafka.bootstrap, topic(2), f"g-{uuid.uuid4().hex[:8]}")
