"""What ``send`` does with unusual calls, on every send path, against a real broker:
a ``kpax.aio.Producer.send`` whose result is never awaited (the C path, the
Python path and ``KPAX_PURE_PYTHON=1`` buffer the same records and warn alike),
a callback that is not callable (TypeError at the call, nothing sent), and a
``send`` from a delivery callback while buffer memory is full (it fails at once;
delivery goes on)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import kpax
import kpax.aio
from kpax.errors import KafkaTimeoutError
from kpax.producer.fastpath import sendpath
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

#: One program, run once per send path: sends that are never awaited, of every
#: kind a send can be (plain bytes, key, timestamp, bytearray and memoryview
#: values, headers, keyword arguments, serializers, a new topic), then flush.
#: Prints the warnings it saw (category, text, file) as JSON.
FORGOTTEN_AWAIT = r"""
import asyncio, gc, json, sys, warnings
import kpax.aio

bootstrap, topic, new_topic, mode = sys.argv[1:5]

async def main():
    async with kpax.aio.Producer(bootstrap, linger_ms=1000) as p, kpax.aio.Producer(
        bootstrap, linger_ms=1000, value_serializer="str", key_serializer="str"
    ) as ps:
        if mode == "python":  # the C appender off: every call takes the Python path
            p.__dict__.pop("send", None)
            p._fast_append = None
        # an awaited send opens partition 0's batch (the C path appends to open batches)
        await p.send(topic, b"open", partition=0)
        await ps.send(topic, "open", partition=1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p.send(topic, b"plain", partition=0)
            p.send(topic, b"keyed", key=b"k", partition=0)
            p.send(topic, b"stamped", partition=0, timestamp=1_700_000_000_000)
            p.send(topic, bytearray(b"bytearray"), partition=0)
            p.send(topic, memoryview(b"memoryview"), partition=0)
            p.send(topic, b"headers", partition=0, headers=[("h", b"v")])
            p.send(topic, value=b"keywords", key=b"kw", partition=0)
            p.send(topic, b"last", partition=0)
            ps.send(topic, "serialized", key="sk", partition=1)
            p.send(new_topic, b"new topic")
            gc.collect()
        warns = [(w.category.__name__, str(w.message), w.filename) for w in caught]
    # (no flush: close sends what was sent, the new topic's record included)
    print(json.dumps(warns))

asyncio.run(main())
"""


def _run_forgotten(kafka: Any, topic: str, new_topic: str, mode: str) -> list[list[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KPAX_PURE_PYTHON", None)
    if mode == "pure":
        env["KPAX_PURE_PYTHON"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", FORGOTTEN_AWAIT, kafka.bootstrap, topic, new_topic, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: list[list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _landed(kafka: Any, topic: str, partitions: int, expect: int) -> list[Any]:
    return [
        (m.partition(), m.key(), m.value(), m.headers())
        for m in read_back(kafka.bootstrap, topic, partitions, expect, timeout=15)
    ]


@pytest.mark.parametrize("mode", ["c", "python", "pure"])
def test_a_forgotten_await_buffers_the_same_records_on_every_send_path(kafka, topic, mode):
    """``p.send(...)`` without ``await`` buffers the record at the call on
    every path (the C path, the Python path, KPAX_PURE_PYTHON=1) for every
    kind of record, and each such send gives the same RuntimeWarning, pointing
    at the line that dropped it."""
    if mode != "pure" and sendpath is None:
        pytest.skip("the C send path is not built")
    t = topic(partitions=2)
    new = f"{t}-new"  # auto-created by the send
    warns = _run_forgotten(kafka, t, new, mode)
    assert _landed(kafka, t, 2, 11) == [
        (0, None, b"open", None),
        (0, None, b"plain", None),
        (0, b"k", b"keyed", None),
        (0, None, b"stamped", None),
        (0, None, b"bytearray", None),
        (0, None, b"memoryview", None),
        (0, None, b"headers", [("h", b"v")]),
        (0, b"kw", b"keywords", None),
        (0, None, b"last", None),
        (1, None, b"open", None),
        (1, b"sk", b"serialized", None),
    ]
    assert [m.value() for m in read_back(kafka.bootstrap, new, 1, 1, timeout=15)] == [b"new topic"]
    expected = [
        (
            "RuntimeWarning",
            f"kpax.aio.Producer.send() for topic {name!r} was never awaited: the record "
            "is sent all the same, but nothing will see its outcome (await send() for "
            "its RecordFuture)",
            "<string>",
        )
        for name in [t] * 9 + [new]
    ]
    assert sorted(map(tuple, warns)) == sorted(expected)


# ---------------------------------------------------------------- callback=5


def _bad_calls(send: Any, send_many: Any, t: str) -> list[Any]:
    """Every way to give a callback that is not callable: C path and Python
    path of send (a bytearray value and headers take the Python path), send_many."""
    return [
        lambda: send(t, b"plain", partition=0, callback=5),
        lambda: send(t, b"keyed", key=b"k", callback="not a function"),
        lambda: send(t, bytearray(b"python path"), partition=0, callback=5),
        lambda: send(t, b"headers", partition=0, headers=[("h", b"v")], callback=[]),
        lambda: send_many(t, [b"a", b"b"], partition=0, callback=5),
    ]


def test_a_callback_that_is_not_callable_raises_at_send_and_nothing_is_sent(kafka, topic):
    t = topic()
    with kpax.Producer(kafka.bootstrap, linger_ms=0) as p:
        p.send(t, b"first", partition=0).result(30)  # topic known, batch state warm
        for call in _bad_calls(p.send, p.send_many, t):
            with pytest.raises(
                TypeError, match=r"callback must be a callable fn\(metadata, error\)"
            ):
                call()
        last = p.send(t, b"last", partition=0).result(30)
    assert last.offset == 1  # nothing of the bad calls was buffered
    assert [m.value() for m in read_back(kafka.bootstrap, t, 1, 2)] == [b"first", b"last"]


@pytest.mark.parametrize("c_path", [True, False])
async def test_aio_a_callback_that_is_not_callable_raises_at_send(kafka, topic, c_path):
    if c_path and sendpath is None:
        pytest.skip("the C send path is not built")
    t = topic()
    async with kpax.aio.Producer(kafka.bootstrap, linger_ms=1000) as p:
        if not c_path:
            p.__dict__.pop("send", None)
            p._fast_append = None
        await p.send(t, b"first", partition=0)  # opens the batch the C path appends to
        for call in _bad_calls(p.send, p.send_many, t):
            with pytest.raises(TypeError, match=r"not (5 \(int\)|'not a function' \(str\)|\[\])"):
                call()
        await p.send(t, b"last", partition=0)
        await p.flush(30)
    assert [m.value() for m in read_back(kafka.bootstrap, t, 1, 2)] == [b"first", b"last"]


# ---------------------------------------------------------------- send() in a callback


def _callback_sends(send: Any, t: str, seen: list[Any]) -> Any:
    """A delivery callback that sends a record itself, noting how long the send
    took and what it raised."""

    def cb(metadata: Any, error: Any) -> None:
        started = time.monotonic()
        try:
            send(t, b"from a callback " + b"y" * 880, partition=0)
            seen.append((time.monotonic() - started, None))
        except KafkaTimeoutError as exc:
            seen.append((time.monotonic() - started, exc))

    return cb


#: A buffer of 8 one-record batches: 40 records of 900 bytes keep it full.
TINY = {"buffer_memory": 8192, "batch_size": 1024, "linger_ms": 0, "max_block_ms": 30_000}


def _check_callback_sends(seen: list[Any], elapsed: float) -> None:
    refused = [exc for _, exc in seen if exc is not None]
    assert refused, "the buffer was never full when a callback sent"
    assert max(took for took, _ in seen) < 1.0  # nobody waited for memory on the I/O thread
    assert elapsed < 20
    msg = str(refused[0])
    assert "buffer memory full (buffer_memory=8192)" in msg
    assert "called from the producer's I/O thread (a delivery callback)" in msg
    assert "would block delivery" in msg and not refused[0].retriable


def test_a_send_from_a_delivery_callback_with_the_buffer_full_fails_at_once(kafka, topic):
    """With the buffer full, a ``send`` from a delivery callback (on the I/O
    thread, which alone frees memory) raises at once instead of blocking
    delivery for ``max_block_ms`` per callback; every record goes on."""
    t = topic()
    seen: list[Any] = []
    started = time.monotonic()
    with kpax.Producer(kafka.bootstrap, **TINY) as p:
        cb = _callback_sends(p.send, t, seen)
        futs = [p.send(t, b"x" * 900, partition=0, callback=cb) for _ in range(40)]
        metas = [f.result(15) for f in futs]
        p.flush(15)
    elapsed = time.monotonic() - started
    assert [m.offset for m in metas] == sorted(m.offset for m in metas)
    assert len(seen) == 40
    _check_callback_sends(seen, elapsed)
    landed = read_back(kafka.bootstrap, t, 1, 40 + sum(exc is None for _, exc in seen))
    assert sum(m.value() == b"x" * 900 for m in landed) == 40


async def test_aio_a_send_from_a_delivery_callback_with_the_buffer_full_fails_at_once(kafka, topic):
    """The same on the asyncio face: a delivery callback runs on the event loop
    and cannot await; a send there that would wait for memory raises at once
    (a send that fits is buffered, and is not warned about as never awaited)."""
    t = topic()
    seen: list[Any] = []
    started = time.monotonic()
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with kpax.aio.Producer(kafka.bootstrap, **TINY) as p:
            cb = _callback_sends(p.send, t, seen)
            futs = [await p.send(t, b"x" * 900, partition=0, callback=cb) for _ in range(40)]
            metas = await asyncio.wait_for(asyncio.gather(*futs), 15)
            await p.flush(15)
    elapsed = time.monotonic() - started
    assert [m.offset for m in metas] == sorted(m.offset for m in metas)
    assert len(seen) == 40
    _check_callback_sends(seen, elapsed)
    assert not [w for w in caught if "never awaited" in str(w.message)]
    landed = read_back(kafka.bootstrap, t, 1, 40 + sum(exc is None for _, exc in seen))
    assert sum(m.value() == b"x" * 900 for m in landed) == 40
