"""Ending background tasks without swallowing the caller's own cancellation.

Role: a shared utility (not a layer). A client's ``close()`` cancels its
background tasks and waits for them to end. Awaiting a cancelled task raises
``CancelledError`` in the awaiting coroutine, indistinguishable there from the
caller's own cancellation; wrapping that await in ``suppress(BaseException)``
(or ``suppress(CancelledError)``) therefore also swallowed a cancellation
meant for ``close()`` itself (an ``asyncio.wait_for(close(), t)`` that timed
out, a task group shutting down), and ``close()`` went on as if nothing had
happened. :func:`cancel_and_wait` waits with ``asyncio.wait``: the tasks'
outcomes stay theirs, and a cancellation of the caller propagates.

Imports: the standard library only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait", "wait_quietly"]


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended (their errors are
    theirs: retrieved here, not raised). A cancellation of the caller while
    it waits is raised, not swallowed (the tasks stay cancelled)."""
    tasks = list(tasks)
    for t in tasks:
        t.cancel()
    await wait_quietly(tasks)
    for t in tasks:
        if t.done() and not t.cancelled():
            t.exception()  # retrieved: no "exception was never retrieved" log


async def wait_quietly(tasks: Iterable[asyncio.Future[Any]], timeout: float | None = None) -> None:
    """Wait up to ``timeout`` seconds (None: no limit) for ``tasks`` to end,
    raising neither their errors nor a timeout; the caller's own cancellation
    is raised."""
    pending = {t for t in tasks if not t.done()}
    if pending:
        await asyncio.wait(pending, timeout=timeout)
