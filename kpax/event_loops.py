"""A ``kpax.aio`` client belongs to the event loop that started it: other loops are refused.

Role: a shared utility (not a layer). An asyncio client's connections, tasks
and futures live on the loop that started it; awaited from another loop (a
second ``asyncio.run``, another thread's loop), its calls would wait for
work that loop never does: a producer's ``close()`` never returned, a
consumer's waited its whole timeout. :func:`check_loop` raises
:class:`~kpax.proto.errors.IllegalStateError` instead, at once, naming the
client's loop and its state (closed, running in another thread, stopped).
Any asyncio loop works (the standard library's, uvloop's); only the loop
must be the same.

:data:`DONE` is what the asyncio faces' plain methods return (``seek``,
``subscribe``...: calls that only change client state, plain methods in
aiokafka too): calling them is enough, and ``await``-ing the result, as
earlier kpax versions required, still works.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from kpax.proto.errors import IllegalStateError

__all__ = ["DONE", "Done", "check_loop"]


class Done:
    """An awaitable that is already finished (its result is None): the return
    value of a plain method of an asyncio face, so ``c.seek(tp, 5)`` and
    ``await c.seek(tp, 5)`` both work."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, Any, None]:
        return
        yield  # (a generator that ends at once: the await's result is None)

    def __repr__(self) -> str:
        return "<done: the call is complete; awaiting it is optional>"


#: The one :class:`Done`.
DONE = Done()


def check_loop(owner: asyncio.AbstractEventLoop | None, what: str, client: str) -> None:
    """Raise IllegalStateError if a loop is running in this thread and it is not
    ``owner`` (the loop the client was started on; None: not started yet)."""
    if owner is None:
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return  # (a plain call from synchronous code: nothing to wait for here)
    if running is owner:
        return
    if owner.is_closed():
        state = "which is closed"
    elif owner.is_running():
        state = "which is running in another thread"
    else:
        state = "which is not running"
    raise IllegalStateError(
        f"{what} on a {client} from another event loop: it was started on {owner!r}, "
        f"{state}. A kpax.aio client belongs to the event loop it was started on (its "
        "connections and tasks live there): use and close it on that loop, or create "
        "one client per loop (e.g. inside each asyncio.run)"
    )
