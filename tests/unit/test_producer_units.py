"""Producer pieces without a broker: options, serializers, the accumulator
(batching, memory, sticky partitioning, thread safety) and record futures."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any

import pytest

from kpax.errors import ConfigError, KafkaTimeoutError, SerializationError
from kpax.producer.accumulator import FULL, Accumulator, record_weight
from kpax.producer.batch import ProducerBatch, RecordFuture
from kpax.producer.batch_state import BatchEvent, BatchState
from kpax.producer.options import resolve_producer_config
from kpax.producer.partitioner import DefaultPartitioner
from kpax.producer.planning import check_headers as _headers
from kpax.producer.serializers import as_bytes, get_serializer
from kpax.proto.records import decode_batches, encode_columns


def _acc(**kw: object) -> Accumulator:
    args: dict[str, object] = {
        "batch_size": 1000,
        "linger_ms": 5,
        "buffer_memory": 10_000,
        "partitioner": DefaultPartitioner(1000),
        "wake": lambda: None,
    }
    args.update(kw)
    return Accumulator(**args)  # type: ignore[arg-type]


def _append(acc: Accumulator, value: bytes, partition: int = 0, n: int = 1) -> RecordFuture | None:
    return acc.append("t", partition, 1, None, value, None, n, record_weight(None, value, None))


# ------------------------------------------------------------------ options


def test_defaults_are_javas_but_batch_size():
    cfg = resolve_producer_config({})
    # batch_size: librdkafka's and franz-go's (a new batch reserves 16 KiB at first)
    assert cfg["acks"] == -1 and cfg["linger_ms"] == 5 and cfg["batch_size"] == 1_000_000
    assert cfg["enable_idempotence"] is True and cfg["delivery_timeout_ms"] == 120000
    assert cfg["max_in_flight_requests_per_connection"] == 5 and cfg["buffer_memory"] == 33554432


@pytest.mark.parametrize(("given", "want"), [("all", -1), ("1", 1), (0, 0), (-1, -1), ("ALL", -1)])
def test_acks_spellings(given, want):
    assert resolve_producer_config({"acks": given})["acks"] == want


def test_idempotence_quietly_off_for_acks_1_but_explicit_conflict_is_an_error():
    assert resolve_producer_config({"acks": 1})["enable_idempotence"] is False
    assert (
        resolve_producer_config({"max_in_flight_requests_per_connection": 6})["enable_idempotence"]
        is False
    )
    with pytest.raises(ConfigError, match="acks=0"):
        resolve_producer_config({"acks": 0, "enable_idempotence": True})


def test_bad_options_name_what_is_wrong():
    with pytest.raises(ConfigError, match="did you mean 'batch_size'"):
        resolve_producer_config({"batchsize": 1})
    with pytest.raises(ConfigError, match="compression_type"):
        resolve_producer_config({"compression_type": "brotli"})
    with pytest.raises(ConfigError, match="delivery_timeout_ms"):
        resolve_producer_config({"delivery_timeout_ms": 1000})
    with pytest.raises(ConfigError, match="acks"):
        resolve_producer_config({"acks": "some"})


# ------------------------------------------------------------------ serializers


def test_builtin_serializers():
    assert get_serializer("str", "value_serializer")("é") == "é".encode()  # type: ignore[misc]
    assert get_serializer("json", "value_serializer")({"a": 1}) == b'{"a":1}'  # type: ignore[misc]
    assert get_serializer("bytes", "value_serializer")(bytearray(b"x")) == b"x"  # type: ignore[misc]
    with pytest.raises(SerializationError, match="needs a str"):
        get_serializer("str", "value_serializer")(3)  # type: ignore[misc]
    with pytest.raises(SerializationError, match="json"):
        get_serializer("json", "value_serializer")(object())  # type: ignore[misc]
    with pytest.raises(ConfigError, match="value_serializer"):
        get_serializer("yaml", "value_serializer")


def test_as_bytes():
    assert as_bytes(memoryview(b"ab"), "value") == b"ab"
    assert as_bytes(None, "key") is None
    with pytest.raises(TypeError, match="key must be bytes or None, not int"):
        as_bytes(1, "key")


def test_headers_normalised():
    assert _headers({"a": "x", "b": None}) == [("a", b"x"), ("b", None)]
    assert _headers([("a", bytearray(b"1"))]) == [("a", b"1")]
    with pytest.raises(TypeError, match="header key must be str"):
        _headers([(b"a", b"1")])
    with pytest.raises(TypeError, match="pairs"):
        _headers(["abc"])


# ------------------------------------------------------------------ accumulator


def test_records_fill_a_batch_then_a_new_one_starts():
    acc = _acc()
    futs = [_append(acc, b"x" * 100) for _ in range(20)]
    pq = acc.queues["t"][0]
    assert all(f is not None for f in futs)
    # 1000-byte batches: 61 header + 110 per record (106 of weight: value, lengths;
    # 4 of batch fields: attributes, timestamp and offset deltas) -> 8 records each
    assert len(pq.ready) == 2 and pq.open is not None
    assert [len(b.values) for b in pq.ready] == [8, 8] and len(pq.open.values) == 4
    assert [f.batch_index for f in futs[:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]  # type: ignore[union-attr]
    data = encode_columns(pq.ready[0].timestamps, pq.ready[0].keys, pq.ready[0].values)
    (batch,) = decode_batches(data)
    # as full as the Java client fills it: a ninth record (109 bytes) would not fit
    assert len(list(batch)) == 8 and 1000 - 109 < len(data) <= 1000


def test_linger_and_flush_close_open_batches():
    acc = _acc(linger_ms=10_000)
    _append(acc, b"v")
    pq = acc.queues["t"][0]
    b = pq.open
    assert b is not None
    deadline = acc.drain_open(b.created + 1)
    assert deadline == pytest.approx(b.created + 10) and pq.open is b
    acc.flushing += 1
    assert acc.drain_open(b.created + 1) is None and pq.open is None and list(pq.ready) == [b]


def test_buffer_memory_full_then_released():
    acc = _acc(buffer_memory=2500)  # room for two 1000-byte batches
    assert _append(acc, b"a", partition=0) is not None
    assert _append(acc, b"b", partition=1) is not None
    assert _append(acc, b"c", partition=2) is FULL
    first = acc.queues["t"][0].open
    assert first is not None
    _sent(first).complete(0, -1, None)
    acc.release(first)
    assert acc.reserved == 1000
    assert _append(acc, b"c", partition=2) is not None


def test_wait_for_memory_wakes_on_release():
    acc = _acc(buffer_memory=1000)
    _append(acc, b"a")
    b = acc.queues["t"][0].open
    assert b is not None
    threading.Timer(0.1, acc.release, args=(b,)).start()
    assert acc.wait_for_memory(5.0) is True


def test_sender_is_woken_once_per_new_batch_while_sleeping():
    wakes: list[int] = []
    acc = _acc(wake=lambda: wakes.append(1))
    _append(acc, b"x")
    assert wakes == []  # sender not sleeping
    acc.drain_open(0.0)  # sender goes to sleep
    for _ in range(6):
        _append(acc, b"x" * 100)
    assert wakes == []  # same batch, not full
    for _ in range(20):
        _append(acc, b"x" * 100)
    assert wakes == [1]  # the first new batch woke it; it has not slept since


def test_no_wake_while_the_partition_has_all_it_may_in_flight():
    # The answer to one of those requests starts the sender's next round, which
    # sees the new batches: a wake-up now would start a round that sends nothing.
    wakes: list[int] = []
    acc = _acc(wake=lambda: wakes.append(1))
    acc.in_flight_cap = 2
    _append(acc, b"x")
    pq = acc.queues["t"][0]
    pq.in_flight.extend(["request 1", "request 2"])  # type: ignore[list-item]
    acc.drain_open(0.0)  # the sender goes to sleep (the batch has not lingered yet)
    for _ in range(30):
        _append(acc, b"x" * 100)
    assert len(pq.ready) >= 3
    assert wakes == []
    pq.in_flight.pop()  # one answered: the sender may send again, so it is woken
    for _ in range(10):
        _append(acc, b"x" * 100)
    assert wakes == [1]


def test_a_batch_opened_behind_the_sender_timer_wakes_nobody():
    # keyed records to many partitions open a batch almost per record: the
    # sleeping sender's linger timer (for the oldest open batch) comes first,
    # so none of them needs a wake-up; one opened with no timer armed does
    wakes: list[int] = []
    acc = _acc(wake=lambda: wakes.append(1), buffer_memory=1_000_000)
    acc.drain_open(0.0)  # asleep, nothing open: no timer
    _append(acc, b"x", partition=0, n=100)
    assert wakes == [1]
    deadline = acc.drain_open(0.0)  # asleep again, the timer for partition 0's batch
    assert deadline == acc.wake_at
    for p in range(1, 100):
        _append(acc, b"x", partition=p, n=100)
    assert wakes == [1]
    # the round the timer starts hands the sender every batch due, from the
    # oldest on (they stay open until it takes them)
    assert acc.drain_open(float("inf")) is None
    queues = list(acc.queues["t"].values())
    assert all(acc.open_due(pq, float("inf")) is pq.open is not None for pq in queues)
    assert acc.wake_at == float("inf") and not acc.lingering
    assert len(acc.ready_queues) == 100


def test_a_lingered_batch_takes_records_until_the_sender_takes_it():
    # Java's and librdkafka's rule: a batch whose linger is over stays open
    # until a request takes it, so while the broker's requests are in flight a
    # partition's records gather in one batch (closed at its linger, keyed
    # records to 1,000 partitions went one record per batch, ~1,000 batches
    # per request, and the broker took seconds to answer each)
    acc = _acc(linger_ms=5)
    _append(acc, b"a")
    pq = acc.queues["t"][0]
    b = pq.open
    assert b is not None
    acc.drain_open(b.created + 1)  # lingered: handed to the sender
    assert pq in acc.ready_queues and acc.open_due(pq, b.created + 1) is b
    _append(acc, b"b")  # the sender could not send it yet: the batch takes it
    assert pq.open is b and b.values == [b"a", b"b"] and not pq.ready
    with acc.lock:
        acc.take_open(pq, b)  # the sender takes it: closed, the next record opens a batch
    assert pq.open is None
    _append(acc, b"c")
    assert pq.open is not b and pq.open is not None and pq.open.values == [b"c"]
    # a flush closes the lingered batches handed over and not taken yet
    c = pq.open
    acc.drain_open(c.created + 1)
    acc.flushing += 1
    acc.drain_open(c.created + 1)
    assert pq.open is None and list(pq.ready) == [c]


def test_a_new_batch_reserves_a_chunk_and_grows_to_batch_size():
    acc = _acc(batch_size=100_000, buffer_memory=1_000_000)
    _append(acc, b"x" * 100)
    assert acc.reserved == 16384
    b = acc.queues["t"][0].open
    for _ in range(1000):
        _append(acc, b"x" * 100)
    pq = acc.queues["t"][0]
    # grown as it filled, then full at batch_size: as many records as before
    assert list(pq.ready) == [b] and b.reserved == 100_000
    assert acc.reserved == 100_000 + 16384
    whole = _acc(batch_size=100_000, buffer_memory=1_000_000)
    whole._chunk = 100_000  # (the whole batch_size at once, as before)
    for _ in range(1001):
        _append(whole, b"x" * 100)
    assert len(b.values) == len(whole.queues["t"][0].ready[0].values) > 800


def test_many_open_batches_do_not_each_hold_batch_size():
    # 1 MB batches, 4 MiB of buffer: one record to each of 200 partitions used to
    # stop at the fifth partition (each batch reserved batch_size)
    acc = _acc(batch_size=1_000_000, buffer_memory=4 << 20)
    futs = [_append(acc, b"x" * 100, partition=p, n=200) for p in range(200)]
    assert all(f is not None for f in futs)


def test_a_batch_short_of_memory_closes_instead_of_growing():
    acc = _acc(batch_size=100_000, buffer_memory=40_000)
    assert _append(acc, b"y", partition=1, n=2) is not None  # 16 KiB
    results = [_append(acc, b"x" * 100, partition=0, n=2) for _ in range(200)]
    pq = acc.queues["t"][0]
    # no room to grow past its 16 KiB: closed at that size, and the next batch
    # does not fit either
    assert FULL in results
    (b,) = pq.ready
    assert 16384 - 61 - 110 < b.size <= 16384 - 61 and b.reserved == 16384
    assert acc.reserved <= 40_000


def test_an_encoded_batch_holds_only_its_bytes():
    from kpax.producer.sealer import Sealer

    acc = _acc(batch_size=100_000, buffer_memory=1_000_000)
    acc.seal = Sealer(None, "none", transactional=False).seal
    _append(acc, b"x" * 100)
    acc.flushing += 1
    acc.drain_open(0.0)
    (b,) = acc.queues["t"][0].ready
    assert b.data is not None and b.reserved == len(b.data) == acc.reserved < 300


def test_keyless_records_go_to_the_sticky_partition_under_the_lock():
    acc = _acc(partitioner=DefaultPartitioner(500))
    parts = [
        acc.append("t", -1, 1, None, b"x" * 100, None, 4, 121)._batch.partition for _ in range(40)
    ]  # type: ignore[union-attr]
    runs = sum(1 for a, b in itertools.pairwise(parts) if a != b)
    assert 1 <= runs <= 15


def test_concurrent_appends_lose_nothing():
    acc = _acc(buffer_memory=1 << 30, batch_size=4096)
    futs: list[list[RecordFuture | None]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        futs[i] = [_append(acc, b"%d-%d" % (i, j)) for j in range(5000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pq = acc.queues["t"][0]
    batches = [*pq.ready, pq.open]
    total = sum(len(b.values) for b in batches if b is not None)
    assert total == 20_000
    seen = {(id(f._batch), f.batch_index) for fl in futs for f in fl if f is not None}  # type: ignore[union-attr]
    assert len(seen) == 20_000


# ------------------------------------------------------------------ futures


def _batch() -> ProducerBatch:
    b = ProducerBatch("t", 3, 0.0, 0, 1)
    b.values.extend([b"a", b"b"])
    return _sent(b)


def _sent(b: Any) -> Any:
    """``b`` moved on to IN_FLIGHT (as the sender would before an answer completes it)."""
    steps = {BatchState.OPEN: BatchEvent.CLOSE, BatchState.CLOSED: BatchEvent.SEAL}
    while b.state in steps:
        b.fire(steps[b.state])
    b.fire(BatchEvent.SEND)
    return b


def test_future_result_callbacks_and_errors():
    b = _batch()
    f0, f1 = RecordFuture(b, 0, 10), RecordFuture(b, 1, 11)
    seen: list[object] = []
    f1.add_callback(lambda m, e: seen.append((m, e)))
    with pytest.raises(KafkaTimeoutError, match="t-3"):
        f0.result(0.01)
    threading.Timer(0.05, b.complete, args=(100, -1, None)).start()
    m = f0.result(5)
    assert (m.topic, m.partition, m.offset, m.timestamp) == ("t", 3, 100, 10)
    assert seen[0][0].offset == 101 and seen[0][1] is None  # type: ignore[index]
    b2 = _batch()
    b2.complete(50, 777, None)  # log-append time wins
    assert RecordFuture(b2, 1, 5).result().timestamp == 777
    b3 = _batch()
    err = KafkaTimeoutError("boom")
    b3.complete(-1, -1, err)
    f = RecordFuture(b3, 0, 1)
    assert f.failed() and f.exception() is err
    with pytest.raises(KafkaTimeoutError, match="boom"):
        f.result()


def test_future_is_awaitable_from_another_thread_completion():
    b = _batch()

    async def main() -> int:
        threading.Timer(0.05, b.complete, args=(7, -1, None)).start()
        return (await RecordFuture(b, 1, 0)).offset

    assert asyncio.run(main()) == 8


def test_a_raising_callback_does_not_break_completion():
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("kpax.producer")
    log.addHandler(handler)
    try:
        b = _batch()
        RecordFuture(b, 0, 0).add_callback(lambda m, e: 1 / 0)
        b.complete(0, -1, None)
    finally:
        log.removeHandler(handler)
    assert b.done and "raised" in records[0].getMessage()
