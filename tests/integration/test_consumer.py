"""kpax.Consumer / kpax.aio.Consumer without a group, against a real broker:
assign, seek, positions, offsets lookups, pause/resume, catch-up then live
follow, compression, small fetch sizes (partial trailing batches),
auto_offset_reset, deserializers, read_committed, errors."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.consumer import NoOffsetForPartitionError

pytestmark = pytest.mark.integration


def produce(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    partition: int | None = None,
    partitions: int = 1,
    start: int = 0,
    compression: str = "none",
    timestamp: int | None = None,
    headers: bool = False,
) -> None:
    """Write values b"<i>" (keys b"k<i>") for i in start..start+n, round robin over partitions."""
    from confluent_kafka import Producer

    # idempotent: a retry on a busy machine must not reorder a partition's records
    # (the tests check the order they are read in)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    for i in range(start, start + n):
        kw = {}
        if timestamp is not None:
            kw["timestamp"] = timestamp + i
        if headers:
            kw["headers"] = [("n", str(i).encode()), ("empty", None)]
        p.produce(
            topic,
            value=str(i).encode(),
            key=b"k%d" % i,
            partition=partition if partition is not None else i % partitions,
            **kw,
        )
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def drain(c: kpax.Consumer, n: int, timeout: float = 20.0) -> list[kpax.ConsumerRecord]:
    out: list[kpax.ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(0.5))
    return out


def values(recs: Iterable[kpax.ConsumerRecord]) -> list[int]:
    return [int(r.value) for r in recs]


def test_assign_poll_records_have_every_field(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 100, timestamp=1_700_000_000_000, headers=True)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(t, 0)])
        assert c.assignment() == {TP(t, 0)}
        recs = drain(c, 100)
        assert [r.offset for r in recs] == list(range(100))
        r = recs[7]
        assert (r.topic, r.partition, r.key, r.value) == (t, 0, b"k7", b"7")
        assert r.timestamp == 1_700_000_000_007 and r.timestamp_type == 0
        assert r.headers == (("n", b"7"), ("empty", None))
        assert r.leader_epoch >= 0
        assert c.position(TP(t, 0)) == 100
        assert c.poll(0.2) == []
        # fetched in an incremental fetch session (KIP-227), topics named by id
        sessions = list(c.aio.fetcher._sessions.values())
        assert sessions and all(s.id != 0 and s.epoch >= 1 for s in sessions)
        assert c.aio.cluster.snapshot.topics[t].topic_id is not None


def test_seek_and_seek_to_beginning_end_and_offset_lookups(kafka, topic):
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 200, partitions=2, timestamp=1_700_000_000_000)
    tp0, tp1 = TP(t, 0), TP(t, 1)
    with kpax.Consumer(kafka.bootstrap) as c:
        c.assign([tp0, tp1])
        # auto_offset_reset defaults to latest: nothing old is read
        assert c.position(tp0) == 100
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 100, tp1: 100}
        c.seek(tp0, 42)
        recs = drain(c, 58)
        assert [r.offset for r in recs] == list(range(42, 100))
        assert all(r.partition == 0 for r in recs)
        c.seek_to_beginning(tp1)
        assert [r.offset for r in drain(c, 100)] == list(range(100))
        c.seek_to_beginning()
        assert len(drain(c, 200)) == 200
        c.seek_to_end(tp0)
        assert c.position(tp0) == 100
        # record i has timestamp base+i; partition 0 holds the even i
        found = c.offsets_for_times({tp0: 1_700_000_000_000 + 50, tp1: 1_800_000_000_000})
        assert found[tp0] is not None and found[tp0].offset == 25
        assert found[tp0].timestamp == 1_700_000_000_000 + 50
        assert found[tp1] is None


def test_catch_up_then_follow_live_without_gap_or_duplicate(kafka, topic):
    t = topic(partitions=3)
    produce(kafka.bootstrap, t, 3000, partitions=3)
    stop = threading.Event()
    total = [3000]

    def writer() -> None:
        while not stop.is_set() and total[0] < 9000:
            produce(kafka.bootstrap, t, 500, partitions=3, start=total[0])
            total[0] += 500

    th = threading.Thread(target=writer)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest", max_poll_records=100) as c:
        c.assign([TP(t, p) for p in range(3)])
        seen: list[int] = []
        seen.extend(values(drain(c, 1000)))
        th.start()
        seen.extend(values(drain(c, 9000 - len(seen), timeout=40)))
        stop.set()
        th.join()
        seen.extend(values(drain(c, total[0] - len(seen), timeout=10)))
        assert len(seen) == total[0] == 9000
        assert sorted(seen) == list(range(9000))
        by_partition: dict[int, list[int]] = {}
        for v in seen:
            by_partition.setdefault(v % 3, []).append(v)
        for vs in by_partition.values():
            assert vs == sorted(vs)  # in order within a partition


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(kafka, topic, compression):
    t = topic()
    produce(kafka.bootstrap, t, 2000, compression=compression)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(t, 0)])
        # start in the middle of a compressed batch: earlier records are skipped
        c.seek(TP(t, 0), 1001)
        assert values(drain(c, 999)) == list(range(1001, 2000))


def test_small_fetch_sizes_and_partial_trailing_batches(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 3000)
    with kpax.Consumer(
        kafka.bootstrap,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=700,  # smaller than most batches: ends mid-batch
        fetch_max_bytes=1500,
        max_poll_records=7,
    ) as c:
        c.assign([TP(t, 0)])
        got: list[int] = []
        while len(got) < 3000:
            batch = c.poll(2.0)
            assert len(batch) <= 7
            assert batch, f"stalled at {len(got)}"
            got.extend(values(batch))
        assert got == list(range(3000))


def test_iteration_and_consumer_timeout(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 500)
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=1000
    ) as c:
        c.assign([TP(t, 0)])
        assert values(c) == list(range(500))


def test_pause_and_resume(kafka, topic):
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 400, partitions=2)
    tp0, tp1 = TP(t, 0), TP(t, 1)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        c.pause(tp1)
        assert c.paused() == {tp1}
        recs = drain(c, 200)
        recs += c.poll(0.5)
        assert {r.partition for r in recs} == {0} and len(recs) == 200
        c.resume(tp1)
        recs = drain(c, 200)
        assert {r.partition for r in recs} == {1} and len(recs) == 200


def test_a_resumed_partition_is_fetched_at_once_not_after_the_long_poll(kafka, topic):
    """resume(p) while the fetch in flight long-polls the broker's other partitions
    (p was paused, so that fetch leaves it out): p's records come at once, not when
    that long poll ends (fetch_max_wait_ms, 10 s here)."""
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 50, partition=0)
    tp0, tp1 = TP(t, 0), TP(t, 1)
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=10_000
    ) as c:
        c.assign([tp0, tp1])
        c.pause(tp0)
        assert c.position(tp1) == 0  # known: the fetcher long-polls tp1 alone now
        assert c.poll(0.2) == []
        started = time.monotonic()
        c.resume(tp0)
        recs = c.poll(8.0)
        waited = time.monotonic() - started
        assert recs and {r.partition for r in recs} == {0}
        assert waited < 4.0, f"the resumed partition's records came after {waited:.1f}s"


def test_offset_out_of_range_resets_or_raises(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 50)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(t, 0)])
        c.seek(TP(t, 0), 10_000)
        assert values(drain(c, 50)) == list(range(50))
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="none") as c:
        c.assign([TP(t, 0)])
        with pytest.raises(NoOffsetForPartitionError, match=f"{t}-0"):
            c.poll(5.0)
        c.seek(TP(t, 0), 10_000)
        with pytest.raises(kpax.errors.OffsetOutOfRangeError) as info:
            c.poll(5.0)
        msg = str(info.value)
        assert f"{t}-0" in msg and "10000" in msg and "high watermark 50" in msg
        c.seek(TP(t, 0), 48)
        assert values(drain(c, 2)) == [48, 49]


def test_deserializers_and_their_errors(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 10)
    with kpax.Consumer(
        kafka.bootstrap,
        auto_offset_reset="earliest",
        key_deserializer=lambda b: b.decode(),
        value_deserializer=int,
    ) as c:
        c.assign([TP(t, 0)])
        recs = drain(c, 10)
        assert [(r.key, r.value) for r in recs] == [(f"k{i}", i) for i in range(10)]
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", value_deserializer=lambda b: 1 / 0
    ) as c:
        c.assign([TP(t, 0)])
        with pytest.raises(kpax.SerializationError, match=f"value deserializer failed on {t}-0"):
            drain(c, 1, timeout=5)


def test_unknown_topic_and_bad_options_are_clear_errors(kafka):
    with (
        kpax.Consumer(kafka.bootstrap, default_api_timeout_ms=1500) as c,
        pytest.raises(kpax.errors.UnknownTopicOrPartitionError, match="no-such-topic"),
    ):
        c.assign([TP("no-such-topic-" + uuid.uuid4().hex[:6], 0)])
    with pytest.raises(kpax.ConfigError, match="auto_offset_reset"):
        kpax.Consumer(kafka.bootstrap, auto_ofset_reset="earliest")
    # without a group, subscribing reads every partition of named topics (as
    # kafka-python and aiokafka do); a pattern needs a group
    with (
        pytest.raises(kpax.IllegalStateError, match="group_id"),
        kpax.Consumer(kafka.bootstrap) as c,
    ):
        c.subscribe(pattern="x.*")
    with (
        kpax.Consumer(kafka.bootstrap, default_api_timeout_ms=1500) as c,
        pytest.raises(kpax.errors.UnknownTopicOrPartitionError, match="no-such-topic"),
    ):
        c.subscribe(["no-such-topic-" + uuid.uuid4().hex[:6]])


def test_read_committed_hides_aborted_and_control_records(kafka, topic):
    from confluent_kafka import Producer

    t = topic()
    p = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "tx-" + t})
    p.init_transactions()
    for i, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for j in range(10):
            p.produce(t, value=b"%d" % (i * 10 + j), partition=0)
        p.flush()  # aborted records must reach the log (abort purges unsent ones)
        p.commit_transaction() if commit else p.abort_transaction()
    plain = Producer({"bootstrap.servers": kafka.bootstrap})
    plain.produce(t, value=b"999", partition=0)
    plain.flush()
    committed = [v for i in (0, 2, 4) for v in range(i * 10, i * 10 + 10)] + [999]
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
    ) as c:
        c.assign([TP(t, 0)])
        recs = drain(c, len(committed))
        assert values(recs) == committed
        assert c.poll(0.5) == []
        end = c.end_offsets([TP(t, 0)])[TP(t, 0)]
        assert c.position(TP(t, 0)) == end  # past the last control record
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(t, 0)])
        # read_uncommitted sees aborted records too, but never control records
        assert len(drain(c, 51)) == 51
        assert c.poll(0.5) == []


async def test_asyncio_consumer(kafka, topic):
    t = topic(partitions=2)
    produce(kafka.bootstrap, t, 300, partitions=2)
    async with kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        await c.assign([TP(t, 0), TP(t, 1)])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 300 and time.monotonic() < deadline:
            got.extend(values(await c.poll(1.0)))
        assert sorted(got) == list(range(300))
        assert await c.position(TP(t, 1)) == 150
        await c.seek(TP(t, 1), 140)
        seen = []
        async for rec in c:
            seen.append(rec.offset)
            if len(seen) == 10:
                break
        assert seen == list(range(140, 150))
        assert await c.end_offsets([TP(t, 0)]) == {TP(t, 0): 150}


def test_close_is_prompt_and_final(kafka, topic):
    t = topic()
    c = kpax.Consumer(kafka.bootstrap)
    c.assign([TP(t, 0)])
    c.poll(0.2)
    t0 = time.monotonic()
    c.close(timeout=5)
    assert time.monotonic() - t0 < 5
    with pytest.raises(kpax.ClientClosedError):
        c.poll(0.1)
    c.close()  # idempotent


def test_breaking_out_of_iteration_loses_nothing_and_commits_what_was_read(kafka, topic):
    """``for rec in consumer: ... break`` hands the records not yet read back to
    the next poll, and a commit inside the loop commits the offset after the
    record in hand, not the end of the fetched chunk (at-least-once)."""
    t = topic()
    produce(kafka.bootstrap, t, 10)
    tp = TP(t, 0)
    with kpax.Consumer(
        kafka.bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}", enable_auto_commit=False
    ) as c:
        c.assign([tp])
        c.seek(tp, 0)
        seen = []
        for rec in c:
            seen.append(rec.offset)
            if rec.offset == 2:
                c.commit()
                assert c.committed([tp])[tp].offset == 3
                assert c.position(tp) == 3
            if rec.offset == 4:
                break
        assert seen == [0, 1, 2, 3, 4]
        assert c.position(tp) == 5
        rest = drain(c, 5)
        assert [r.offset for r in rest] == [5, 6, 7, 8, 9]


def test_seek_inside_the_iteration_loop_switches_at_once(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 10)
    tp = TP(t, 0)
    with kpax.Consumer(kafka.bootstrap) as c:
        c.assign([tp])
        c.seek(tp, 0)
        seen = []
        for rec in c:
            seen.append(rec.offset)
            if rec.offset == 1:
                c.seek(tp, 8)
            if rec.offset == 9:
                break
        assert seen == [0, 1, 8, 9]


async def test_asyncio_iteration_break_loses_nothing(kafka, topic):
    t = topic()
    produce(kafka.bootstrap, t, 10)
    tp = TP(t, 0)
    async with kpax.aio.Consumer(kafka.bootstrap) as c:
        await c.assign([tp])
        await c.seek(tp, 0)
        it = c.__aiter__()
        seen = [(await it.__anext__()).offset for _ in range(3)]
        assert await c.position(tp) == 3
        await it.aclose()
        got: list[int] = []
        while len(got) < 7:
            got += [r.offset for r in await c.poll(1.0)]
        assert seen == [0, 1, 2] and got == [3, 4, 5, 6, 7, 8, 9]
