"""``kpax.ParallelConsumer``: the blocking face of the parallel consumer.

Role: the asyncio core (:class:`~kpax.parallel.client.AsyncParallelConsumer`)
runs on a :class:`~kpax.loop_thread.LoopThread`; ``run(handler)`` blocks the
calling thread while the core calls ``handler(record)`` on a pool of
``max_concurrency`` threads (the loop thread only polls, schedules and
commits). SIGINT and SIGTERM stop ``run`` gracefully when it is called from
the main thread; :meth:`ParallelConsumer.stop` and
:meth:`ParallelConsumer.close` do from any thread. A rebalance listener's
methods run on a helper thread (not the loop: they may block).

Imports: kpax.parallel.{client,workers}, kpax.structs, kpax.sync_face and the standard library.
"""

from __future__ import annotations

import asyncio
import re
import signal
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kpax.parallel.client import STOP_SIGNALS, AsyncParallelConsumer
from kpax.parallel.workers import HandlerThreads
from kpax.structs import TopicPartition
from kpax.sync_face import SyncFace

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

    from kpax.parallel.options import ParallelConsumerConfig

__all__ = ["ParallelConsumer"]


class _ThreadListener:
    """A sync listener's methods, each run on the loop's default executor."""

    def __init__(self, listener: Any) -> None:
        self.listener = listener

    async def _call(self, method: str, tps: set[TopicPartition]) -> None:
        fn = getattr(self.listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(self.listener, "on_partitions_revoked", None)
        if fn is not None:
            await asyncio.get_running_loop().run_in_executor(None, fn, tps)

    async def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        await self._call("on_partitions_assigned", tps)

    async def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        await self._call("on_partitions_revoked", tps)

    async def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        await self._call("on_partitions_lost", tps)


class ParallelConsumer(SyncFace):
    """``kpax.ParallelConsumer("host:9092", group_id="g", ordering="key",
    max_concurrency=200)``: ``subscribe([...])``, then ``run(handler)``, which
    calls ``handler(record)`` on ``max_concurrency`` threads until :meth:`stop`,
    :meth:`close` or a signal. A context manager. See docs/parallel-consumer.md."""

    _call_what = "parallel consumer call"
    _closed_text = "the parallel consumer is closed"
    _client_name = "kpax.ParallelConsumer"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        /,
        **config: Unpack[ParallelConsumerConfig],
    ) -> None:
        core = self._core = AsyncParallelConsumer(bootstrap_servers, **config)  # checks options
        settings = core.consumer.settings
        margin = 5.0 + settings.request_timeout
        super().__init__("kpax-parallel", settings.api_timeout, margin)
        self._start(
            core.start(), margin + 30, "parallel consumer start", lambda: core.close(5.0), 10.0
        )
        self._pool = HandlerThreads(core.settings.max_concurrency)

    @property
    def aio(self) -> AsyncParallelConsumer:
        """The asyncio core (for use on this consumer's own loop only)."""
        return self._core

    def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str] | None = None,
        listener: Any = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group and process the partitions of ``topics`` (or of the
        topics ``pattern`` matches). ``listener``'s methods run on a helper
        thread, after the parallel consumer has dealt with each change."""
        wrapped = _ThreadListener(listener) if listener is not None else None
        if pattern is not None or isinstance(topics, re.Pattern):
            self._run(self._core.subscribe(topics, wrapped, pattern=pattern))
        else:
            self._run(self._core.subscribe(list(topics or ()), wrapped))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Process exactly these partitions (no group membership; commits still
        go to ``group_id``).
        """
        self._run(self._core.assign(list(partitions)))

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group gives this member now."""
        return self._core.assignment()

    def subscription(self) -> set[str]:
        """The topics subscribed to."""
        return self._core.subscription()

    def wait_for_assignment(self, timeout: float = 30.0) -> set[TopicPartition]:
        """Wait until the group has given this member its (possibly empty) assignment.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.wait_for_assignment(timeout), timeout)

    def run(self, handler: Callable[[Any], Any], *, handle_signals: bool = True) -> None:
        """Call ``handler(record)`` on the thread pool for every record; block
        until :meth:`stop`, :meth:`close` or (``handle_signals``, from the main
        thread) SIGINT/SIGTERM, then stop gracefully (running handlers finish,
        what is done is committed) and return. Raises what ends the run (a
        record given up with no ``dead_letter_topic`` or ``on_error``: the
        handler's exception)."""
        undo: list[tuple[signal.Signals, Any]] = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                undo.append((sig, signal.signal(sig, self._on_signal)))
        try:
            self._run(
                self._core.run(handler, executor=self._pool, handle_signals=False),
                what="parallel consumer run",
                unbounded=True,
            )
        finally:
            for sig, previous in undo:
                signal.signal(sig, previous)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Make ``run`` stop (from any thread, a handler included)."""
        self._thread.call_soon(self._core.stop)

    def close(self, timeout: float = 30.0) -> None:
        """Stop, wait for ``run`` to end (at most ``timeout`` seconds in all),
        close the consumer (leaving the group) and the thread pool."""
        try:
            self._close_once(self._core.close(timeout), timeout + 5.0, "parallel consumer close")
        finally:
            self._pool.shutdown(wait=False)

    def _unreferenced_close(self) -> Coroutine[Any, Any, None]:
        """The core's close, for a face collected unclosed (what the shared
        shell of the sync faces runs in the background then)."""
        self._pool.shutdown(wait=False)
        return self._core.close(5.0)

    def metrics(self) -> dict[str, float]:
        """See :meth:`AsyncParallelConsumer.metrics`."""
        core = self._core

        async def read() -> dict[str, float]:
            return core.metrics()

        if self._closed:
            return core.metrics()
        return self._run(read())
