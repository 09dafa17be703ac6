"""The shell every blocking face shares: :class:`SyncFace`.

Role: ``kpax.Producer``, ``kpax.Consumer`` and ``kpax.Admin`` each wrap an
asyncio core (``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin``) and derive
from :class:`SyncFace`, which owns the core's :class:`~kpax.loop_thread.LoopThread`
and gives every face the same plumbing: starting the core (on failure the core
is closed and the thread stopped before the error propagates), :meth:`SyncFace._run`
(hand a coroutine to the loop and wait at most the call's timeout -- the
core's default when None -- plus the face's margin; ClientClosedError after
close), close-once (the first ``close()`` closes the core and stops the thread,
later calls do nothing), the context manager, and :meth:`SyncFace._wait_until`
(wait in small steps for a condition up to a deadline, then raise the caller's
timeout error: the producer's buffer-memory waits, the consumer's wait for
an assignment). A face uses its core's public API and the core's face interface (the
underscored methods docs/architecture.md names).

Lifecycle: a face is unusable in a child of fork() (kpax.forks: every public
call raises ForkedClientError there). A face collected without ``close()``
emits a ResourceWarning (as aiokafka's clients do) and closes in the
background: its core's close runs on the I/O thread (the face's
:meth:`SyncFace._unreferenced_close`), which then ends. Nothing on the I/O
thread holds the face, so an unreferenced face is collected.

Imports: kpax.loop_thread, kpax.forks, kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import concurrent.futures
import time
import warnings
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from kpax.forks import forked_error
from kpax.forks import track as track_fork
from kpax.loop_thread import LoopThread
from kpax.proto.errors import ClientClosedError

__all__ = ["SyncFace"]

T = TypeVar("T")
F = TypeVar("F", bound="SyncFace")

#: The longest single wait of :meth:`SyncFace._wait_until` (seconds).
WAIT_STEP = 0.05


class SyncFace:
    """The base of the blocking faces (see the module docstring)."""

    #: What ``_run`` calls are named in timeout errors unless the call says.
    _call_what: ClassVar[str] = "call"
    #: The message of ClientClosedError after close (``{what}``: the call's name).
    _closed_text: ClassVar[str] = "the client is closed"
    #: The face's public name, in warnings and errors.
    _client_name: ClassVar[str] = "kpax client"
    #: Set on a face inherited through fork() (kpax.forks).
    _forked: bool = False

    def __init__(
        self, thread_name: str, default_timeout: float, margin: float, *, track_idle: bool = False
    ) -> None:
        """``default_timeout``: a call's timeout when it gives none; ``margin``:
        added to every call's timeout (the core enforces the timeout itself,
        the margin only bounds the wait for its answer)."""
        self._default_timeout = default_timeout
        self._margin = margin
        self._closed = False
        self._thread = LoopThread(thread_name, track_idle=track_idle)
        track_fork(self)

    def _start(
        self,
        start: Coroutine[Any, Any, Any],
        limit: float,
        what: str,
        abort: Callable[[], Coroutine[Any, Any, Any]],
        abort_limit: float,
    ) -> None:
        """Run the core's ``start`` (at most ``limit`` seconds); if it fails, run
        ``abort()`` (the core's close, at most ``abort_limit`` seconds), stop the
        thread and re-raise."""
        try:
            self._thread.run(start, limit, what=what)
        except BaseException:
            self._closed = True
            self._thread.run(abort(), abort_limit)
            self._thread.stop()
            raise

    def _closed_error(self, what: str) -> ClientClosedError:
        if self._forked:
            return forked_error(self, what)
        return ClientClosedError(self._closed_text.format(what=what))

    def _run(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float | None = None,
        what: str | None = None,
        *,
        unbounded: bool = False,
    ) -> T:
        """Run ``coro`` on the loop and wait for it: at most ``timeout`` (the
        face's default when None; no limit when None and ``unbounded``) plus the
        face's margin. ClientClosedError once the face is closed."""
        what = what or self._call_what
        if self._closed:
            coro.close()
            raise self._closed_error(what)
        if timeout is None:
            if unbounded:
                return self._thread.run(coro, None, what=what)
            timeout = self._default_timeout
        return self._thread.run(coro, timeout + self._margin, what=what)

    @staticmethod
    def _wait_until(
        attempt: Callable[[], T | None],
        wait: Callable[[float], object],
        timeout: float,
        error: Callable[[], BaseException],
    ) -> T:
        """``attempt()`` until it returns something other than None, calling
        ``wait(step)`` (at most :data:`WAIT_STEP` seconds) before each try; after
        ``timeout`` seconds raise ``error()``. The first try is after a wait (the
        caller has just tried)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise error()
            wait(min(remaining, WAIT_STEP))
            result = attempt()
            if result is not None:
                return result

    def _closing(self) -> None:
        """Runs first in the first ``close()``, while calls are still allowed
        (the consumer's revoke listener call)."""

    def _close_failed(self, exc: Exception) -> None:
        """The core's close (or :meth:`_closing`) raised ``exc``: re-raised
        unless a face says otherwise. The thread is stopped either way."""
        raise exc

    def _close_once(
        self,
        close: Coroutine[Any, Any, Any],
        limit: float | None,
        what: str,
        stop_timeout: float | None = 5.0,
    ) -> None:
        """The body of every face's ``close``: the first call runs :meth:`_closing`,
        marks the face closed, runs ``close`` (the core's close, at most ``limit``
        seconds) and stops the thread; later calls do nothing."""
        if self._closed:
            close.close()
            if self._forked:
                raise self._closed_error("close()")
            return
        submitted = False
        try:
            self._closing()
            self._closed = True
            submitted = True
            self._thread.run(close, limit, what=what)
        except Exception as exc:
            if not submitted:
                close.close()  # never ran: no "never awaited" warning
            self._close_failed(exc)
        finally:
            self._closed = True
            self._thread.stop(stop_timeout)

    def close(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ lifecycle

    def _after_fork(self) -> None:
        """In a child of fork() (kpax.forks): closed (a method bound before the
        fork raises too), the parent's loop never touched."""
        self._closed = True
        self._thread.abandon()

    def _unreferenced_close(self) -> Coroutine[Any, Any, Any]:
        """The core's close, for a face collected unclosed (run in the background)."""
        raise NotImplementedError

    def _closing_unreferenced(self, done: concurrent.futures.Future[Any]) -> None:
        """A face collected unclosed is closing in the background (``done``:
        the core's close); the producer's face counts what it delivers."""

    def __del__(self) -> None:
        if self.__dict__.get("_closed", True) or self._forked:
            return
        self._closed = True
        try:
            warnings.warn(
                f"unclosed {self._client_name} (closing it in the background): close() it, "
                "or use it in a `with` block",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )
        finally:
            thread = self._thread
            try:
                done = thread.submit(self._unreferenced_close())
            except Exception:  # (the interpreter is shutting down: nothing to run it)
                return
            # the thread ends once the core is closed
            done.add_done_callback(lambda _: thread.stop(0))
            self._closing_unreferenced(done)

    def __enter__(self: F) -> F:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
