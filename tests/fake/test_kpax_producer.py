"""kpax's producers through FakeKafka: acks 0/1/all, idempotence, compressed
batches, sync and asyncio faces; what lands in the log is read back from the
fake's own store, batch by batch."""

from __future__ import annotations

import asyncio
import time

import pytest

import kpax
from kpax.proto.records import decode_batches
from kpax.testing.fake import FakeKafka
from tests.wait import eventually


def _batches(fake: FakeKafka, topic: str, partition: int = 0) -> list:
    data = fake.call(lambda c: [b.data for b in c.partition(topic, partition).log.batches])
    return [next(decode_batches(d)) for d in data]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_sync_producer_acks(fake_kafka, acks):
    fake_kafka.create_topic("t", 2)
    opts = {"enable_idempotence": False} if acks != "all" else {}
    with kpax.Producer(fake_kafka.bootstrap, acks=acks, linger_ms=0, **opts) as p:
        futures = [p.send("t", b"v%d" % i, partition=i % 2) for i in range(20)]
        p.flush(10)
        metas = [f.result(10) for f in futures]
    if acks == 0:
        assert all(m.offset == -1 for m in metas)  # acks=0: no offsets come back
    else:
        assert sorted(m.offset for m in metas if m.partition == 0) == list(range(10))
    eventually(lambda: fake_kafka.high_watermark("t", 0) == 10, timeout=5)
    values = [v for _o, _k, v in fake_kafka.records("t", 0)]
    assert values == [b"v%d" % i for i in range(0, 20, 2)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent(fake_kafka, codec):
    fake_kafka.create_topic("c", 1)
    with kpax.Producer(fake_kafka.bootstrap, compression_type=codec, linger_ms=50) as p:
        for i in range(100):
            p.send("c", b"x" * 100 + b"%d" % i, key=b"k%d" % i)
        p.flush(10)
    batches = _batches(fake_kafka, "c")
    assert {b.compression for b in batches} == {codec}
    assert batches[0].producer_id >= 0 and batches[0].base_sequence == 0  # idempotent default
    offsets = [r[0] for b in batches for r in b.tuples()]
    assert offsets == list(range(100))  # the broker's base offsets + the records' deltas
    with kpax.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c:
        tp = kpax.TopicPartition("c", 0)
        c.assign([tp])
        got: list[bytes] = []
        eventually(lambda: got.extend(r.value for r in c.poll(timeout=0.2)) or len(got) == 100)
    assert got[-1] == b"x" * 100 + b"99"


def test_idempotent_batches_carry_sequences(fake_kafka):
    fake_kafka.create_topic("i", 1)
    with kpax.Producer(fake_kafka.bootstrap, linger_ms=0, batch_size=200) as p:
        for i in range(30):
            p.send("i", b"%03d" % i)
        p.flush(10)
    batches = _batches(fake_kafka, "i")
    assert len({b.producer_id for b in batches}) == 1
    seqs = [(b.base_sequence, b.base_offset) for b in batches]
    # sequence of a batch = offset of its first record (one producer, one partition)
    assert all(seq == off for seq, off in seqs)


def test_asyncio_producer(fake_kafka):
    fake_kafka.create_topic("a", 3)

    async def main() -> list[int]:
        async with kpax.aio.Producer(fake_kafka.bootstrap, linger_ms=1) as p:
            futures = [await p.send("a", b"%d" % i, key=b"%d" % (i % 7)) for i in range(90)]
            metas = await asyncio.gather(*futures)
        return [m.partition for m in metas]

    parts = asyncio.run(main())
    assert len(parts) == 90
    assert sum(fake_kafka.high_watermark("a", p) for p in range(3)) == 90


def test_auto_created_topic(fake_kafka):
    with kpax.Producer(fake_kafka.bootstrap) as p:
        p.send("auto", b"v").result(10)
    assert fake_kafka.topics() == {"auto": 1}


@pytest.mark.fake_kafka(config={"auto.create.topics.enable": False})
def test_unknown_topic_times_out_without_auto_create(fake_kafka):
    with kpax.Producer(fake_kafka.bootstrap, max_block_ms=300) as p, pytest.raises(kpax.KafkaError):
        p.send("missing", b"v").result(5)
    assert fake_kafka.topics() == {}


def test_a_delivery_callback_written_the_confluent_way_gets_the_error_first(fake_kafka):
    """confluent-kafka's on_delivery is ``(err, msg)``: called kpax's way,
    ``(metadata, None)``, its ``if err:`` reported every success as a failure."""
    fake_kafka.create_topic("cb", 1)
    got: list[tuple[object, object]] = []

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        got.append((err, msg))

    def plain(meta, exc):  # type: ignore[no-untyped-def]
        got.append((meta, exc))

    with kpax.Producer(fake_kafka.bootstrap, linger_ms=0) as p:
        p.send("cb", b"a", callback=on_delivery)
        p.send("cb", b"b", callback=plain)
        p.send_many("cb", [b"c"], callback=on_delivery)
        p.flush(10)
    assert len(got) == 3
    (err, msg), (meta, exc), (err2, msg2) = got
    assert err is None and isinstance(msg, kpax.RecordMetadata) and msg.offset == 0
    assert exc is None and isinstance(meta, kpax.RecordMetadata) and meta.offset == 1
    assert err2 is None and isinstance(msg2, kpax.RecordMetadata) and msg2.offset == 2


def test_kafka_python_callback_shapes(fake_kafka):
    """kafka-python's ``future.add_callback(fn(metadata))`` and
    ``add_errback(fn(exc))``: the one-argument callback was called with two
    (only a logged TypeError) and add_errback did not exist."""
    fake_kafka.create_topic("kp", 1)
    seen: list[object] = []
    with kpax.Producer(fake_kafka.bootstrap, linger_ms=0) as p:
        fut = p.send("kp", b"a")
        fut.add_callback(lambda meta: seen.append(("ok", meta.offset)))
        fut.add_errback(lambda exc: seen.append(("failed", exc)))
        p.flush(10)
        fut.result(10)
    assert seen == [("ok", 0)]


def test_records_gather_in_one_batch_while_the_broker_is_busy(fake_kafka):
    # A batch whose linger is over stays open until a request can take it
    # (Java's and librdkafka's rule): while the broker's one request in flight
    # waits, a partition's records go into one batch. (Closed at its linger,
    # each record here made a batch of its own: with keyed records to 1,000
    # partitions, requests of ~1,000 one-record batches the broker took seconds
    # to answer.)
    fake_kafka.create_topic("t", 2)
    with kpax.Producer(
        fake_kafka.bootstrap, linger_ms=5, max_in_flight_requests_per_connection=1
    ) as p:
        p.send("t", b"warm", partition=0).result(10)
        fault = fake_kafka.inject("Produce", delay_ms=3000)
        first = p.send("t", b"first", partition=0)
        eventually(lambda: fault.hits == 1, timeout=5)  # in flight, answered in 3 s
        futures = []
        for i in range(10):
            futures.append(p.send("t", b"v%d" % i, partition=1))
            time.sleep(0.01)  # (pacing: each record comes after the last one's linger)
        p.flush(10)
        assert first.result(10).offset == 1
        assert [f.result(10).offset for f in futures] == list(range(10))
    (batch,) = _batches(fake_kafka, "t", 1)
    assert [r.value for r in batch] == [b"v%d" % i for i in range(10)]


def test_close_while_a_split_batchs_parts_are_unanswered_fails_their_records(fake_kafka):
    """A batch refused as too large is sent again as two parts. A close that
    times out while those parts are unanswered fails every record of the batch
    with ClientClosedError, outcome unknown (the parts were sent: they may be
    written). (The batch itself was failed, as never sent, and its parts left
    pending: each record's outcome is its part's, so the records of the part
    not sent yet read as delivered, at offset -1.)"""
    fake_kafka.create_topic("split", 1)
    fake_kafka.inject("Produce", error="MESSAGE_TOO_LARGE", nth=1)
    fake_kafka.inject("Produce", delay_ms=20_000, nth=2, times=None)  # the parts: unanswered
    p = kpax.Producer(fake_kafka.bootstrap, linger_ms=50)
    futures = [p.send("split", b"v%d" % i, partition=0) for i in range(4)]
    eventually(lambda: p.aio.sender.split_batches == 1, timeout=10)
    p.close(0.5)
    for f in futures:
        err = f.exception(0)
        assert isinstance(err, kpax.errors.ClientClosedError), (f, err)
        assert err.outcome_unknown and "outcome is unknown" in str(err)


async def _after_a_round(p: kpax.aio.Producer) -> None:
    """Return once the sender's round woken by the sends so far has run."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not p.sender.wake_pending()


def _in_flight_while_the_broker_is_busy(
    fake: FakeKafka, topic: str, partitions: int, value: bytes
) -> list[int]:
    """Every partition acknowledged once; then the broker holds its answer to the
    next Produce request for 1.5 s while three rounds of one record per
    partition are sent, each round after the sender took (or held) the last.
    Returns the requests in flight after each round."""
    in_flight: list[int] = []

    async def main() -> None:
        async with kpax.aio.Producer(fake.bootstrap, linger_ms=0) as p:
            warm = [await p.send(topic, b"warm", partition=i) for i in range(partitions)]
            await asyncio.gather(*warm)
            fake.inject("Produce", delay_ms=1500)
            futures = []
            for r in range(3):
                futures += [
                    await p.send(topic, value + b"%d" % r, partition=i) for i in range(partitions)
                ]
                await _after_a_round(p)
                in_flight.append(p.sender.in_flight)
            await asyncio.gather(*futures)

    asyncio.run(main())
    for i in range(partitions):  # each partition's records once, in order
        assert [v for _o, _k, v in fake.records(topic, i)] == [b"warm"] + [
            value + b"%d" % r for r in range(3)
        ]
    return in_flight


def test_thin_batches_to_many_partitions_wait_for_the_request_in_flight(fake_kafka):
    """Keyed records to many partitions make requests of a record or two per
    partition, and a broker's cost per partition of a request is fixed: while
    one such request is in flight, the next ones' batches wait for its answer
    (taking records meanwhile) and go in one request. (Pipelined up to five
    in flight, each carried ~2 records per partition at 1,000 partitions: about
    half the rate of one in flight, in an ad hoc run.)"""
    fake_kafka.create_topic("wide", 40)
    assert _in_flight_while_the_broker_is_busy(fake_kafka, "wide", 40, b"v") == [1, 1, 1]
    for i in range(40):  # the warm batch, the request held up, one for the rest
        assert len(_batches(fake_kafka, "wide", i)) <= 3


def test_full_batches_are_still_pipelined_while_the_broker_is_busy(fake_kafka):
    """Batches of 16 KiB and more are worth pipelining: they go while an
    earlier request is in flight, up to max_in_flight_requests_per_connection."""
    fake_kafka.create_topic("full", 2)
    in_flight = _in_flight_while_the_broker_is_busy(fake_kafka, "full", 2, b"x" * 20_000)
    assert in_flight[-1] >= 3, in_flight  # (held, it would stay at 1)


def test_thin_batches_a_flush_closed_are_not_held_back(fake_kafka):
    """A flush closes the open batches: waiting would not make them fuller, so
    they go at once, pipelined behind the request in flight."""
    fake_kafka.create_topic("flushed", 40)

    async def main() -> list[int]:
        async with kpax.aio.Producer(fake_kafka.bootstrap, linger_ms=0) as p:
            warm = [await p.send("flushed", b"warm", partition=i) for i in range(40)]
            await asyncio.gather(*warm)
            fake_kafka.inject("Produce", delay_ms=1500)
            first = [await p.send("flushed", b"a", partition=i) for i in range(40)]
            await _after_a_round(p)
            before = p.sender.in_flight
            second = [await p.send("flushed", b"b", partition=i) for i in range(40)]
            flushing = asyncio.ensure_future(p.flush())
            await _after_a_round(p)
            during = p.sender.in_flight
            await flushing
            await asyncio.gather(*first, *second)
            return [before, during]

    assert asyncio.run(main()) == [1, 2]
    for i in range(40):
        assert [v for _o, _k, v in fake_kafka.records("flushed", i)] == [b"warm", b"a", b"b"]
