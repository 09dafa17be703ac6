"""kpax.sync_face.SyncFace without a broker: the call timeout rule, close-once,
the context manager, a failed start, and the deadline wait."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kpax.errors import KafkaTimeoutError
from kpax.proto.errors import ClientClosedError
from kpax.sync_face import SyncFace


class _Face(SyncFace):
    _call_what = "face call"
    _closed_text = "{what} on a closed face"

    def __init__(self) -> None:
        super().__init__("kpax-test-face", 0.2, 0.1)
        self.events: list[str] = []

        async def start() -> None:
            pass

        async def abort() -> None:
            pass

        self._start(start(), 5.0, "face start", abort, 5.0)

    async def _core_close(self) -> None:
        self.events.append("core close")

    def _closing(self) -> None:
        self.events.append("closing")

    def close(self) -> None:
        self._close_once(self._core_close(), 5.0, "face close")


async def _sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


def test_run_waits_timeout_plus_margin_and_default() -> None:
    with _Face() as f:
        assert f._run(_sleep(0.01)) == "done"
        # no timeout: the default (0.2 s) plus the margin (0.1 s)
        with pytest.raises(KafkaTimeoutError, match=r"face call did not finish within 0\.3s"):
            f._run(_sleep(5))
        with pytest.raises(KafkaTimeoutError, match=r"x did not finish within 0\.15s"):
            f._run(_sleep(5), 0.05, what="x")
        assert f._run(_sleep(0.4), None, unbounded=True) == "done"


def test_close_once_and_calls_after_close() -> None:
    f = _Face()
    with f as same:
        assert same is f
    assert f.events == ["closing", "core close"]
    assert not f._thread.alive
    f.close()  # a second close does nothing
    assert f.events == ["closing", "core close"]
    coro = _sleep(0)
    with pytest.raises(ClientClosedError, match="flush on a closed face"):
        f._run(coro, what="flush")
    assert coro.cr_frame is None  # closed, not left un-awaited


def test_failed_start_runs_abort_and_stops_thread() -> None:
    seen: list[Any] = []

    class Face(SyncFace):
        def __init__(self) -> None:
            super().__init__("kpax-test-face", 1.0, 1.0)
            seen.append(self)

            async def start() -> None:
                raise RuntimeError("no broker")

            async def abort() -> None:
                seen.append("abort")

            self._start(start(), 5.0, "start", abort, 5.0)
            self.extra = True

        def close(self) -> None:
            raise AssertionError("not called")

    with pytest.raises(RuntimeError, match="no broker"):
        Face()
    face, what = seen
    assert what == "abort"
    assert face._closed and not face._thread.alive
    assert not hasattr(face, "extra")


def test_close_failure_policy() -> None:
    class Quiet(_Face):
        async def _core_close(self) -> None:
            raise OSError("socket gone")

        def _close_failed(self, exc: Exception) -> None:
            self.events.append(f"failed: {exc}")

    q = Quiet()
    q.close()
    assert q.events == ["closing", "failed: socket gone"]
    assert not q._thread.alive

    class Loud(_Face):
        async def _core_close(self) -> None:
            raise OSError("socket gone")

    loud = Loud()
    with pytest.raises(OSError, match="socket gone"):
        loud.close()
    assert not loud._thread.alive
    loud.close()  # closed all the same


def test_wait_until() -> None:
    tries: list[float] = []
    waits: list[float] = []

    def attempt() -> Any:
        tries.append(time.monotonic())
        return "ok" if len(tries) == 3 else None

    assert SyncFace._wait_until(attempt, waits.append, 1.0, TimeoutError) == "ok"
    assert len(waits) == 3 and all(0 < w <= 0.05 for w in waits)

    start = time.monotonic()
    with pytest.raises(TimeoutError, match="full"):
        SyncFace._wait_until(lambda: None, time.sleep, 0.12, lambda: TimeoutError("full"))
    assert 0.1 <= time.monotonic() - start < 1.0
