"""Handler threads whose outcomes reach the event loop in batches.

Role: :class:`HandlerThreads` is the sync face's pool of ``max_concurrency``
threads. ``loop.run_in_executor`` costs a concurrent future, an asyncio
future, their chaining and one ``call_soon_threadsafe`` per call, all on the
loop thread, which then becomes the bottleneck of thousands of short handlers
a second. Here a handler call is one queue put; a finished call appends its
outcome to a deque, and the loop is woken only when the deque was empty (one
wake-up for every outcome that arrives meanwhile), then takes them all at once.

It is a :class:`concurrent.futures.Executor` too (``submit`` works, for the
occasional other call: an error callback, a listener).

Imports: the standard library only.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["HandlerThreads"]

Outcome = tuple[Any, BaseException | None]


class HandlerThreads(concurrent.futures.Executor):
    """``max_workers`` threads (started at the first call). :meth:`bind` the
    loop and the function that takes outcomes, then :meth:`call`."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "kpax-parallel-handler") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shutdown = False
        self._outcomes: collections.deque[Outcome] = collections.deque()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliver: Callable[[list[Outcome]], None] | None = None

    def bind(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[list[Outcome]], None]
    ) -> None:
        """Outcomes of :meth:`call` go to ``deliver([(token, exception_or_None), ...])``,
        called on ``loop``."""
        self._loop = loop
        self._deliver = deliver

    def call(self, fn: Callable[[Any], Any], arg: Any, token: Any) -> None:
        """Run ``fn(arg)`` on a thread; its outcome is delivered with ``token``."""
        if not self._threads:
            self._start_threads()
        self._queue.put((fn, arg, token, None))

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        if self._shutdown:
            raise RuntimeError("cannot submit after shutdown")
        if not self._threads:
            self._start_threads()
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put((lambda _: fn(*args, **kwargs), None, None, fut))
        return fut

    def _start_threads(self) -> None:
        with self._lock:
            if self._threads or self._shutdown:
                return
            for i in range(self._max):
                t = threading.Thread(target=self._work, name=f"{self._prefix}-{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        get, outcomes = self._queue.get, self._outcomes
        while True:
            item = get()
            if item is None:
                return
            fn, arg, token, fut = item
            if fut is not None:
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn(arg))
                    except BaseException as exc:  # handed to the future
                        fut.set_exception(exc)
                continue
            try:
                fn(arg)
                outcome: Outcome = (token, None)
            except BaseException as exc:  # handed to the loop
                outcome = (token, exc)
            outcomes.append(outcome)
            if not self._scheduled:
                self._scheduled = True
                loop = self._loop
                if loop is not None:
                    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                        loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        # Cleared before taking: an outcome appended after this point schedules
        # another flush; one appended before is taken now.
        self._scheduled = False
        outcomes = self._outcomes
        batch = [outcomes.popleft() for _ in range(len(outcomes))]
        if batch and self._deliver is not None:
            self._deliver(batch)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for t in threads:
                t.join()
