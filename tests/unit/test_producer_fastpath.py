"""The producer's C send path (kpax.producer._sendpath) against the pure-Python
path it stands in for: the same records in the same batches, byte for byte,
whatever the input; every case it does not take goes to the Python path
unchanged. No broker: two unstarted producers fed the same calls."""

from __future__ import annotations

import gc
import random
import sys
import threading
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.producer.batch import RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.producer.fastpath import sendpath
from kpax.producer.partitioner import _murmur2_py, _murmur2_unsigned
from kpax.producer.sent import Sent as PySent

pytestmark = pytest.mark.skipif(sendpath is None, reason="the C send path is not built")

TOPIC = "t"


def _producer(**kw: Any) -> AsyncProducer:
    cfg: dict[str, Any] = {
        "batch_size": 2048,
        "linger_ms": 1000,
        "enable_idempotence": False,
        "buffer_memory": 1 << 30,
    }
    cfg.update(kw)
    p = AsyncProducer("127.0.0.1:9", **cfg)  # never started: no I/O
    p.num_partitions[TOPIC] = 6
    p.partitioner._rng = random.Random(7)
    return p


def _send_c(p: AsyncProducer, args: tuple[Any, ...], taken: list[int]) -> RecordFuture:
    assert p._fast_append is not None
    fut = p._fast_append(*args)
    if fut is None:  # what send() does: the Python path
        fut = p._try_append(*args, p.num_partitions[args[0]])
    else:
        taken[0] += 1
    assert fut is not None
    return fut


def _send_py(p: AsyncProducer, args: tuple[Any, ...]) -> RecordFuture:
    fut = p._try_append(*args, p.num_partitions[args[0]])
    assert fut is not None
    return fut


def _roomy(p: AsyncProducer) -> None:
    """Give the open batch of TOPIC-0 all of ``batch_size`` at once (a new
    batch reserves 16 KiB first; the Python path grows it as it fills)."""
    acc = p.accumulator
    with acc.lock:
        acc._grow(acc.queues[TOPIC][0].open, acc._cap)


def _state(p: AsyncProducer) -> dict[int, list[Any]]:
    """Every batch of every partition: sealed bytes, or the open columns."""
    out: dict[int, list[Any]] = {}
    for part, pq in sorted(p.accumulator.queues.get(TOPIC, {}).items()):
        rows: list[Any] = [b.data for b in pq.ready]
        if pq.open is not None:
            b = pq.open
            rows.append((list(b.values), list(b.keys), list(b.timestamps), b.headers, b.size))
        out[part] = rows
    return out


def _compare(calls: list[tuple[Any, ...]]) -> int:
    """Feed both paths; return how many records the C path took itself."""
    c, py = _producer(), _producer()
    py._fast_append = None
    taken = [0]
    for args in calls:
        fc = _send_c(c, args, taken)
        fp = _send_py(py, args)
        assert (fc._batch.partition, fc._index, fc._timestamp) == (
            fp._batch.partition,
            fp._index,
            fp._timestamp,
        ), args
    assert _state(c) == _state(py)
    c.accumulator.drain_open(1e18)
    py.accumulator.drain_open(1e18)
    assert _state(c) == _state(py)
    # Batches fill up to batch_size and never past it (the counted record sizes
    # bound the encoded ones), but for a single record larger than a batch.
    for rows in _state(c).values():
        for data in rows:
            count = int.from_bytes(data[57:61], "big")
            assert len(data) <= 2048 or count == 1, (len(data), count)
    return taken[0]


record = st.tuples(
    st.none() | st.binary(max_size=300),  # value
    st.none() | st.binary(max_size=40),  # key
    st.none() | st.integers(0, 5),  # partition
    st.integers(0, 2**63 - 1) | st.just(-1),  # timestamp
    st.none() | st.just([]) | st.just([("h", b"v")]),  # headers
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, max_size=400))
def test_c_and_python_paths_build_identical_batches(records):
    _compare([(TOPIC, v, k, p, ts, h) for v, k, p, ts, h in records])


def test_many_keyless_and_keyed_records_identical_batches():
    rnd = random.Random(3)
    calls = []
    for i in range(20_000):
        key = None if i % 3 else b"k%d" % rnd.randrange(500)
        value = rnd.randbytes(rnd.randrange(0, 200))
        calls.append((TOPIC, value, key, None, 1_700_000_000_000 + i, None))
    assert _compare(calls) > 15_000  # the C path took most; new batches went to Python


def test_the_c_path_takes_the_common_record_and_leaves_the_rest():
    p = _producer()
    ta = p._fast_append
    assert ta is not None
    _send_py(p, (TOPIC, b"first", None, 0, 1, None))  # opens partition 0's batch
    _send_py(p, (TOPIC, b"first", b"k", None, 1, None))
    assert ta(TOPIC, b"v", None, 0, 5, None) is not None
    assert ta(TOPIC, b"v", None, 0, None, []) is not None  # default timestamp, no headers
    kp = (_murmur2_unsigned(b"k") & 0x7FFFFFFF) % 6
    fut = ta(TOPIC, b"v", b"k", None, 5, None)
    assert fut is not None and fut._batch.partition == kp
    for args in [
        (TOPIC, "str value", None, 0, 5, None),  # not bytes: the Python path encodes it
        (TOPIC, bytearray(b"v"), None, 0, 5, None),
        (TOPIC, b"v", None, 0, 5, [("h", b"v")]),  # headers
        (TOPIC, b"v", None, 0, 1.5, None),  # a bad timestamp: Python raises naming it
        (TOPIC, b"v", None, 0, -2, None),
        (TOPIC, b"v", None, 0, 2**63, None),
        (TOPIC, b"v", None, 6, 5, None),  # no such partition
        (TOPIC, b"v", None, True, 5, None),
        ("other", b"v", None, 0, 5, None),  # topic not known yet
        (TOPIC, b"v", None, 3, 5, None),  # no open batch there yet
        (TOPIC, b"x" * (1 << 21), None, 0, 5, None),  # larger than a batch / max_request
    ]:
        assert ta(*args) is None, args
    p.closed = True
    p._disable_appenders()
    assert ta(TOPIC, b"v", None, 0, 5, None) is None


def test_producers_that_need_python_get_no_c_path():
    assert _producer(value_serializer=lambda v: v)._fast_append is None
    assert _producer(partitioner=lambda t, k, v, n: 0)._fast_append is None
    assert _producer(transactional_id="x", enable_idempotence=True)._fast_append is None


def test_lock_is_a_plain_lock():
    lock = sendpath.Lock()
    assert lock.acquire() and lock.locked()
    assert not lock.acquire(blocking=False)
    assert not lock.acquire(timeout=0.01)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()
    with lock:
        assert lock.locked()
    assert not lock.locked()
    counter = [0]

    def work() -> None:
        for _ in range(20_000):
            with lock:
                counter[0] += 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert counter[0] == 80_000


def test_murmur2_matches_the_python_reference():
    rnd = random.Random(5)
    for n in range(70):
        data = rnd.randbytes(n)
        assert sendpath.murmur2(data) == _murmur2_py(data) == _murmur2_unsigned(data)


def test_no_references_leak_from_the_c_path():
    p = _producer(batch_size=1 << 20)
    _send_py(p, (TOPIC, b"x", None, 0, 1, None))
    _roomy(p)
    value = b"v" * 50
    ts = 1_700_000_000_000
    before = sys.getrefcount(value)
    for _ in range(10_000):
        fut = p._fast_append(TOPIC, value, None, 0, ts, None)
        assert fut is not None
    del fut
    batch = p.accumulator.queues[TOPIC][0].open
    assert sys.getrefcount(value) == before + 10_000  # held by the batch only
    batch.values = []
    gc.collect()
    assert sys.getrefcount(value) == before


def _rss_mib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def test_a_million_buffered_records_cost_about_their_encoded_size():
    """1,000,000 distinct records of 100 B buffered (nothing sent): RSS grows by
    about the bytes reserved for their batches, never beyond buffer_memory +
    64 MiB -- full batches are encoded at once and their columns dropped."""
    p = _producer(buffer_memory=256 << 20, batch_size=16384)
    p.num_partitions[TOPIC] = 1
    rnd = random.Random(1)
    gc.collect()
    base = _rss_mib()
    for _ in range(1_000_000):
        _send_c(p, (TOPIC, rnd.randbytes(100), None, None, None, None), [0])
    gc.collect()
    grown = _rss_mib() - base
    reserved = p.accumulator.reserved >> 20
    assert grown <= (256 + 64), grown
    assert grown <= reserved + 64, (grown, reserved)


def _open_batch(p: AsyncProducer) -> None:
    """A first record through the Python path opens partition 0's batch."""
    _send_py(p, (TOPIC, b"first", None, 0, 1, None))


async def test_aio_send_is_c_and_awaits_to_the_record_future():
    """kpax.aio.Producer.send is the C appender's asend: for the common record
    it returns a finished coroutine-like object; awaiting it gives the record's
    future (no Python frame). Everything else returns the Python coroutine."""
    import asyncio
    from collections.abc import Coroutine

    p = _producer()
    assert type(p.send).__name__ == "builtin_function_or_method"
    _open_batch(p)
    sent = p.send(TOPIC, b"v", partition=0, timestamp=5)
    assert type(sent) is sendpath.Sent
    assert isinstance(sent, Coroutine) and asyncio.iscoroutine(sent)
    fut = await sent
    assert isinstance(fut, RecordFuture) and (fut._index, fut._timestamp) == (1, 5)
    with pytest.raises(RuntimeError, match="already awaited"):
        await sent
    # asyncio takes it where it takes a coroutine
    fut2 = await asyncio.create_task(p.send(TOPIC, b"w", partition=0))
    futs = await asyncio.gather(*(p.send(TOPIC, b"g", partition=0) for _ in range(3)))
    assert [f._index for f in [fut2, *futs]] == [2, 3, 4, 5]
    # the Python path (headers are not C's) buffers at the call too, and gives
    # kpax.producer.sent.Sent: the same protocol
    slow = p.send(TOPIC, b"h", partition=0, headers=[("k", b"v")])
    assert type(slow) is PySent and asyncio.iscoroutine(slow)
    assert len(p.accumulator.queues[TOPIC][0].open.values) == 7
    assert (await slow)._index == 6


def test_the_finished_send_protocol_methods():
    """send/throw/close as a coroutine that is done has them; a finished send
    dropped unawaited keeps its record (it was appended at the call)."""
    p = _producer()
    _open_batch(p)
    s = p.send(TOPIC, b"a", partition=0)
    with pytest.raises(StopIteration) as stop:
        s.send(None)
    assert isinstance(stop.value.value, RecordFuture)
    with pytest.raises(RuntimeError):
        s.send(None)
    s2 = p.send(TOPIC, b"b", partition=0)
    with pytest.raises(KeyError):
        s2.throw(KeyError("x"))
    with pytest.raises(RuntimeError):
        next(iter(s2.__await__()))
    s3 = p.send(TOPIC, b"c", partition=0)
    s3.close()
    del s3
    assert len(p.accumulator.queues[TOPIC][0].open.values) == 4  # first, a, b, c


def test_no_references_leak_from_the_aio_c_path():
    p = _producer(batch_size=1 << 20)
    _open_batch(p)
    _roomy(p)
    value = b"v" * 50
    before = sys.getrefcount(value)
    for _ in range(10_000):
        s = p.send(TOPIC, value, partition=0, timestamp=1)
        with pytest.raises(StopIteration):
            s.send(None)
    del s
    gc.collect()
    assert sys.getrefcount(value) == before + 10_000  # held by the batch only
    futs = [p.send(TOPIC, value, partition=0, timestamp=1) for _ in range(1000)]
    with pytest.warns(RuntimeWarning, match="never awaited"):
        del futs  # dropped unawaited: nothing held but the batch's columns
    gc.collect()
    assert sys.getrefcount(value) == before + 11_000
    # warnings that fail (-W error) are reported, never raised from dealloc
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unraisable: list[Any] = []
        hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
        try:
            p.send(TOPIC, value, partition=0, timestamp=1)
        finally:
            sys.unraisablehook = hook
    assert [type(u.exc_value) for u in unraisable] == [RuntimeWarning]
    del unraisable
    gc.collect()
    assert sys.getrefcount(value) == before + 11_001


def _never_awaited(send: Any) -> list[tuple[str, str, bool]]:
    """The warnings of one send dropped unawaited: (category, text, whether it
    points at the line that dropped it)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        send()
        gc.collect()
    return [
        (w.category.__name__, str(w.message), (w.filename, w.lineno) == (__file__, line))
        for w in caught
    ]


def test_a_send_never_awaited_warns_alike_on_the_c_and_python_paths():
    """The C path's Sent and the Python path's warn with the same text, at the
    line that dropped them; an awaited, closed or delivery-callback send does
    not warn (the callback cannot await)."""
    import asyncio

    from kpax.producer.fastpath import enter_callbacks, leave_callbacks
    from kpax.producer.sent import never_awaited

    p = _producer()
    _open_batch(p)
    c = _never_awaited(lambda: p.send(TOPIC, b"c", partition=0))
    py = _never_awaited(lambda: p.send(TOPIC, bytearray(b"py"), partition=0))
    text = never_awaited("send", TOPIC)
    assert c == py == [("RuntimeWarning", text, True)]
    assert "sent all the same" in text and repr(TOPIC) in text
    for kind in (b"c", bytearray(b"py")):
        assert _never_awaited(lambda k=kind: p.send(TOPIC, k, partition=0).close()) == []
        awaited = lambda k=kind: asyncio.run(_await(p.send(TOPIC, k, partition=0)))  # noqa: E731
        assert _never_awaited(awaited) == []
        enter_callbacks()
        try:
            assert _never_awaited(lambda k=kind: p.send(TOPIC, k, partition=0)) == []
        finally:
            leave_callbacks()
    assert len(p.accumulator.queues[TOPIC][0].open.values) == 9  # each was buffered


async def _await(aw: Any) -> Any:
    return await aw


def test_a_callback_that_is_not_callable_fails_before_anything_is_buffered():
    """The C send path (both faces' appenders) and the Python path raise the
    same TypeError at the call, before appending."""
    p = _producer()
    _open_batch(p)
    appender = p._new_appender(lambda *a, **k: pytest.fail("the Python path was called"))
    pq = p.accumulator.queues[TOPIC][0]
    texts = set()
    for call in (
        lambda: appender.send(TOPIC, b"v", partition=0, callback=5),
        lambda: appender.asend(TOPIC, b"v", partition=0, callback=5),
        lambda: p.send(TOPIC, b"v", partition=0, callback=5),  # asend
        lambda: AsyncProducer.send(p, TOPIC, bytearray(b"v"), partition=0, callback=5),
        lambda: p.send_many(TOPIC, [b"v"], partition=0, callback=5),
    ):
        with pytest.raises(TypeError) as err:
            call()
        texts.add(str(err.value))
    assert texts == {"callback must be a callable fn(metadata, error), not 5 (int)"}
    assert len(pq.open.values) == 1  # only the first record
    fut = appender.send(TOPIC, b"v", partition=0, callback=print)  # a builtin is callable
    assert fut is not None and len(pq.open.values) == 2
    with pytest.raises(TypeError, match="not 5"):
        fut.add_callback(5)


@pytest.mark.parametrize("c_path", [True, False])
def test_both_paths_count_a_record_as_record_weight_says(c_path: bool) -> None:
    from kpax.producer.accumulator import record_weight

    sizes = [None, 0, 1, 47, 48, 63, 64, 100, 3999, 4000, 8000, 8191, 8192, 20_000]
    p = _producer(batch_size=1 << 20)
    if not c_path:
        p._fast_append = None
    acc = p.accumulator
    taken = [0]
    for ks in sizes:
        for vs in sizes:
            key = None if ks is None else bytes(ks)
            value = None if vs is None else bytes(vs)
            args = (TOPIC, value, key, 0, 5, None)
            fut = _send_c(p, args, taken) if c_path else _send_py(p, args)
            batch = fut._batch
            before = batch.size
            fut = _send_c(p, args, taken) if c_path else _send_py(p, args)
            assert fut._batch is batch  # a 1 MiB batch takes both
            # the second record: its weight, attributes, timestamp delta 0, offset bound
            assert batch.size - before == record_weight(key, value, None) + 2 + acc._off
            acc.queues[TOPIC][0].open = None  # the next pair starts a batch of its own
    assert (taken[0] > 0) == c_path
