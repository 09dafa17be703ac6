"""``Producer.send_many`` against a real broker: keyless, keyed and explicit
partitions, per-partition order, byte-for-byte read back with kpax.Consumer,
batch splitting, idempotence, transactions, buffer memory, errors, and the
asyncio face."""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

import pytest

import kpax
from kpax.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
    TransactionAbortedError,
)
from kpax.producer.partitioner import partition_for_key

pytestmark = pytest.mark.integration


def _read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted"
) -> dict[int, list[Any]]:
    """partition -> its records (kpax ConsumerRecords) in offset order, up to the end
    (checked: every offset once; none missing, without transactions)."""
    tps = [kpax.TopicPartition(topic, p) for p in range(partitions)]
    out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
    with kpax.Consumer(bootstrap, isolation_level=isolation) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "records not read back in time"
            for r in consumer.poll(timeout=0.5):
                out[r.partition].append(r)
    for p, recs in out.items():
        recs.sort(key=lambda r: r.offset)
        offsets = [r.offset for r in recs]
        if isolation == "read_uncommitted":
            assert offsets == list(range(len(recs))), f"{topic}-{p} offsets"
        else:  # transaction markers take offsets too
            assert len(set(offsets)) == len(offsets), f"{topic}-{p} offsets"
    return out


def test_keyless_single_partition_round_trip_and_metadata(kafka: Any, topic: Any) -> None:
    t = topic(1)
    values = [b"v%d-" % i + bytes(range(i % 256)) for i in range(5000)]
    with kpax.Producer(kafka.bootstrap, batch_size=16384) as p:
        fut = p.send_many(t, values, headers=[("h", b"x")], timestamp=1_700_000_000_000)
        assert isinstance(fut, kpax.BulkFuture) and len(fut) == 5000
        assert fut.result(30) == 5000 and fut.done() and fut.failed_count == 0
        assert fut.exception(0) is None
        metas = fut.metadata()
        assert [m.offset for m in metas] == list(range(5000))
        assert all(m.topic == t and m.partition == 0 for m in metas)
        assert metas[0].timestamp == 1_700_000_000_000
        assert len(fut._batches) > 20  # ~5000 * 150 bytes: many 16 KiB batches
    got = _read_all(kafka.bootstrap, t, 1)[0]
    assert [r.value for r in got] == values
    assert all(r.key is None for r in got)
    assert all(r.headers == (("h", b"x"),) for r in got)
    assert {r.timestamp for r in got} == {1_700_000_000_000}


def test_keyless_multi_partition_fills_a_batch_then_moves(kafka: Any, topic: Any) -> None:
    t = topic(4)
    values = [b"%06d" % i + b"x" * 94 for i in range(3000)]  # 100 bytes: 110 counted
    with kpax.Producer(kafka.bootstrap, batch_size=16384, linger_ms=1000) as p:
        fut = p.send_many(t, values)
        assert fut.result(30) == 3000
        parts = [m.partition for m in fut.metadata()]
    # sticky: runs of one full batch (16323 // 110 = 148 records) per partition
    runs = [1]
    for a, b in itertools.pairwise(parts):
        if a == b:
            runs[-1] += 1
        else:
            runs.append(1)
    # (a new sticky partition is drawn at random: it may be the same one again)
    assert len(runs) > 5 and all(r % 148 == 0 for r in runs[:-1])
    got = _read_all(kafka.bootstrap, t, 4)
    assert sorted(r.value for recs in got.values() for r in recs) == values
    for recs in got.values():  # each partition keeps call order
        vals = [r.value for r in recs]
        assert vals == sorted(vals)


def test_keyed_records_go_where_send_puts_them_in_order(kafka: Any, topic: Any) -> None:
    t = topic(6)
    keys: list[bytes | None] = [uuid.uuid4().bytes[: 1 + i % 8] for i in range(2000)]
    keys[100:150] = [None] * 50  # a run of keyless records in the middle
    values = [b"%05d" % i for i in range(2000)]
    with kpax.Producer(kafka.bootstrap, batch_size=4096) as p:
        fut = p.send_many(t, values, keys)
        assert fut.result(30) == 2000
        metas = fut.metadata()
    for i, (k, m) in enumerate(zip(keys, metas, strict=True)):
        if k is not None:
            assert m.partition == partition_for_key(k, 6), i
    got = _read_all(kafka.bootstrap, t, 6)
    seen = {}
    for part, recs in got.items():
        vals = [r.value for r in recs]
        assert vals == sorted(vals)  # call order within each partition
        for r in recs:
            seen[r.value] = (r.key, part, r.offset)
    assert len(seen) == 2000
    for i, m in enumerate(metas):
        assert seen[values[i]] == (keys[i], m.partition, m.offset)


def test_same_key_and_explicit_partition(kafka: Any, topic: Any) -> None:
    t = topic(3)
    with kpax.Producer(kafka.bootstrap) as p:
        a = p.send_many(t, [b"a%d" % i for i in range(100)], [b"K"] * 100)
        b = p.send_many(t, [b"b%d" % i for i in range(100)], partition=2)
        c = p.send_many(t, [b"c%d" % i for i in range(10)], [b"k%d" % i for i in range(10)],
                        partition=1)  # fmt: skip
        assert (a.result(30), b.result(30), c.result(30)) == (100, 100, 10)
        assert {m.partition for m in a.metadata()} == {partition_for_key(b"K", 3)}
        assert {m.partition for m in b.metadata()} == {2}
        assert {m.partition for m in c.metadata()} == {1}
        with pytest.raises(ValueError, match="no partition 3"):
            p.send_many(t, [b"x"], partition=3)
        with pytest.raises(ValueError, match="parallel"):
            p.send_many(t, [b"x", b"y"], [b"k"])
    got = _read_all(kafka.bootstrap, t, 3)
    assert [r.value for r in got[2]][-100:] == [b"b%d" % i for i in range(100)]
    assert [(r.key, r.value) for r in got[1]][-10:] == [(b"k%d" % i, b"c%d" % i) for i in range(10)]


def test_serializers_callback_and_type_errors(kafka: Any, topic: Any) -> None:
    t = topic(1)
    calls: list[Any] = []
    with kpax.Producer(kafka.bootstrap, value_serializer="json", key_serializer="str") as p:
        fut = p.send_many(
            t, [{"n": i} for i in range(5)], [f"k{i}" for i in range(5)],
            callback=lambda m, e: calls.append((m.offset if m else None, e)),
        )  # fmt: skip
        assert fut.result(30) == 5
        p.flush()
    assert sorted(calls) == [(i, None) for i in range(5)]
    with kpax.Producer(kafka.bootstrap) as p:
        with pytest.raises(TypeError, match="value"):
            p.send_many(t, [b"ok", 5])
        # bytearray/memoryview are copied, as send does
        assert p.send_many(t, [bytearray(b"ba"), memoryview(b"mv")]).result(30) == 2
        with pytest.raises(MessageTooLargeError, match="nothing of this send_many"):
            p.send_many(t, [b"small", b"x" * 2_000_000])
        assert p.send_many(t, []).result(1) == 0
    got = _read_all(kafka.bootstrap, t, 1)[0]
    assert [r.value for r in got] == [b'{"n":%d}' % i for i in range(5)] + [b"ba", b"mv"]
    assert [r.key for r in got][:5] == [b"k%d" % i for i in range(5)]


def test_idempotent_producer_sequences(kafka: Any, topic: Any) -> None:
    t = topic(2)
    with kpax.Producer(kafka.bootstrap, enable_idempotence=True, batch_size=2048) as p:
        futs = [p.send_many(t, [b"%d-%04d" % (r, i) for i in range(500)]) for r in range(4)]
        futs.append(p.send_many(t, [b"single"], partition=0))
        assert [f.result(30) for f in futs] == [500, 500, 500, 500, 1]
    got = _read_all(kafka.bootstrap, t, 2)
    vals = [r.value for recs in got.values() for r in recs]
    assert len(vals) == 2001 and len(set(vals)) == 2001


def test_transactional_commit_and_abort(kafka: Any, topic: Any) -> None:
    t = topic(2)
    tid = f"txn-{uuid.uuid4().hex[:10]}"
    with kpax.Producer(kafka.bootstrap, transactional_id=tid, batch_size=4096) as p:
        p.init_transactions()
        with pytest.raises(IllegalStateError):
            p.send_many(t, [b"outside"])  # only inside a transaction
        p.begin_transaction()
        ok = p.send_many(
            t, [b"committed-%04d" % i for i in range(300)], [b"%d" % i for i in range(300)]
        )
        p.commit_transaction()
        assert ok.result(0) == 300
        p.begin_transaction()
        aborted = p.send_many(t, [b"aborted-%04d" % i for i in range(300)])
        p.abort_transaction()
        err = aborted.exception(10)
        if err is not None:  # unsent batches fail; batches already sent are aborted on the broker
            assert isinstance(err, TransactionAbortedError) or aborted.failed_count == 0
        p.begin_transaction()
        p.send_many(t, [b"last"], partition=0)
        p.commit_transaction()
    committed = _read_all(kafka.bootstrap, t, 2, "read_committed")
    vals = sorted(r.value for recs in committed.values() for r in recs)
    assert vals == sorted([b"committed-%04d" % i for i in range(300)] + [b"last"])


def test_aborted_unsent_batches_fail_with_the_count(kafka: Any, topic: Any) -> None:
    t = topic(1)
    tid = f"txn-{uuid.uuid4().hex[:10]}"
    with kpax.Producer(kafka.bootstrap, transactional_id=tid, linger_ms=60_000,
                       batch_size=1 << 20) as p:  # fmt: skip
        p.init_transactions()
        p.begin_transaction()
        fut = p.send_many(t, [b"a%d" % i for i in range(50)])  # one open batch, lingering
        p.abort_transaction()
        with pytest.raises(TransactionAbortedError, match=rf"50 of 50 record\(s\).*{t}-0"):
            fut.result(10)
        assert fut.failed_count == 50


def test_small_buffer_memory_blocks_and_completes(kafka: Any, topic: Any) -> None:
    t = topic(1)
    values = [b"%06d" % i + b"y" * 200 for i in range(20000)]  # ~4.5 MB
    with kpax.Producer(kafka.bootstrap, buffer_memory=64 * 1024, batch_size=16384) as p:
        fut = p.send_many(t, values)
        assert fut.result(60) == 20000
    got = _read_all(kafka.bootstrap, t, 1)[0]
    assert [r.value for r in got] == values


def test_full_buffer_times_out_after_max_block(kafka: Any, topic: Any) -> None:
    t = topic(1)
    with kpax.Producer(kafka.bootstrap, buffer_memory=64 * 1024, max_block_ms=800) as p:
        p.send_many(t, [b"v"]).result(30)
        acc = p.aio.accumulator
        acc.reserved = acc.buffer_memory  # simulate a pool nobody frees
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="buffer_memory"):
            p.send_many(t, [b"x" * 20000] * 3)
        assert 0.7 < time.monotonic() - t0 < 3
        acc.reserved = 0
        p.close(0)


def test_full_buffer_after_a_partial_fill_hands_back_what_was_buffered(
    kafka_factory: Any,
) -> None:
    """Records a send_many buffered before it timed out on memory are sent:
    the error carries their BulkFuture, so a caller can count them (and not
    send them twice). The broker is paused, so nothing frees memory."""
    cluster = kafka_factory(1)
    t = f"partial-{uuid.uuid4().hex[:8]}"
    p = kpax.Producer(
        cluster.bootstrap,
        buffer_memory=2 * 20100 + 100,
        max_block_ms=800,
        linger_ms=0,
        batch_size=16384,  # (each 20,000-byte record a batch of its own)
    )
    try:
        p.send(t, b"v").result(30)
        cluster.pause_broker(1)
        with pytest.raises(KafkaTimeoutError, match=r"2 record.*buffered") as info:
            p.send_many(t, [b"x" * 20000] * 5)
        partial = info.value.partial  # type: ignore[attr-defined]
        assert partial is not None and partial.count == 2
        cluster.resume_broker(1)
        assert partial.result(60) == 2
    finally:
        cluster.resume_broker(1)
        p.close(10)
    with kpax.Consumer(cluster.bootstrap) as c:
        tp = kpax.TopicPartition(t, 0)
        assert c.end_offsets([tp])[tp] == 3


def test_unknown_topic_and_closed_producer(kafka: Any) -> None:
    p = kpax.Producer(kafka.bootstrap, max_block_ms=1000, allow_auto_create_topics=False)
    t0 = time.monotonic()
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaTimeoutError, match=missing):
        p.send_many(missing, [b"x", b"y"])
    assert time.monotonic() - t0 < 5
    p.close()
    with pytest.raises(ClientClosedError):
        p.send_many(missing, [b"x"])


def test_closed_producer_known_topic(kafka: Any, topic: Any) -> None:
    t = topic(1)
    p = kpax.Producer(kafka.bootstrap)
    p.send_many(t, [b"x"]).result(30)
    p.close()
    with pytest.raises(ClientClosedError, match="closed"):
        p.send_many(t, [b"y"])


def test_close_zero_fails_buffered_bulk(kafka: Any, topic: Any) -> None:
    t = topic(1)
    p = kpax.Producer(kafka.bootstrap, linger_ms=60_000, batch_size=1 << 20)
    p.send_many(t, [b"w"])
    p.flush(30)
    fut = p.send_many(t, [b"z%d" % i for i in range(30)])
    p.close(0)
    with pytest.raises(ClientClosedError, match="30 of 30"):
        fut.result(5)
    assert fut.failed_count == 30 and fut.done()


async def test_asyncio_send_many(kafka: Any, topic: Any) -> None:
    t = topic(3)
    async with kpax.aio.Producer(kafka.bootstrap, batch_size=4096) as p:
        fut = await p.send_many(t, [b"%04d" % i for i in range(1000)])
        assert await fut == 1000
        keyed = await p.send_many(t, [b"v"] * 10, [b"k%d" % i for i in range(10)])
        assert await keyed == 10
        assert [m.partition for m in keyed.metadata()] == [
            partition_for_key(b"k%d" % i, 3) for i in range(10)
        ]
    got = _read_all(kafka.bootstrap, t, 3)
    assert sum(len(v) for v in got.values()) == 1010
