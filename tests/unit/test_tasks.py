"""kpax.tasks: a close() that cancels its background tasks and waits for them
still obeys its own cancellation (asyncio.wait_for(close(), t) timing out)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kpax.tasks import cancel_and_wait, wait_quietly


async def _slow_to_stop(stopping: asyncio.Event) -> None:
    """A background task whose cleanup takes a while after it is cancelled."""
    try:
        await asyncio.sleep(3600)
    finally:
        stopping.set()
        await asyncio.sleep(3600)  # (cleanup that would block until cancelled again)


def test_the_callers_cancellation_is_not_swallowed() -> None:
    async def main() -> None:
        stopping = asyncio.Event()
        child = asyncio.ensure_future(_slow_to_stop(stopping))
        await asyncio.sleep(0)
        closer = asyncio.ensure_future(cancel_and_wait([child]))
        await stopping.wait()  # the closer waits for the child's cleanup now
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
        assert closer.cancelled()
        child.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await child

    asyncio.run(main())


def test_a_close_under_wait_for_times_out_instead_of_running_on() -> None:
    async def close(children: list[asyncio.Task[None]]) -> str:
        await cancel_and_wait(children)
        return "went on"

    async def main() -> None:
        stopping = asyncio.Event()
        child = asyncio.ensure_future(_slow_to_stop(stopping))
        await asyncio.sleep(0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(close([child]), 0.05)
        child.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await child

    asyncio.run(main())


def test_the_tasks_errors_are_theirs_and_retrieved(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise RuntimeError("background task failed")

    async def main() -> None:
        done = asyncio.ensure_future(fails())
        running = asyncio.ensure_future(asyncio.sleep(3600))
        await asyncio.sleep(0)
        await cancel_and_wait([done, running])  # neither error raised here
        assert running.cancelled() and isinstance(done.exception(), RuntimeError)
        await wait_quietly([asyncio.ensure_future(asyncio.sleep(3600))], timeout=0.01)

    asyncio.run(main())
    assert "never retrieved" not in caplog.text
