"""kpax's consumers through FakeKafka: assign and seek, offsets by time, end
offsets, commits and a restart resuming at the committed offset, classic groups
(range, cooperative-sticky) and KIP-848 groups, sync and asyncio."""

from __future__ import annotations

import asyncio
import time

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.wait import eventually


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1, *, ts0: int | None = None):
    with kpax.Producer(bootstrap, linger_ms=0) as p:
        for i in range(n):
            ts = ts0 + i * 1000 if ts0 is not None else None
            p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % partitions, timestamp=ts)
        p.flush(10)


def _drain(c: kpax.Consumer, n: int, timeout: float = 10) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n}"
        out.extend(c.poll(timeout=0.2))
    return out


def test_assign_seek_and_offsets(fake_kafka):
    fake_kafka.create_topic("t", 1)
    t0 = int(time.time() * 1000) - 100_000
    _produce(fake_kafka.bootstrap, "t", 20, ts0=t0)
    tp = TP("t", 0)
    with kpax.Consumer(fake_kafka.bootstrap) as c:
        c.assign([tp])
        assert c.end_offsets([tp]) == {tp: 20}
        assert c.beginning_offsets([tp]) == {tp: 0}
        found = c.offsets_for_times({tp: t0 + 5500})[tp]
        assert (found.offset, found.timestamp) == (6, t0 + 6000)
        assert c.offsets_for_times({tp: t0 + 10**9})[tp] is None
        c.seek(tp, 15)
        recs = _drain(c, 5)
        assert [r.offset for r in recs] == [15, 16, 17, 18, 19]
        assert [r.value for r in recs] == [b"v%d" % i for i in range(15, 20)]
        assert recs[0].timestamp == t0 + 15000
        c.seek_to_beginning(tp)
        assert [r.offset for r in _drain(c, 20)][:3] == [0, 1, 2]


def test_position_waits_for_the_lookup_instead_of_polling(fake_kafka, monkeypatch):
    """position() of a partition whose offset lookup is slow waits for the lookup's
    end (or a seek) without waking the fetcher every few milliseconds meanwhile."""
    from kpax.consumer.fetcher import Fetcher
    from kpax.consumer.positions import Positions

    fake_kafka.create_topic("t", 2)
    _produce(fake_kafka.bootstrap, "t", 10, partitions=2)
    release = asyncio.Event()
    real_reset = Positions.reset

    async def slow_reset(self, parts):
        await release.wait()
        await real_reset(self, parts)

    monkeypatch.setattr(Positions, "reset", slow_reset)
    wakes = []
    real_wake = Fetcher.wake
    monkeypatch.setattr(Fetcher, "wake", lambda self: (wakes.append(1), real_wake(self)))

    async def main() -> None:
        async with kpax.aio.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c:
            tp0, tp1 = TP("t", 0), TP("t", 1)
            await c.assign([tp0, tp1])
            waiting = asyncio.ensure_future(c.position(tp0, timeout=10))
            await asyncio.sleep(0.5)  # the lookup is still held back: position waits
            assert not waiting.done()
            assert len(wakes) <= 5, f"the fetcher was woken {len(wakes)} times in 0.5 s"
            release.set()
            assert await asyncio.wait_for(waiting, 5) == 0
            # a seek answers a position() that waits
            await c.seek_to_end(tp1)
            release.clear()
            waiting = asyncio.ensure_future(c.position(tp1, timeout=10))
            await asyncio.sleep(0)  # position() runs up to its wait
            assert not waiting.done()
            await c.seek(tp1, 3)
            assert await asyncio.wait_for(waiting, 1) == 3
            release.set()

    asyncio.run(main())


def test_long_poll_returns_when_records_arrive(fake_kafka):
    fake_kafka.create_topic("lp", 1)
    tp = TP("lp", 0)
    with kpax.Consumer(fake_kafka.bootstrap, fetch_max_wait_ms=5000) as c:
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp) == 0
        assert c.poll(timeout=0.3) == []
        _produce(fake_kafka.bootstrap, "lp", 1)
        start = time.monotonic()
        assert [r.value for r in _drain(c, 1)] == [b"v0"]
        assert time.monotonic() - start < 3  # not the 5 s max wait


def test_commit_and_restart_resume(fake_kafka):
    fake_kafka.create_topic("r", 2)
    _produce(fake_kafka.bootstrap, "r", 40, partitions=2)
    opts = {"group_id": "g1", "auto_offset_reset": "earliest", "enable_auto_commit": False}
    with kpax.Consumer(fake_kafka.bootstrap, **opts) as c:
        c.subscribe(["r"])
        got = _drain(c, 40)
        seen = {r.partition: r.offset for r in got if r.offset < 10}
        c.commit({TP("r", p): kpax.OffsetAndMetadata(o + 1, "") for p, o in seen.items()})
    assert fake_kafka.committed("g1") == {("r", 0): 10, ("r", 1): 10}
    with kpax.Consumer(fake_kafka.bootstrap, **opts) as c:
        c.subscribe(["r"])
        again = _drain(c, 20)
        assert min(r.offset for r in again) == 10
        assert c.committed({TP("r", 0)})[TP("r", 0)].offset == 10


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_classic_group_two_members_rebalance(fake_kafka, strategy):
    fake_kafka.create_topic("g", 4)
    opts = {
        "group_id": f"grp-{strategy}",
        "partition_assignment_strategy": [strategy],
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 100,
    }
    a = kpax.Consumer(fake_kafka.bootstrap, **opts)
    b = kpax.Consumer(fake_kafka.bootstrap, **opts)
    try:
        a.subscribe(["g"])
        eventually(lambda: a.poll(timeout=0.1) is not None and len(a.assignment()) == 4, 10)
        b.subscribe(["g"])

        def split() -> bool:
            a.poll(timeout=0.05)
            b.poll(timeout=0.05)
            return len(a.assignment()) == 2 and len(b.assignment()) == 2

        eventually(split, 10, interval=0)
        assert a.assignment() | b.assignment() == {TP("g", p) for p in range(4)}
        b.close()

        def back() -> bool:
            a.poll(timeout=0.05)
            return len(a.assignment()) == 4

        eventually(back, 10, interval=0)
    finally:
        a.close()
        b.close()


def test_kip848_group_two_members(fake_kafka):
    fake_kafka.create_topic("k", 4)
    _produce(fake_kafka.bootstrap, "k", 8, partitions=4)
    opts = {"group_id": "g848", "group_protocol": "consumer", "auto_offset_reset": "earliest"}
    a = kpax.Consumer(fake_kafka.bootstrap, **opts)
    b = kpax.Consumer(fake_kafka.bootstrap, **opts)
    try:
        a.subscribe(["k"])
        got = _drain(a, 8)
        assert len(a.assignment()) == 4 and len(got) == 8
        a.commit()
        b.subscribe(["k"])

        def split() -> bool:
            a.poll(timeout=0.05)
            b.poll(timeout=0.05)
            return len(a.assignment()) == 2 and len(b.assignment()) == 2

        eventually(split, 10, interval=0)
        assert a.assignment().isdisjoint(b.assignment())
        desc = fake_kafka.call(lambda c: c.consumer_groups.groups["g848"])
        assert desc.state_name == "Stable" and len(desc.members) == 2
    finally:
        a.close()
        b.close()
    assert fake_kafka.committed("g848") == {("k", p): 2 for p in range(4)}


def test_asyncio_consumer_group(fake_kafka):
    fake_kafka.create_topic("ac", 2)
    _produce(fake_kafka.bootstrap, "ac", 10, partitions=2)

    async def main() -> list[bytes]:
        out: list[bytes] = []
        async with kpax.aio.Consumer(
            fake_kafka.bootstrap, group_id="ag", auto_offset_reset="earliest"
        ) as c:
            await c.subscribe(["ac"])
            while len(out) < 10:
                out.extend(r.value for r in await c.poll(timeout=0.2))
            await c.commit()
        return out

    assert sorted(asyncio.run(main())) == sorted(b"v%d" % i for i in range(10))
    assert fake_kafka.committed("ag") == {("ac", 0): 5, ("ac", 1): 5}


def test_static_member_rejoins_without_a_rebalance(fake_kafka):
    fake_kafka.create_topic("st", 2)
    opts = {"group_id": "sg", "group_instance_id": "i-1", "session_timeout_ms": 6000}
    with kpax.Consumer(fake_kafka.bootstrap, **opts) as c:
        c.subscribe(["st"])
        eventually(lambda: c.poll(timeout=0.1) is not None and len(c.assignment()) == 2, 10)
    group = fake_kafka.call(lambda cl: cl.groups.groups["sg"])
    generation = group.generation
    assert list(group.static) == ["i-1"]  # a static member's close does not leave the group
    with kpax.Consumer(fake_kafka.bootstrap, **opts) as c:
        c.subscribe(["st"])
        eventually(lambda: c.poll(timeout=0.1) is not None and len(c.assignment()) == 2, 10)
    assert fake_kafka.call(lambda cl: cl.groups.groups["sg"].generation) == generation


def test_asyncio_revocation_listener_commits_during_close(fake_kafka) -> None:
    """close() revokes the partitions first (as the Java consumer does); a listener
    that commits there must not be told "the consumer is closed" (the commit was
    lost and the records read again after a restart)."""
    fake_kafka.create_topic("t_rev", 1)
    outcome: list[str] = []

    async def main() -> object:
        async with kpax.aio.Producer(fake_kafka.bootstrap) as p:
            await p.send_and_wait("t_rev", b"a")
        c = kpax.aio.Consumer(
            fake_kafka.bootstrap,
            group_id="grev",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )

        class Listener(kpax.ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: set[kpax.TopicPartition]) -> None:
                try:
                    await c.commit()
                    outcome.append("committed")
                except kpax.KafkaError as exc:
                    outcome.append(f"failed: {exc}")

        await c.start()
        c.subscribe(["t_rev"], listener=Listener())
        while not await c.poll(1.0):
            pass
        await c.close()
        async with kpax.aio.Consumer(fake_kafka.bootstrap, group_id="grev") as c2:
            return (await c2.committed([kpax.TopicPartition("t_rev", 0)]))[
                kpax.TopicPartition("t_rev", 0)
            ]

    committed = asyncio.run(main())
    assert outcome == ["committed"]
    assert committed is not None and committed.offset == 1


def test_pause_and_resume_take_a_collection_and_position_says_it_takes_one(fake_kafka) -> None:
    """confluent-kafka's and aiokafka's pause/resume take a list of partitions;
    kpax's took only ``*partitions``: a list or set failed with
    "TopicPartition.__new__() missing ... 'partition'"."""
    fake_kafka.create_topic("coll", 2)
    tps = [TP("coll", 0), TP("coll", 1)]
    with kpax.Consumer(fake_kafka.bootstrap) as c:
        c.assign(tps)
        c.pause(c.assignment())  # a set
        assert c.paused() == set(tps)
        c.resume([tps[0]])  # a list
        c.resume(("coll", 1))  # a (topic, partition) pair
        assert c.paused() == set()
        with pytest.raises(TypeError, match=r"position\(\) takes one TopicPartition"):
            c.position(c.assignment())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected TopicPartition"):
            c.pause(42)  # type: ignore[arg-type]


def test_deserializers_by_name_as_the_serializers(fake_kafka) -> None:
    """value_serializer='json' was accepted and value_deserializer='json' refused."""
    fake_kafka.create_topic("des", 1)
    with kpax.Producer(fake_kafka.bootstrap, value_serializer="json", key_serializer="str") as p:
        p.send("des", {"a": 1}, key="k").result(10)
        p.send("des", None, key="t").result(10)
    with kpax.Consumer(
        fake_kafka.bootstrap,
        auto_offset_reset="earliest",
        value_deserializer="json",
        key_deserializer="str",
    ) as c:
        c.assign([TP("des", 0)])
        got: list[object] = []
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            got += [(r.key, r.value) for r in c.poll(0.5)]
    assert got == [("k", {"a": 1}), ("t", None)]
    with pytest.raises(kpax.ConfigError, match="one of"):
        kpax.Consumer(fake_kafka.bootstrap, value_deserializer="yaml")


def test_sync_face_reads_large_fetch_responses_off_the_gil(fake_kafka, monkeypatch) -> None:
    """The sync face's connections read the rest of a large Fetch response in C with
    the GIL released (the application thread holds it meanwhile): every record
    comes, in order, and the asyncio face keeps to its transport's reads."""
    from kpax.broker import connection

    calls: list[tuple[int, int]] = []
    real = connection._RECV_REST
    assert real is not None

    def counted(
        fd: int, buf: bytearray, pos: int, end: int, budget: int, idle: int
    ) -> tuple[int, int]:
        got, err = real(fd, buf, pos, end, budget, idle)
        calls.append((end - pos, got))
        return got, err

    monkeypatch.setattr(connection, "_RECV_REST", counted)
    fake_kafka.create_topic("big", 3)
    value = bytes(range(256)) * 2
    with kpax.Producer(fake_kafka.bootstrap, linger_ms=5) as p:
        for i in range(6000):
            p.send("big", value + b"%d" % i, partition=i % 3)
        p.flush(30)
    tps = [TP("big", i) for i in range(3)]
    with kpax.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        recs = _drain(c, 6000, timeout=60)
    assert sorted((r.partition, r.offset) for r in recs) == [
        (p, o) for p in range(3) for o in range(2000)
    ]
    assert all(r.value == value + b"%d" % (r.offset * 3 + r.partition) for r in recs)
    assert calls and sum(got for _want, got in calls) > 1_000_000  # 3 MB, most of it read so

    calls.clear()

    async def main() -> int:
        async with kpax.aio.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as ac:
            await ac.assign(tps)
            n = 0
            while n < 6000:
                n += len(await ac.poll(1.0))
            return n

    assert asyncio.run(main()) == 6000
    assert calls == []


def test_a_partition_resumed_while_its_offset_is_looked_up_is_fetched_once_found(
    fake_kafka,
) -> None:
    """resume(p) while p's offset lookup is under way and the fetch in flight
    long-polls the other partitions: p is fetched once its offset is found, not
    when that long poll ends (the resume's call for a fetch at once was
    dropped because p could not be fetched yet)."""
    fake_kafka.create_topic("kick", 2)
    _produce(fake_kafka.bootstrap, "kick", 50, partitions=1)
    tp0, tp1 = TP("kick", 0), TP("kick", 1)
    with kpax.Consumer(
        fake_kafka.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=10_000
    ) as c:
        c.assign([tp0, tp1])
        c.pause(tp0)
        assert (c.position(tp0), c.position(tp1)) == (0, 0)
        assert c.poll(0.2) == []  # the fetcher long-polls tp1 alone now
        fault = fake_kafka.inject("ListOffsets", delay_ms=500)
        c.seek_to_beginning(tp0)  # looked up again, slowly
        started = time.monotonic()
        c.resume(tp0)
        recs = c.poll(8.0)
        waited = time.monotonic() - started
        fault.remove()
        assert [r.offset for r in recs][:1] == [0] and {r.partition for r in recs} == {0}
        assert waited < 4.0, f"the resumed partition's records came after {waited:.1f}s"
