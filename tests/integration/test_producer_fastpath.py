"""The producer's C send path on a real broker: ``kpax.Producer.send`` is the C
appender, which takes the common record and hands every other call to the
Python ``send`` with the same arguments; several threads sending at once keep
every record exactly once and in order; memory stays flat over a million sends.
(The byte-for-byte comparison with the pure-Python path is in
tests/unit/test_producer_fastpath.py.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import kpax
from kpax.producer.fastpath import sendpath

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sendpath is None, reason="the C send path is not built"),
]


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_sync_send_is_the_c_appender_and_falls_back_with_the_same_arguments(kafka, topic):
    t = topic(partitions=2)
    with kpax.Producer(kafka.bootstrap, linger_ms=0) as p:
        assert type(p.send).__name__ == "builtin_function_or_method"
        got: list[Any] = []
        futs = [
            p.send(t, b"a", partition=1, timestamp=1_700_000_000_000),
            p.send(
                t,
                bytearray(b"ba"),
                key=b"k",
                headers={"h": b"v"},
                callback=lambda m, e: got.append(m),
            ),
            p.send(t, value=b"kw", key=b"kk", partition=0),
            p.send(t, b"c", None, partition=0, callback=lambda m, e: got.append(m)),
        ]
        out = [f.result(30) for f in futs]
        with pytest.raises(TypeError, match="timestamp"):
            p.send(t, b"x", timestamp=1.5)
        with pytest.raises(TypeError):
            p.send(t, b"x", nonsense=1)
        with pytest.raises(TypeError):
            p.send()  # type: ignore[call-arg]
    assert out[0].partition == 1 and out[0].timestamp == 1_700_000_000_000
    assert sorted(m.offset for m in got) == sorted([out[1].offset, out[3].offset])
    with pytest.raises(kpax.ClientClosedError):
        p.send(t, b"after close", partition=0)


async def test_aio_send_is_c_and_falls_back_with_the_same_arguments(kafka, topic):
    """kpax.aio.Producer.send: the common record through C (a finished
    awaitable), the rest through the Python path (which buffers at the call
    too); both give the record's future, the same errors, and the records
    arrive in order."""
    import asyncio

    import kpax.aio

    t = topic(partitions=2)
    # (a linger keeps the open batch open between the sends: the C path appends
    # to an open batch only)
    async with kpax.aio.Producer(kafka.bootstrap, linger_ms=200) as p:
        assert type(p.send).__name__ == "builtin_function_or_method"
        got: list[Any] = []

        def cb(metadata: Any, error: Any) -> None:
            got.append(metadata)

        await p.send(t, b"open", partition=0)
        kinds = []
        futs = []
        for call in (
            lambda: p.send(t, b"a", partition=0, timestamp=1_700_000_000_000),
            lambda: p.send(t, bytearray(b"ba"), key=b"k", headers={"h": b"v"}, callback=cb),
            lambda: p.send(t, value=b"kw", key=b"kk", partition=0),
            lambda: p.send(t, b"c", None, partition=0, callback=cb),
        ):
            aw = call()
            kinds.append(type(aw).__module__)
            futs.append(await aw)
        out = await asyncio.gather(*futs)
        # both paths were taken: C's finished Sent, and the Python path's
        assert set(kinds) == {"kpax.producer._sendpath", "kpax.producer.sent"}
        with pytest.raises(TypeError, match="timestamp"):
            await p.send(t, b"x", timestamp=1.5)
        with pytest.raises(TypeError):
            await p.send(t, b"x", nonsense=1)
        # a task, as with any coroutine
        md = await (await asyncio.create_task(p.send(t, b"task", partition=0)))
        assert md.partition == 0 and md.offset > out[0].offset
    assert out[0].partition == 0 and out[0].timestamp == 1_700_000_000_000
    assert sorted(m.offset for m in got) == sorted([out[1].offset, out[3].offset])
    with pytest.raises(kpax.ClientClosedError):
        await p.send(t, b"after close", partition=0)


def test_four_threads_send_keyed_records_each_once_and_in_order(kafka, topic):
    t = topic(partitions=6)
    per_thread = 250_000
    errors: list[BaseException] = []
    with kpax.Producer(kafka.bootstrap) as p:

        def run(tid: int) -> None:
            try:
                send = p.send
                for i in range(per_thread):
                    send(t, b"%d-%d" % (tid, i), key=b"t%d-k%d" % (tid, i % 997))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        p.flush(120)
    assert not errors
    total = 4 * per_thread
    seen: dict[tuple[int, int], int] = {}  # (thread, partition) -> last sequence number
    count = 0
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(t, i) for i in range(6)])
        idle = 0
        while count < total and idle < 30:
            recs = c.poll(1.0)
            idle = 0 if recs else idle + 1
            for r in recs:
                tid, seq = map(int, r.value.split(b"-"))
                last = seen.get((tid, r.partition), -1)
                assert seq > last, f"thread {tid} out of order on partition {r.partition}"
                seen[(tid, r.partition)] = seq
                count += 1
    assert count == total


def test_a_million_sends_hold_rss_flat_once_flushed(kafka, topic):
    t = topic()
    value = b"x" * 100
    with kpax.Producer(kafka.bootstrap) as p:
        send = p.send
        for _ in range(200_000):
            send(t, value)
        p.flush(60)
        base = _rss_kib()
        for _ in range(4):
            for _ in range(200_000):
                send(t, value)
            p.flush(60)
        grown = _rss_kib() - base
    assert grown < 16 * 1024, f"RSS grew {grown} KiB over 800,000 sends"
