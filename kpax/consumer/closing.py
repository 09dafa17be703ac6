"""How a consumer ends: ``close()``.

Role: the body of :meth:`AsyncConsumer.close <kpax.consumer.client.AsyncConsumer.close>`:
within the timeout, commit (auto-commit: what the application processed, the
records in hand counting as processed after a plain close), leave the group
(its revocation commits), stop the group's tasks and the fetcher, then close
the connections; the fetch buffer is closed and emptied whatever happens.

Imports: kpax.event_loops, kpax.forks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from kpax.event_loops import check_loop
from kpax.forks import forked_error

if TYPE_CHECKING:
    from kpax.consumer.client import AsyncConsumer


async def close(c: AsyncConsumer, timeout: float, commit_in_hand: bool) -> None:
    """``c.close(timeout, commit_in_hand=...)`` (see its docstring)."""
    if c._forked:
        raise forked_error(c, "close()")
    if c._closed:
        return
    check_loop(c.cluster.loop, "close()", c._client_name)
    c._closed = True
    c._leaving = True
    c._in_hand_processed = commit_in_hand
    deadline = time.monotonic() + timeout
    if c._stats_task is not None:
        c._stats_task.cancel()
    try:
        if c.group is not None:
            c._closing_group = True
            try:
                with contextlib.suppress(Exception, asyncio.TimeoutError):
                    await asyncio.wait_for(close_group(c), max(timeout * 0.8, 0.1))
            finally:
                c._closing_group = False
            await c.group.stop_tasks()
        if c.fetcher is not None:
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(c.fetcher.close(), max(deadline - time.monotonic(), 0.1))
    finally:
        c.buffer.close()
        c.buffer.clear()
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(c.cluster.close(), max(deadline - time.monotonic(), 0.1))


async def close_group(c: AsyncConsumer) -> None:
    """Leave the group (subscribed), or commit what was processed (assigned, auto-commit)."""
    assert c.group is not None
    if c._is_subscribed:
        await c.group.leave()  # its revocation commits processed_offsets()
    elif c.settings.enable_auto_commit and c.states:
        await c.group.commit(c._member._processed_offsets())
