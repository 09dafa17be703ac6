"""kpax.loop_thread.LoopThread's idle tracking (the producer's GIL hand-over):
``idle`` says whether the loop has anything to run, ``wait_idle`` waits for it
from another thread -- never longer than its timeout, and never on the loop's
own thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from kpax.loop_thread import LoopThread
from tests.wait import eventually


@pytest.fixture
def thread() -> Iterator[LoopThread]:
    t = LoopThread("kpax-test-idle", track_idle=True)
    assert t.idle is not None
    eventually(t.idle.is_set, timeout=10.0, interval=0.001)  # started: waiting in select
    yield t
    t.stop()


def test_an_untracked_loop_has_no_idle_event_and_wait_idle_returns_at_once() -> None:
    t = LoopThread("kpax-test-untracked")
    try:
        assert t.idle is None
        t0 = time.monotonic()
        t.wait_idle(30.0)
        assert time.monotonic() - t0 < 10.0  # did not wait for its timeout
    finally:
        t.stop()


def test_idle_is_set_while_the_loop_waits_and_cleared_while_it_has_work(thread: LoopThread) -> None:
    assert thread.idle is not None
    eventually(thread.idle.is_set, timeout=5.0, interval=0.001)
    release = threading.Event()
    running = threading.Event()

    def busy() -> None:
        running.set()
        release.wait(10.0)

    thread.call_soon(busy)  # (call_soon_threadsafe: cleared at once, before it runs)
    assert not thread.idle.is_set()
    assert running.wait(5.0)
    assert not thread.idle.is_set()  # running a callback: busy
    release.set()
    eventually(thread.idle.is_set, timeout=5.0, interval=0.001)


def test_wait_idle_returns_once_the_loop_has_run_what_it_was_given(thread: LoopThread) -> None:
    progress: list[str] = []
    gate: asyncio.Future[None] = thread.loop.create_future()

    async def work() -> None:
        for _ in range(3):  # several loop iterations, not one callback
            await asyncio.sleep(0)
        progress.append("ran")
        await gate  # nothing to run until the test opens it: the loop blocks (idle)
        progress.append("done")

    thread.submit(work())
    thread.wait_idle(30.0)
    assert progress == ["ran"]
    assert thread.idle is not None and thread.idle.is_set()
    thread.call_soon(gate.set_result, None)
    eventually(lambda: progress == ["ran", "done"], timeout=5.0, interval=0.01)


def test_wait_idle_gives_up_after_its_timeout_when_the_loop_stays_busy(thread: LoopThread) -> None:
    release = threading.Event()
    running = threading.Event()

    def busy() -> None:
        running.set()
        release.wait(30.0)

    thread.call_soon(busy)
    assert running.wait(5.0)
    try:
        t0 = time.monotonic()
        thread.wait_idle(0.05)
        waited = time.monotonic() - t0
        assert 0.04 <= waited < 10.0  # it did wait, and no longer than about its timeout
        assert thread.idle is not None and not thread.idle.is_set()
    finally:
        release.set()


def test_wait_idle_on_the_loops_own_thread_returns_at_once(thread: LoopThread) -> None:
    waited: list[float] = []

    def on_loop() -> None:
        t0 = time.monotonic()
        thread.wait_idle(30.0)  # its own loop is busy running this: must not wait
        waited.append(time.monotonic() - t0)

    thread.call_soon(on_loop)
    eventually(lambda: waited, timeout=10.0, interval=0.01)
    assert waited[0] < 10.0


def test_a_stopped_loop_counts_as_idle() -> None:
    t = LoopThread("kpax-test-idle-stop", track_idle=True)
    t.call_soon(lambda: None)
    t.stop()
    assert t.idle is not None
    eventually(t.idle.is_set, timeout=10.0, interval=0.01)
    t0 = time.monotonic()
    t.wait_idle(30.0)
    assert time.monotonic() - t0 < 10.0
