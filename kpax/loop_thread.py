"""A background thread that owns an asyncio event loop: the engine of the sync face.

Role: ``kpax.Producer``, ``kpax.Consumer`` and ``kpax.Admin`` each start one
:class:`LoopThread`; all I/O runs on it. Callers in other threads hand it
coroutines with :meth:`LoopThread.run` (wait for the result, bounded by a
timeout) or :meth:`LoopThread.submit` (fire and get a concurrent future).
Calling :meth:`run` from the loop's own thread would deadlock, so it raises.

Idle tracking (``track_idle=True``, the producer's): :attr:`LoopThread.idle` is
set while the loop waits with nothing to run and cleared when it is handed
work (``call_soon_threadsafe``, at once) or wakes (once it runs again: a hint
that lags while another thread holds the GIL), so a caller's thread can wait
for the loop to finish what it has to do (:meth:`LoopThread.wait_idle`)
instead of fighting it for the GIL (kpax.producer.sync). A tracking loop is
always the standard library's selector loop, whatever the event loop policy.

Threads running a loop for a sync face are noted (:func:`runs_background_loop`):
their connections read the rest of a large response without the GIL
(kpax.broker.connection), since the application thread holds it meanwhile.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import selectors
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kpax.proto.errors import ClientClosedError, IllegalStateError, KafkaTimeoutError

T = TypeVar("T")


class _IdleSelector(selectors.DefaultSelector):
    """The loop's selector: ``idle`` is set while the loop blocks in it (a
    select with a timeout other than 0: no callback is ready to run)."""

    def __init__(self, idle: threading.Event) -> None:
        super().__init__()
        self._idle = idle

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout == 0:  # callbacks are ready: the loop only polls
            events: list[tuple[selectors.SelectorKey, int]] = super().select(0)
            return events
        self._idle.set()
        try:
            events = super().select(timeout)
        finally:
            self._idle.clear()
        return events


class _IdleTrackingLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``idle`` event says it has nothing to run."""

    def __init__(self) -> None:
        self.idle = threading.Event()
        super().__init__(_IdleSelector(self.idle))

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        self.idle.clear()  # work for the loop: not idle until it has run it
        return super().call_soon_threadsafe(callback, *args, context=context)


#: The idents of the threads running a :class:`LoopThread`'s loop.
_LOOP_THREADS: set[int] = set()


def runs_background_loop() -> bool:
    """Whether the calling thread runs a :class:`LoopThread`'s loop: the loop of a
    sync face, while the application's own threads run Python code."""
    return threading.get_ident() in _LOOP_THREADS


class LoopThread:
    """An event loop running forever on a daemon thread until :meth:`stop`."""

    def __init__(self, name: str = "kpax-io", *, track_idle: bool = False) -> None:
        self.name = name
        loop = _IdleTrackingLoop() if track_idle else asyncio.new_event_loop()
        self.loop = loop
        #: Set while the loop has nothing to run (``track_idle`` only, else None).
        self.idle: threading.Event | None = (
            loop.idle if isinstance(loop, _IdleTrackingLoop) else None
        )
        self._stopped = False
        started = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    def _main(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        ident = threading.get_ident()
        _LOOP_THREADS.add(ident)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                _LOOP_THREADS.discard(ident)
                self.loop.close()
                if self.idle is not None:
                    self.idle.set()  # (nothing will ever run: no one waits for it)

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    @property
    def alive(self) -> bool:
        return not self._stopped and self._thread.is_alive()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._stopped:
            coro.close()
            raise ClientClosedError(f"{self.name}: client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None, what: str = "") -> T:
        """Run ``coro`` on the loop and wait for its result (at most ``timeout`` seconds)."""
        if self.in_loop_thread:
            coro.close()
            raise IllegalStateError(
                "a blocking kpax call was made from kpax's own I/O thread (e.g. from a "
                "callback); use the asyncio API there"
            )
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise KafkaTimeoutError(
                f"{what or 'operation'} did not finish within {timeout:g}s"
            ) from None

    def wait_idle(self, timeout: float) -> None:
        """Wait (the GIL released) until the loop has nothing to run, at most
        ``timeout`` seconds; at once if it has nothing now, tracks no idleness,
        or this is the loop's own thread (a callback: the loop is busy running it)."""
        idle = self.idle
        if idle is None or idle.is_set() or threading.current_thread() is self._thread:
            return
        idle.wait(timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._stopped:
            self.loop.call_soon_threadsafe(fn, *args)

    def abandon(self) -> None:
        """This is a child of fork(): the thread does not exist here and the
        loop's self-pipe is the parent's. Nothing is sent to the loop again."""
        self._stopped = True

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the loop (pending tasks are cancelled) and join the thread."""
        if self._stopped:
            return
        self._stopped = True
        if self.in_loop_thread:
            self.loop.stop()
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
