"""``send_many`` pieces without a broker: the bulk append places records
exactly as one ``append`` per record would (batch boundaries, sticky
switches, memory), and BulkFuture's counts, errors, metadata and callbacks."""

from __future__ import annotations

import asyncio
import random
from itertools import accumulate
from typing import Any

import pytest

from kpax.errors import ClientClosedError, KafkaTimeoutError, TransactionAbortedError
from kpax.producer import planning
from kpax.producer.accumulator import Accumulator, Column, Segment, fit, header_bytes, record_weight
from kpax.producer.batch import BulkFuture
from kpax.producer.batch_state import BatchEvent, BatchState
from kpax.producer.fastpath import sendpath
from kpax.producer.partitioner import DefaultPartitioner
from kpax.producer.planning import keyed_columns


def _acc(seed: int = 7, **kw: Any) -> Accumulator:
    args: dict[str, Any] = {
        "batch_size": 1000,
        "linger_ms": 5,
        "buffer_memory": 1 << 30,
        "partitioner": DefaultPartitioner(1000, rng=random.Random(seed)),
        "wake": lambda: None,
    }
    args.update(kw)
    return Accumulator(**args)


def _column(values: list[bytes], partition: int, keys: list[bytes | None] | None = None) -> Column:
    weights = [record_weight(keys[i] if keys else None, v, None) for i, v in enumerate(values)]
    return Column(partition, list(values), keys, list(accumulate(weights, initial=0)))


def _layout(acc: Accumulator) -> list[tuple[int, list[bytes | None]]]:
    """Every batch (closed or open) as (partition, values), in creation order."""
    out = []
    for parts in acc.queues.values():
        for pq in parts.values():
            batches = list(pq.ready) + ([pq.open] if pq.open is not None else [])
            out += [(b.serial, pq.partition, list(b.values)) for b in batches]
    return [(p, v) for _, p, v in sorted(out, key=lambda x: (x[1], x[0]))]


def test_fit_is_the_largest_prefix_within_the_limit() -> None:
    rng = random.Random(1)
    for _ in range(300):
        lens = [rng.randint(0, 50) for _ in range(rng.randint(1, 40))]
        cum = list(accumulate(lens, initial=0))
        lo = rng.randint(0, len(lens) - 1)
        limit = rng.randint(0, 400)
        j = fit(cum, 21, lo, len(lens), limit)
        assert sum(lens[lo:j]) + 21 * (j - lo) <= limit
        assert j == len(lens) or sum(lens[lo : j + 1]) + 21 * (j + 1 - lo) > limit


@pytest.mark.parametrize("partition", [0, -1])
def test_bulk_append_places_records_as_single_appends_do(partition: int) -> None:
    rng = random.Random(3)
    values = [bytes(rng.randint(0, 120)) + b"%d" % i for i in range(3000)]
    one, bulk = _acc(), _acc()
    n = 4
    for v in values:
        assert one.append("t", partition, 1, None, v, None, n, record_weight(None, v, None))
    segments: list[Segment] = []
    # in three calls, as a CLI would hand over blocks
    for lo, hi in ((0, 1000), (1000, 1001), (1001, 3000)):
        col = _column(values[lo:hi], partition)
        assert bulk.append_many("t", col, 1, None, n, segments)
    assert _layout(bulk) == _layout(one)
    assert bulk.sticky_switches == one.sticky_switches
    assert sum(hi - lo for _, _, _, lo, hi in segments) == 3000


def test_bulk_append_with_headers_and_keys_matches() -> None:
    hdrs = [("h", b"vv")]
    values = [b"v%d" % i for i in range(400)]
    keys = [b"k%d" % i for i in range(400)]
    one, bulk = _acc(), _acc()
    for k, v in zip(keys, values, strict=True):
        one.append("t", 2, 1, k, v, hdrs, 3, record_weight(k, v, hdrs))
    col = Column(
        2,
        list(values),
        list(keys),
        list(
            accumulate(
                (record_weight(k, v, hdrs) for k, v in zip(keys, values, strict=True)), initial=0
            )
        ),
    )
    assert header_bytes(hdrs) == 1 + 1 + 1 + 1 + 2  # count, key length, "h", value length, b"vv"
    assert bulk.append_many("t", col, 1, hdrs, 3, [])
    assert _layout(bulk) == _layout(one)
    b = bulk.queues["t"][2].ready[0]
    assert b.keys[:2] == [b"k0", b"k1"] and b.headers is not None and b.headers[0] == hdrs


def test_bulk_append_reserves_memory_as_single_appends_do() -> None:
    """A batch that many calls fill a little at a time grows its reservation
    step by step (doubling), as single appends make it grow -- not at once to
    batch_size: keyed send_many calls to 100 partitions reserved 1 MB for each
    partition's batch, filled buffer_memory and waited for the broker."""
    values = [b"x" * 100] * 400
    one, bulk = _acc(batch_size=1_000_000), _acc(batch_size=1_000_000)
    for v in values:
        assert one.append("t", 0, 1, None, v, None, 1, record_weight(None, v, None))
    for lo in range(0, 400, 10):
        assert bulk.append_many("t", _column(values[lo : lo + 10], 0), 1, None, 1, [])
    assert _layout(bulk) == _layout(one)
    assert bulk.reserved == one.reserved < 100_000


def test_full_memory_stops_and_resumes_where_it_was() -> None:
    acc = _acc(buffer_memory=3000)
    # 110 bytes each (106 of weight, 4 of batch fields): 8 per batch (939 bytes of records)
    col = _column([b"x" * 100] * 100, 0)
    segments: list[Segment] = []
    assert not acc.append_many("t", col, 1, None, 1, segments)
    assert col.pos == 24 and acc.reserved == 3000  # three batches of 8
    for b in list(acc.incomplete)[:2]:
        acc.release(b)
    assert not acc.append_many("t", col, 1, None, 1, segments)
    assert col.pos == 40
    acc.buffer_memory = 1 << 30
    assert acc.append_many("t", col, 1, None, 1, segments) and col.pos == 100
    assert sum(hi - lo for _, _, _, lo, hi in segments) == 100


def _sent(b: Any) -> Any:
    """``b`` moved on to IN_FLIGHT (as the sender would before an answer completes it)."""
    steps = {BatchState.OPEN: BatchEvent.CLOSE, BatchState.CLOSED: BatchEvent.SEAL}
    while b.state in steps:
        b.fire(steps[b.state])
    b.fire(BatchEvent.SEND)
    return b


def _future(n: int, per_batch: int, partition: int = 0) -> tuple[BulkFuture, list[Any]]:
    acc = _acc()
    col = _column([b"v%d" % i for i in range(n)], partition)
    segments: list[Segment] = []
    # per_batch records per batch: their weight and the batch's 4 bytes each
    acc.batch_size, acc._cap = 10_000, per_batch * (record_weight(None, b"v0", None) + 4) + 1
    assert acc.append_many("t", col, 1234, None, 1, segments)
    fut = BulkFuture("t", n, 1234, segments)
    for b in fut._batches:
        _sent(b)
    return fut, fut._batches


def test_bulk_future_counts_results_and_metadata() -> None:
    fut, batches = _future(10, 4)
    assert len(batches) == 3 and not fut.done() and fut.failed_count == 0
    with pytest.raises(KafkaTimeoutError, match=r"10 of 10 record\(s\) for topic 't'"):
        fut.result(0.01)
    seen: list[Any] = []
    fut.add_callback(lambda m, e: seen.append((m.offset if m else None, e)))
    for i, b in enumerate(batches):
        b.complete(100 + 10 * i, -1, None)
    assert fut.done() and fut.result(0) == 10 and fut.exception(0) is None
    assert [m.offset for m in fut.metadata()] == [100, 101, 102, 103, 110, 111, 112, 113, 120, 121]
    assert {m.timestamp for m in fut.metadata()} == {1234}
    assert sorted(o for o, _ in seen) == [m.offset for m in fut.metadata()]


def test_bulk_future_first_error_names_partition_and_count() -> None:
    fut, batches = _future(10, 4)
    batches[0].complete(0, -1, None)
    batches[1].complete(-1, -1, TransactionAbortedError("the transaction was aborted"))
    batches[2].complete(-1, -1, ClientClosedError("closed"))
    assert fut.failed_count == 6
    err = fut.exception(0)
    assert isinstance(err, TransactionAbortedError)  # the class is kept
    assert "6 of 10 record(s) for topic 't' failed" in str(err) and "t-0" in str(err)
    with pytest.raises(TransactionAbortedError):
        fut.result(0)
    with pytest.raises(TransactionAbortedError):
        fut.metadata()


async def test_bulk_future_is_awaitable() -> None:
    fut, batches = _future(6, 3)
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, batches[0].complete, 0, -1, None)
    loop.call_later(0.02, batches[1].complete, 3, -1, None)
    assert await asyncio.wait_for(fut, 5) == 6


def test_empty_bulk_future_is_done() -> None:
    fut = BulkFuture("t", 0, 0, [])
    assert fut.done() and fut.result(0) == 0 and fut.metadata() == []


def test_cumulative_weights_are_record_weights_in_c_and_python() -> None:
    from kpax.producer import planning
    from kpax.producer.fastpath import sendpath

    rng = random.Random(11)
    sizes = [0, 1, 47, 48, 63, 64, 100, 8175, 8176, 8191, 8192, 70_000]
    for _ in range(50):
        n = rng.randint(0, 30)
        vals = [None if rng.random() < 0.1 else bytes(rng.choice(sizes)) for _ in range(n)]
        keys = (
            None
            if rng.random() < 0.5
            else [None if rng.random() < 0.3 else bytes(rng.choice(sizes)) for _ in range(n)]
        )
        hdrs = rng.choice([None, [("h", b"vv")], [("héader", None), ("k", bytes(100))]])
        hb = header_bytes(hdrs)
        expect = list(
            accumulate(
                (record_weight(keys[i] if keys else None, v, hdrs) for i, v in enumerate(vals)),
                initial=0,
            )
        )
        assert planning._cumulative(vals, keys, hdrs) == expect
        if sendpath is not None:
            assert sendpath.cumulative_weights(vals, keys, hb) == expect
    if sendpath is not None:
        assert sendpath.cumulative_weights([b"x", "not bytes"], None, 1) is NotImplemented


def _columns_as_lists(columns: list[Column]) -> list[tuple[Any, ...]]:
    return [
        (
            c.partition,
            c.values,
            c.keys,
            c.cum,
            c.positions if c.positions is not None else list(range(c.base, c.base + len(c.values))),
        )
        for c in columns
    ]


@pytest.mark.skipif(sendpath is None, reason="needs the C send path (built with a compiler)")
@pytest.mark.parametrize("partitions", [2, 7, 100, 1000])
def test_keyed_columns_in_c_are_the_python_ones(partitions: int, monkeypatch) -> None:
    """send_many's keyed records split by partition in one C call (murmur2,
    columns, positions) exactly as the pure-Python path splits them."""
    rng = random.Random(partitions)
    keys: list[bytes | None] = [rng.randbytes(rng.randint(0, 40)) for _ in range(2000)]
    keys[:50] = [b"same"] * 50
    values: list[bytes | None] = [b"v%d" % i for i in range(2000)]
    values[7] = None
    in_c = keyed_columns(keys, values, None, partitions)
    monkeypatch.setattr(planning, "sendpath", None)
    in_python = keyed_columns(keys, values, None, partitions)
    assert _columns_as_lists(in_c) == _columns_as_lists(in_python)
    assert sorted(i for c in _columns_as_lists(in_c) for i in c[4]) == list(range(2000))
