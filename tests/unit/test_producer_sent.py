"""``kpax.aio.Producer.send`` buffers at the call, on the Python path too: what
it returns (kpax.producer.sent), the sends that must wait (buffer memory full)
going on in a task started at the call, in call order, cancelled with their
await, and waited for by ``flush``. Plain bytes: the broker is the test
(tests/unit/test_sender_bytes.py's scripted broker)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from kpax.producer.batch import RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.sent import Deferred, Sent
from kpax.proto.records import decode_batches
from tests.unit.bytewire import serve
from tests.unit.test_sender_bytes import TOPIC, Partition, _producer, _stop

#: Four one-record batches fill the buffer (records of 900 bytes).
TINY = {"buffer_memory": 4096, "batch_size": 1024, "linger_ms": 0}
BIG = b"x" * 900


def _values(partition: Partition) -> list[bytes]:
    return [r.value for data in partition.batches for b in decode_batches(data) for r in b]


async def _full(p: AsyncProducer) -> list[Any]:
    """Fill the buffer (nothing is answered yet): the four sends it takes."""
    sent = [p.send(TOPIC, b"%d" % i + BIG, partition=0) for i in range(4)]
    assert all(type(s) is Sent for s in sent)
    return [await s for s in sent]


async def test_sends_that_wait_for_memory_are_buffered_in_call_order() -> None:
    """Once a send waits for buffer memory (in a task started at the call),
    every later send to its topic waits behind it, the C path's included: a
    small record that would fit the open batch is not buffered ahead."""
    partition = Partition(lambda records: 0)
    p, broker = await _producer(partition, **TINY)
    try:
        futs = await _full(p)
        later = [
            p.send(TOPIC, b"4" + BIG, partition=0),  # memory full: waits
            p.send(TOPIC, b"5", partition=0),  # would fit: waits behind
            p.send(TOPIC, b"6" + BIG, partition=0),
            p.send(TOPIC, b"7", key=b"k", partition=0, headers=[("h", b"v")]),
        ]
        assert all(type(s) is Deferred for s in later)
        server = asyncio.ensure_future(serve([broker], lambda: False))
        futs += await asyncio.gather(*later)
        assert [m.offset for m in await asyncio.wait_for(asyncio.gather(*futs), 3)] == list(
            range(8)
        )
        server.cancel()
        assert _values(partition) == [
            b"0" + BIG,
            b"1" + BIG,
            b"2" + BIG,
            b"3" + BIG,
            b"4" + BIG,
            b"5",
            b"6" + BIG,
            b"7",
        ]
        assert not p._deferred  # all done: sends are buffered at the call again
        s = p.send(TOPIC, b"8", partition=0)
        assert type(s) is not Deferred
        s.close()
    finally:
        await _stop(p)


async def test_cancelling_the_await_of_a_waiting_send_cancels_the_send() -> None:
    partition = Partition(lambda records: 0)
    p, broker = await _producer(partition, **TINY)
    try:
        futs = await _full(p)
        # (a big record: a small one would join the last batch, which stays open
        # while the sender cannot send it, without waiting for memory)
        waiting = asyncio.ensure_future(p.send(TOPIC, b"cancelled" + BIG, partition=0))
        after = p.send(TOPIC, b"after", partition=0)
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        server = asyncio.ensure_future(serve([broker], lambda: False))
        futs.append(await after)
        await asyncio.wait_for(asyncio.gather(*futs), 3)
        server.cancel()
        assert _values(partition) == [b"%d" % i + BIG for i in range(4)] + [b"after"]
    finally:
        await _stop(p)


async def test_flush_waits_for_sends_not_buffered_yet() -> None:
    """A send never awaited that had to wait for memory is still sent: flush
    waits for it to be buffered, then for its batch. (``close`` too:
    tests/integration/test_producer_send_semantics.py.)"""
    partition = Partition(lambda records: 0)
    p, broker = await _producer(partition, **TINY)
    try:
        await _full(p)
        with pytest.warns(RuntimeWarning, match="never awaited"):
            p.send(TOPIC, b"forgotten", partition=0)
        server = asyncio.ensure_future(serve([broker], lambda: False))
        await asyncio.wait_for(p.flush(), 3)
        assert _values(partition)[-1] == b"forgotten"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(6):
                p.send(TOPIC, b"%d" % i + BIG, partition=0)
        await asyncio.wait_for(p.flush(), 3)
        server.cancel()
        assert _values(partition)[-6:] == [b"%d" % i + BIG for i in range(6)]
    finally:
        await _stop(p)


async def test_a_finished_send_is_a_coroutine_that_pauses_once_if_asked() -> None:
    fut: Any = object()
    s = Sent(fut, True, False, TOPIC)
    assert asyncio.iscoroutine(s)
    assert s.send(None) is None  # the loop's turn (a batch was closed)
    with pytest.raises(StopIteration) as stop:
        s.send(None)
    assert stop.value.value is fut
    with pytest.raises(RuntimeError, match="already awaited"):
        s.send(None)
    assert await asyncio.create_task(Sent(fut, True, False, TOPIC)) is fut
    assert await asyncio.gather(Sent(fut, False, False, TOPIC)) == [fut]
    with pytest.raises(KeyError):
        Sent(fut, False, True, TOPIC).throw(KeyError("x"))  # done: no warning either
    Sent(fut, False, True, TOPIC).close()  # closed: no warning


def test_record_future_type_is_what_await_gives() -> None:
    # (the annotations say so; mypy's unused-coroutine flags a forgotten await)
    import typing

    hints = typing.get_type_hints(AsyncProducer.send)
    assert typing.get_args(hints["return"])[-1] is RecordFuture


async def test_send_many_buffers_at_the_call_and_warns_alike() -> None:
    from kpax.producer.sent import never_awaited

    partition = Partition(lambda records: 0)
    p, broker = await _producer(partition, linger_ms=1000)
    try:
        with pytest.warns(RuntimeWarning) as caught:
            p.send_many(TOPIC, [b"a", b"b"], partition=0)
        # (an unclosed producer of an earlier test collected meanwhile warns too)
        shown = [str(w.message) for w in caught if not str(w.message).startswith("unclosed ")]
        assert shown == [never_awaited("send_many", TOPIC)]
        assert list(p.accumulator.queues[TOPIC][0].open.values) == [b"a", b"b"]
        bulk = await p.send_many(TOPIC, [b"c"], partition=0)
        server = asyncio.ensure_future(serve([broker], lambda: False))
        await p.flush(3)
        server.cancel()
        assert await bulk == 1 and _values(partition) == [b"a", b"b", b"c"]
    finally:
        await _stop(p)


def test_a_send_that_must_wait_outside_the_event_loop_says_so() -> None:
    from kpax.proto.errors import IllegalStateError

    p = AsyncProducer("127.0.0.1:9")  # never started: every topic is new
    with pytest.raises(IllegalStateError, match="outside a running event loop"):
        p.send("new", b"v")
    assert not p._deferred
