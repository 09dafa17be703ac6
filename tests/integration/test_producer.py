"""kpax.Producer and kpax.aio.Producer against a real broker: delivery, metadata,
partitioning, options, serializers, errors, flush/close. Records are read back
with confluent-kafka (tests/integration/producer_helpers.py)."""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid

import pytest

import kpax
from kpax.errors import ClientClosedError, ConfigError, KafkaTimeoutError, MessageTooLargeError
from kpax.producer import accumulator
from kpax.producer.partitioner import partition_for_key
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration


def test_send_returns_metadata_and_records_read_back(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap) as p:
        futs = [
            p.send(
                t,
                b"v%d" % i,
                key=b"k%d" % i,
                headers=[("h", b"x%d" % i)],
                timestamp=1_700_000_000_000 + i,
            )
            for i in range(100)
        ]
        metas = [f.result(30) for f in futs]
    assert [m.offset for m in metas] == list(range(100))
    assert all(m.topic == t and m.partition == 0 for m in metas)
    assert metas[7].timestamp == 1_700_000_000_007
    got = read_back(kafka.bootstrap, t, 1, 100)
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == [
        (b"k%d" % i, b"v%d" % i, [("h", b"x%d" % i)], 1_700_000_000_000 + i) for i in range(100)
    ]


def test_default_timestamp_is_now_and_none_value_is_a_tombstone(kafka, topic):
    t = topic()
    before = int(time.time() * 1000)
    with kpax.Producer(kafka.bootstrap) as p:
        m = p.send(t, None, key=b"gone").result(30)
    assert before - 5 <= m.timestamp <= int(time.time() * 1000) + 5
    (rec,) = read_back(kafka.bootstrap, t, 1, 1)
    assert rec.value() is None and rec.key() == b"gone"


def test_keyed_records_use_the_java_partition_and_explicit_partition_wins(kafka, topic):
    t = topic(partitions=6)
    with kpax.Producer(kafka.bootstrap, linger_ms=0) as p:
        keys = [uuid.uuid4().bytes for _ in range(200)]
        metas = [p.send(t, b"v", key=k).result(30) for k in keys]
        assert [m.partition for m in metas] == [partition_for_key(k, 6) for k in keys]
        assert p.send(t, b"v", key=b"any", partition=4).result(30).partition == 4
        with pytest.raises(ValueError, match="no partition 6"):
            p.send(t, b"v", partition=6)


def test_keyless_records_stick_to_a_partition_then_move(kafka, topic):
    t = topic(partitions=6)
    with kpax.Producer(kafka.bootstrap, batch_size=1024, linger_ms=50) as p:
        futs = [p.send(t, b"x" * 100) for _ in range(600)]
        parts = [f.result(30).partition for f in futs]
    # sticky: long runs on one partition, switching after about batch_size bytes
    switches = sum(1 for a, b in itertools.pairwise(parts) if a != b)
    assert 10 <= switches <= 120
    assert len(set(parts)) > 1


def test_custom_partitioner_function(kafka, topic):
    t = topic(partitions=3)
    with kpax.Producer(kafka.bootstrap, partitioner=lambda topic, key, value, n: n - 1) as p:
        assert {p.send(t, b"v").result(30).partition for _ in range(5)} == {2}


def test_serializers_builtin_and_callable(kafka, topic):
    t = topic()
    with kpax.Producer(kafka.bootstrap, key_serializer="str", value_serializer="json") as p:
        p.send(t, {"a": [1, 2]}, key="ключ").result(30)
    with kpax.Producer(kafka.bootstrap, value_serializer=lambda v: str(v * 2).encode()) as p:
        p.send(t, 21).result(30)
    got = read_back(kafka.bootstrap, t, 1, 2)
    assert json.loads(got[0].value()) == {"a": [1, 2]} and got[0].key() == "ключ".encode()
    assert got[1].value() == b"42"


def test_value_not_bytes_is_a_type_error_at_send(kafka, topic):
    t = topic()
    with kpax.Producer(kafka.bootstrap) as p:
        with pytest.raises(TypeError, match="value must be bytes"):
            p.send(t, "text")
        with pytest.raises(TypeError, match="key must be bytes"):
            p.send(t, b"v", key=3)


def test_record_too_large_fails_at_once(kafka, topic):
    t = topic()
    with kpax.Producer(kafka.bootstrap, max_request_size=10_000) as p:
        t0 = time.monotonic()
        with pytest.raises(MessageTooLargeError, match="max_request_size=10000"):
            p.send(t, b"x" * 20_000)
        assert time.monotonic() - t0 < 1.0
        assert p.send(t, b"x" * 5_000).result(30).offset == 0


def test_unknown_topic_fails_after_max_block_naming_it(kafka):
    name = f"missing-{uuid.uuid4().hex[:8]}"
    with kpax.Producer(kafka.bootstrap, allow_auto_create_topics=False, max_block_ms=1500) as p:
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=name):
            p.send(name, b"v")
        assert 1.0 < time.monotonic() - t0 < 6.0


def test_unknown_option_names_the_closest_and_conflicts_are_errors():
    with pytest.raises(ConfigError, match="linger_ms"):
        kpax.Producer("127.0.0.1:1", lingerms=5)
    with pytest.raises(ConfigError, match="enable_idempotence"):
        kpax.Producer("127.0.0.1:1", acks=1, enable_idempotence=True)


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_types(kafka, topic, compression):
    t = topic()
    with kpax.Producer(kafka.bootstrap, compression_type=compression) as p:
        futs = [p.send(t, b"payload-%d" % i * 10, key=b"%d" % i) for i in range(300)]
        p.flush(30)
        assert all(f.done() and f.result().offset == i for i, f in enumerate(futs))
    got = read_back(kafka.bootstrap, t, 1, 300)
    assert [m.value() for m in got] == [b"payload-%d" % i * 10 for i in range(300)]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(kafka, topic, acks):
    t = topic()
    with kpax.Producer(kafka.bootstrap, acks=acks) as p:
        futs = [p.send(t, b"v%d" % i) for i in range(50)]
        p.flush(30)
        metas = [f.result(0) for f in futs]
    if acks == 0:
        assert all(m.offset == -1 for m in metas)  # no response, no offset (as Java)
    else:
        assert [m.offset for m in metas] == list(range(50))
    assert len(read_back(kafka.bootstrap, t, 1, 50)) == 50


def _count_rounds(p):
    rounds = []
    sender = p.aio.sender if isinstance(p, kpax.Producer) else p.sender
    real = sender._round
    sender._round = lambda: (rounds.append(1), real())  # (read at each round)
    return rounds


def test_keyed_sends_to_many_partitions_cost_no_round_or_hand_over_per_batch(
    kafka, topic, monkeypatch
):
    # 300 keyed records to 100 partitions open ~100 batches: each used to wake
    # the sender (a round reading every partition queue) and hand the I/O thread
    # the GIL -- a collapse to ~2k records/s at 1,000 partitions. Now the batches
    # wait for their linger (one timer, for the oldest), and go out together.
    t = topic(partitions=100)
    # (no hand-over for time either: the caller lets the loop run once a ms)
    monkeypatch.setattr(accumulator, "YIELD_EVERY", 60.0)
    with kpax.Producer(kafka.bootstrap, linger_ms=1000) as p:
        p.send(t, b"warm", key=b"warm").result(30)
        handovers = []
        real = p._hand_over
        p._hand_over = lambda: (handovers.append(1), real())
        rounds = _count_rounds(p)
        futs = [p.send(t, b"v%d" % i, key=b"key-%d" % i) for i in range(300)]
        opened = sum(1 for f in futs if f.batch_index == 0)
        n_rounds, n_handovers = len(rounds), len(handovers)
        assert opened > 80
        assert n_rounds <= 3, (n_rounds, opened)
        assert n_handovers <= 3, (n_handovers, opened)
        p.flush(30)
        metas = [f.result(0) for f in futs]
    assert [m.partition for m in metas] == [
        partition_for_key(b"key-%d" % i, 100) for i in range(300)
    ]
    assert len(read_back(kafka.bootstrap, t, 100, 301)) == 301


async def test_asyncio_keyed_sends_to_many_partitions_cost_no_round_per_batch(
    kafka, topic, monkeypatch
):
    t = topic(partitions=100)
    monkeypatch.setattr(accumulator, "YIELD_EVERY", 60.0)
    async with kpax.aio.Producer(kafka.bootstrap, linger_ms=1000) as p:
        await (await p.send(t, b"warm", key=b"warm"))
        rounds = _count_rounds(p)
        futs = [await p.send(t, b"v%d" % i, key=b"key-%d" % i) for i in range(300)]
        opened = sum(1 for f in futs if f.batch_index == 0)
        n_rounds = len(rounds)
        assert opened > 80
        assert n_rounds <= 3, (n_rounds, opened)
        await p.flush(30)
        metas = [await f for f in futs]
    assert [m.partition for m in metas] == [
        partition_for_key(b"key-%d" % i, 100) for i in range(300)
    ]


def test_batch_size_linger_and_in_flight_pipelining(kafka, topic):
    t = topic(partitions=2)
    with kpax.Producer(
        kafka.bootstrap, batch_size=2000, linger_ms=1000, max_in_flight_requests_per_connection=5
    ) as p:
        t0 = time.monotonic()
        f = p.send(t, b"solo", partition=0)
        f.result(10)
        assert time.monotonic() - t0 >= 0.9  # lingered
        futs = [p.send(t, b"y" * 100, partition=1) for _ in range(2000)]
        p.flush(30)
        assert [x.result(0).offset for x in futs] == list(range(2000))
        assert p.aio.sender.in_flight == 0


def test_the_caller_hands_the_io_thread_the_gil_at_each_full_batch(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap, batch_size=2048, linger_ms=5) as p:
        handovers = []
        real = p._hand_over
        p._hand_over = lambda: (handovers.append(1), real())  # (read at each call)
        futs = [p.send(t, b"x" * 100) for _ in range(500)]
        opened = sum(1 for f in futs if f.batch_index == 0)
        # a batch opened by the record that did not fit in the full one: the
        # full batch is to be sent, so the I/O thread gets the GIL
        rolled = sum(1 for f in futs if f.batch_index == 0 and f._batch.rolled)
        assert rolled > 10  # (~17 records per 2 KiB batch)
        assert rolled <= len(handovers) <= opened
        opened = len(handovers)
        bulk = p.send_many(t, [b"y" * 100] * 200)
        assert len(handovers) > opened  # send_many opened batches too
        p.flush(30)
        assert [f.result(0).offset for f in futs] == list(range(500))
        assert bulk.result(30) == 200


def test_a_callback_on_the_io_thread_may_send_and_open_batches(kafka, topic):
    t = topic(partitions=1)
    done = threading.Event()
    sent: list[int] = []
    # 1 KiB batches: each of these 600-byte records opens one, on the I/O thread
    # (where the hand-over returns at once: tests/unit/test_loop_thread_idle.py)
    with kpax.Producer(kafka.bootstrap, batch_size=1024, linger_ms=0) as p:

        def chain(meta, err):
            assert err is None
            sent.append(meta.offset)
            if len(sent) < 30:
                p.send(t, b"c" * 600, callback=chain)
            else:
                done.set()

        t0 = time.monotonic()
        p.send(t, b"c" * 600, callback=chain)
        assert done.wait(60)
        elapsed = time.monotonic() - t0
    assert sent == list(range(30))
    assert elapsed < 30


def test_callbacks_run_with_metadata_or_error(kafka, topic):
    t = topic()
    seen: list[tuple[object, object]] = []
    done = threading.Event()
    with kpax.Producer(kafka.bootstrap) as p:
        p.send(t, b"v", callback=lambda m, e: (seen.append((m, e)), done.set()))
        assert done.wait(30)
        f = p.send(t, b"w")
        f.result(30)
        f.add_callback(lambda m, e: seen.append((m, e)))  # already done: runs at once
    assert seen[0][0].offset == 0 and seen[0][1] is None
    assert seen[1][0].offset == 1


def test_buffer_memory_back_pressure_blocks_then_raises(kafka):
    # no broker behind this address: batches never leave, memory never frees
    with kpax.Producer(kafka.bootstrap, buffer_memory=64 * 1024, batch_size=16384, max_block_ms=800,
                       linger_ms=10000) as p:  # fmt: skip
        t = f"bp-{uuid.uuid4().hex[:8]}"
        # 6 partitions: each keyed record opens a batch on another partition
        p.send(t, b"v")  # auto-creates the topic (1 partition)
        p.aio.accumulator.reserved = p.aio.accumulator.buffer_memory  # simulate a full pool
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
            p.send(t, b"x" * 20000)  # needs a new batch
        assert 0.7 < time.monotonic() - t0 < 3
        p.aio.accumulator.reserved = 0


def test_close_zero_fails_buffered_records_clearly(kafka, topic):
    t = topic()
    p = kpax.Producer(kafka.bootstrap, linger_ms=60000, batch_size=1 << 20)
    futs = [p.send(t, b"v") for _ in range(10)]
    t0 = time.monotonic()
    p.close(0)
    assert time.monotonic() - t0 < 3
    for f in futs:
        with pytest.raises(ClientClosedError, match=r"before 10 record.*never sent") as info:
            f.result(1)
        assert not info.value.outcome_unknown
    with pytest.raises(ClientClosedError):
        p.send(t, b"late")


def test_dead_cluster_ends_in_delivery_timeout_errors(kafka_factory):
    cluster = kafka_factory(1)
    t = f"dead-{uuid.uuid4().hex[:8]}"
    p = kpax.Producer(
        cluster.bootstrap, delivery_timeout_ms=4000, request_timeout_ms=1500, linger_ms=0
    )
    try:
        p.send(t, b"warm").result(30)
        cluster.stop()
        t0 = time.monotonic()
        futs = [p.send(t, b"v%d" % i) for i in range(20)]
        for f in futs:
            with pytest.raises(KafkaTimeoutError, match=f"{t}-0"):
                f.result(30)
        assert time.monotonic() - t0 < 30  # delivery_timeout_ms (4 s) plus slack for a busy machine
    finally:
        p.close(2)


async def test_asyncio_producer(kafka, topic):
    t = topic(partitions=3)
    async with kpax.aio.Producer(kafka.bootstrap, linger_ms=2) as p:
        fut = await p.send(t, b"v", key=b"k", headers=[("a", b"1")])
        meta = await fut
        assert meta.partition == partition_for_key(b"k", 3) and meta.offset == 0
        futs = [await p.send(t, b"x%d" % i, partition=1) for i in range(500)]
        await p.flush(30)
        assert [(await f).offset for f in futs] == list(range(500))
        other = ({0, 2} - {partition_for_key(b"k", 3)}).pop()
        m = await p.send_and_wait(t, b"last", partition=other)
        assert (m.partition, m.offset) == (other, 0)
        assert await p.partitions_for(t) == [0, 1, 2]


def test_many_threads_share_one_producer(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap) as p:
        results: list[list[int]] = [[] for _ in range(4)]

        def work(i: int) -> None:
            futs = [p.send(t, b"%d-%d" % (i, j)) for j in range(500)]
            results[i] = [f.result(30).offset for f in futs]

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        # batches sealed by four threads kept their sequence order: no epoch reset
        assert p.aio.identity is not None and p.aio.identity.bumps == 0
        assert p.aio.sender.retried_batches == 0
    offsets = sorted(o for r in results for o in r)
    assert offsets == list(range(2000))
    for r in results:
        assert r == sorted(r)  # each thread's records stay in its order
