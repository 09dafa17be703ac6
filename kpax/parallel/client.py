"""``kpax.aio.ParallelConsumer``: records processed concurrently, in key order, at least once.

Role: the asyncio face of the parallel consumer. It owns a
:class:`kpax.aio.Consumer` (``enable_auto_commit=False``: it commits itself,
what its handlers finished), the :class:`~kpax.parallel.driver.Driver` that
runs the sans-I/O :class:`~kpax.parallel.engine.Engine` on it, and, with
``dead_letter_topic``, the producer of dead letters. ``run(handler)`` calls
``handler(record)`` for every record, at most ``max_concurrency`` at once:
as asyncio tasks (an ``async def`` handler), or on an executor. The sync
face (:mod:`kpax.parallel.sync`) runs this on a loop thread with a pool of
``max_concurrency`` threads.

Options: those of :data:`~kpax.parallel.options.PARALLEL_OPTIONS`, and any
consumer option (``group_id`` required).

Imports: kpax.consumer.client, kpax.consumer.pattern, kpax.tasks, kpax.parallel.*,
kpax.proto.errors, kpax.structs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import re
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kpax.consumer.client import AsyncConsumer
from kpax.consumer.pattern import subscribe_args
from kpax.parallel.deadletter import DeadLetters
from kpax.parallel.driver import Driver, Listener
from kpax.parallel.options import ParallelConsumerConfig, ParallelSettings, split_config
from kpax.proto.errors import ConfigError, IllegalStateError, KafkaError
from kpax.structs import TopicPartition
from kpax.tasks import wait_quietly

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

__all__ = ["AsyncParallelConsumer"]

log = logging.getLogger("kpax.parallel")

#: The signals ``run()`` stops on (gracefully), where it may catch them.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class AsyncParallelConsumer:
    """``kpax.aio.ParallelConsumer("host:9092", group_id="g", ordering="key")``:
    ``subscribe`` (or ``assign``), then ``await run(handler)``. An async
    context manager. See docs/parallel-consumer.md."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        /,
        **config: Unpack[ParallelConsumerConfig],
    ) -> None:
        own, rest = split_config(config)
        self.settings = settings = ParallelSettings.from_config(own)
        #: The consumer this runs on (``enable_auto_commit=False``).
        self.consumer = consumer = AsyncConsumer(bootstrap_servers, **rest)
        group = consumer.settings.group_id
        if group is None:
            raise ConfigError(
                "a parallel consumer needs a group_id: it commits what its handlers "
                "finished to the group (with subscribe() or assign())"
            )
        dead_letters = None
        if settings.dead_letter_topic is not None:
            dead_letters = DeadLetters(
                settings.dead_letter_topic,
                consumer.config,
                settings.dead_letter_producer_config,
                group,
            )
        self._driver = Driver(consumer, settings, dead_letters)
        self._started = False
        self._closed = False
        self._running: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ lifecycle

    @property
    def config(self) -> dict[str, Any]:
        """The consumer's configuration (with ``enable_auto_commit=False``)."""
        return self.consumer.config

    @property
    def cluster(self) -> Any:
        """The underlying consumer's cluster (metadata, brokers)."""
        return self.consumer.cluster

    async def start(self) -> None:
        """Start the underlying consumer (and the dead-letter producer, if any); ``async with`` and
        ``subscribe`` call it.
        """
        if self._started:
            return
        await self.consumer.start()
        if self._driver.dead_letters is not None:
            try:
                await self._driver.dead_letters.start()
            except BaseException:
                await self.consumer.close(5.0)
                raise
        self._started = True

    async def __aenter__(self) -> AsyncParallelConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float = 30.0) -> None:
        """Stop (as :meth:`stop`), wait for ``run`` to end (its running handlers
        finish, at most ``drain_timeout_ms``; what is done is committed), then
        close the consumer (leaving the group) and the dead-letter producer."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.stop()
        running = self._running
        if running is not None and not running.done():
            await wait_quietly([running], timeout)
        if self._started:
            with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                # what handlers still running at the end of the run finished since
                left = max(deadline - loop.time(), 0.1)
                await asyncio.wait_for(self._driver.commit(), left)
        try:
            await self._driver.close(max(deadline - loop.time(), 0.1))
        finally:
            await self.consumer.close(max(deadline - loop.time(), 0.1))

    # ------------------------------------------------------------ assignment

    async def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str] | None = None,
        listener: Any = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group and process the partitions it assigns, of ``topics``
        or of the topics ``pattern`` matches (see ``kpax.aio.Consumer.subscribe``).
        ``listener`` (a :class:`kpax.ConsumerRebalanceListener`, methods may be
        coroutines) hears each change after the parallel consumer has dealt with
        it: a revoked partition's handlers finished and its offsets committed."""
        await self.start()
        names, regex = subscribe_args(topics, pattern)
        wrapped = Listener(self._driver, listener)
        if regex is not None:
            await self.consumer.subscribe(listener=wrapped, pattern=regex)
        else:
            await self.consumer.subscribe(names, wrapped)

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Process exactly these partitions (no group membership; commits still
        go to ``group_id``)."""
        await self.start()
        tps = {TopicPartition(*tp) for tp in partitions}
        old = self.consumer.assignment()
        await self.consumer.assign(tps)
        if old - tps:
            self._driver.lost(old - tps)  # (their work is left, uncommitted, as on a loss)
        if tps - old:
            await self._driver.assigned(tps - old)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group gives this member now."""
        return self.consumer.assignment()

    def subscription(self) -> set[str]:
        """The topics subscribed to."""
        return self.consumer.subscription()

    async def wait_for_assignment(self, timeout: float = 30.0) -> set[TopicPartition]:
        """Wait until the group has given this member its (possibly empty) assignment."""
        return await self.consumer.wait_for_assignment(timeout)

    # ------------------------------------------------------------ running

    async def run(
        self,
        handler: Callable[[Any], Any],
        *,
        executor: concurrent.futures.Executor | None = None,
        handle_signals: bool = True,
    ) -> None:
        """Call ``handler(record)`` for every record until :meth:`stop`,
        :meth:`close` or SIGINT/SIGTERM (``handle_signals``, where the loop can
        catch signals: the main thread on Unix), then stop gracefully and return.

        ``handler`` is a coroutine function (at most ``max_concurrency`` tasks at
        once), or, with ``executor``, a plain function run there. A handler that
        raises is retried (``max_attempts``, ``retry_delay_ms``); a record given up
        goes to ``dead_letter_topic`` or ``on_error``, and with neither, ``run``
        stops and raises the handler's exception (that record is not committed).
        A cancelled ``run`` stops gracefully too, then re-raises."""
        if self._closed:
            raise IllegalStateError("the parallel consumer is closed")
        if self._running is not None:
            raise IllegalStateError("run() was called already (a parallel consumer runs once)")
        await self.start()
        loop = asyncio.get_running_loop()
        self._running = loop.create_future()
        undo = self._catch_signals(loop) if handle_signals else []
        try:
            await self._driver.run(handler, executor)
        finally:
            for restore in undo:
                restore()
            if not self._running.done():
                self._running.set_result(None)

    def _catch_signals(self, loop: asyncio.AbstractEventLoop) -> list[Callable[[], None]]:
        if threading.current_thread() is not threading.main_thread():
            return []
        undo: list[Callable[[], None]] = []
        for sig in STOP_SIGNALS:
            try:
                previous = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # (Windows, or a loop that cannot)

            def restore(sig: signal.Signals = sig, previous: Any = previous) -> None:
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, previous)

            undo.append(restore)
        return undo

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("parallel consumer: %s: stopping", sig.name)
        self.stop()

    def stop(self) -> None:
        """Make ``run`` stop: nothing more starts, running handlers finish (at
        most ``drain_timeout_ms``), what is done is committed, ``run`` returns.
        Call it on the loop (from another thread: ``loop.call_soon_threadsafe``)."""
        self._driver.stop()

    # ------------------------------------------------------------ observing

    def metrics(self) -> dict[str, float]:
        """The consumer's metrics (``consumer.metrics()``) and the parallel
        consumer's: ``records-in-flight`` (handlers running), ``records-queued``
        (and per partition: taken, waiting to start or for a retry),
        ``records-processed-rate`` / ``-total``, ``oldest-incomplete-age-ms`` (and
        per partition), ``records-window``, ``bytes-window``, ``fetch-paused``,
        the ``-total`` counters of failures, retries, records given up,
        dead-lettered and skipped (done before a restart). Call it on the loop."""
        out = self.consumer.metrics()
        out.update(self._driver.metrics())
        return out
