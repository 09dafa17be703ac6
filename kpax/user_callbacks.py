"""Calling the application's callbacks: plain functions or coroutine functions.

Role: a shared utility (not a layer). ``error_callback`` and ``stats_callback``
(confluent-kafka's ``error_cb`` and ``stats_cb``) are called on the client's
I/O loop; :func:`call_user` calls one and, when it returns an awaitable (an
``async def`` callback, as confluent-kafka's asyncio example writes them),
runs it as a task of that loop instead of dropping it with a "never awaited"
warning. What a callback raises, or its task, is logged on ``log`` with what
it was; it never reaches the client.

Imports: the standard library.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["call_user"]

#: Tasks of coroutine callbacks still running (held: a task only weakly
#: referenced by its loop may be collected before it ends).
_RUNNING: set[asyncio.Task[Any]] = set()


def call_user(callback: Any, arg: Any, what: str, log: logging.Logger) -> None:
    """``callback(arg)``, on the running loop; an awaitable result runs as a task."""
    try:
        result = callback(arg)
    except Exception:
        log.exception("%s failed", what)
        return
    if not inspect.isawaitable(result):
        return

    async def run() -> None:
        try:
            await result
        except Exception:
            log.exception("%s failed", what)

    import asyncio  # here: only an awaitable result needs it (importing asyncio costs)

    task = asyncio.get_running_loop().create_task(run())
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
