"""The parallel consumer's asyncio driver: runs the engine on a consumer.

Role: :class:`Driver` does what :class:`~kpax.parallel.engine.Engine` decides,
with the consumer's public API only (``poll``, ``pause``/``resume``,
``commit``, ``committed``, a rebalance listener):

- **the poll loop** takes as many records as the window has room for,
  hands them to the engine and starts what may start; when the window is
  full it pauses every assigned partition (resumed once the window is half
  empty), and keeps polling so the member stays in its group;
- **handlers** run as asyncio tasks (a coroutine function), or on an
  executor (a plain function; the sync face passes a thread pool of
  ``max_concurrency`` threads); their outcomes go back to the engine, which
  starts the next records, schedules retries (a timer on the loop) or gives a
  record up (dead-letter topic, ``on_error``, or the run ends with its error);
- **commits** go every ``commit_interval_ms``, or as soon as a quarter of the
  window is done, one at a time; a commit the broker refuses as having too
  large a metadata halves the map's budget and goes again;
- **rebalances** (:class:`Listener`): a newly assigned partition stays paused
  until its committed offset's metadata is read (the records it records as done
  are skipped); a revoked one starts nothing more, its running handlers
  finish (at most ``drain_timeout_ms``), what is done is committed, then it
  goes; a lost one goes at once, uncommitted.

Imports: kpax.consumer.client, kpax.metrics, kpax.tasks, kpax.parallel.*, kpax.proto.errors,
kpax.proto.error_codes, kpax.structs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from kpax.consumer.client import AsyncConsumer
from kpax.metrics import NAN, Metrics, metrics_enabled, tagged
from kpax.parallel.deadletter import DeadLetters
from kpax.parallel.engine import GIVE_UP, RETRY, Engine
from kpax.parallel.options import ParallelSettings
from kpax.parallel.schedule import Work
from kpax.parallel.workers import HandlerThreads
from kpax.proto.error_codes import OffsetMetadataTooLargeError
from kpax.proto.errors import (
    CommitFailedError,
    KafkaError,
    RebalanceInProgressCommitError,
)
from kpax.structs import OffsetAndMetadata, TopicPartition
from kpax.tasks import cancel_and_wait

log = logging.getLogger("kpax.parallel")

__all__ = ["Driver", "Listener"]

#: The longest a poll waits for records (seconds): how soon a stop is seen.
POLL_WAIT = 0.1
#: The longest the loop waits while the window is full (seconds).
FULL_WAIT = 0.5
#: How long the window may stay full before the partitions are paused (seconds).
PAUSE_AFTER = 1.0


def _where(rec: Any) -> str:
    return f"{rec.topic}-{rec.partition}@{rec.offset}"


class Driver:
    """See the module docstring. One per parallel consumer; its methods run on
    the consumer's event loop."""

    def __init__(
        self,
        consumer: AsyncConsumer,
        settings: ParallelSettings,
        dead_letters: DeadLetters | None,
    ) -> None:
        self.consumer = consumer
        self.settings = settings
        self.engine = Engine(settings.engine)
        self.dead_letters = dead_letters
        self._handler: Callable[[Any], Any] | None = None
        self._executor: concurrent.futures.Executor | None = None
        self._threads: HandlerThreads | None = None
        #: Outcomes of tasks and executor calls waiting for :meth:`_flush_outcomes`.
        self._outcomes: list[tuple[Work, BaseException | None]] = []
        self._flush_due = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Set by :meth:`stop`; the run loop ends.
        self.stopping = asyncio.Event()
        #: One event per waiter (the poll loop, a drain), set by :meth:`_notify`
        #: whenever what they wait for may have changed (a handler ended, a
        #: commit was answered, a partition was assigned). Each waiter checks
        #: its condition, then waits on its own event: no waiter clears
        #: another's wake-up.
        self._waiters: set[asyncio.Event] = set()
        self._commit_now = asyncio.Event()
        self._retry_timer: asyncio.TimerHandle | None = None
        self._retry_at: float | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: The error that ends the run (a record given up with nowhere to go, a
        #: failed dead letter or error callback, a poll error).
        self.fatal: BaseException | None = None
        #: Partitions whose committed metadata is being read (kept paused).
        self._seeding: set[TopicPartition] = set()
        #: Partitions paused because the window is stuck full; since when it is full.
        self.throttled = False
        self._full_since: float | None = None
        self._commit_at = max(1, settings.engine.max_records // 4)
        self._poll_max = consumer.settings.max_poll_records
        m = Metrics() if metrics_enabled() else None
        self._metrics = m
        self._processed = m.sensor("records-processed") if m is not None else None

    # ------------------------------------------------------------ time

    def _now(self) -> float:
        loop = self._loop
        return loop.time() if loop is not None else asyncio.get_running_loop().time()

    # ------------------------------------------------------------ the run

    async def run(
        self, handler: Callable[[Any], Any], executor: concurrent.futures.Executor | None
    ) -> None:
        """Process records until :meth:`stop` (or a fatal error), then stop
        gracefully: running handlers finish (at most ``drain_timeout_ms``) and
        what is done is committed. Raises the fatal error, if any."""
        self._loop = asyncio.get_running_loop()
        self._handler = handler
        self._executor = executor
        self._threads = executor if isinstance(executor, HandlerThreads) else None
        if self._threads is not None:
            self._threads.bind(self._loop, self._finished_batch)
        committer = asyncio.ensure_future(self._commit_loop())
        try:
            await self._poll_loop()
        finally:
            self.stopping.set()
            try:
                await self._drain(list(self.engine.parts), "stopping")
                await self.commit()
            finally:
                await cancel_and_wait([committer])
                if self._retry_timer is not None:
                    self._retry_timer.cancel()
        if self.fatal is not None:
            raise self.fatal

    def stop(self) -> None:
        self.stopping.set()
        self._notify()

    async def _poll_loop(self) -> None:
        consumer, engine = self.consumer, self.engine
        while not self.stopping.is_set() and self.fatal is None:
            self._sync_pauses()
            room = engine.room()
            try:
                if room <= 0:
                    consumer._poll_tick()  # the member is alive; raises a consumer's fatal error
                    await self._wait(FULL_WAIT)
                    continue
                records = await consumer.poll(POLL_WAIT, max_records=min(room, self._poll_max))
            except KafkaError as exc:
                log.error("parallel consumer: stopping on a consumer error: %s", exc)
                self.fatal = exc
                break
            if records:
                engine.add(records, self._now())
                self._dispatch()

    def _notify(self) -> None:
        for event in self._waiters:
            event.set()

    async def _wait(self, timeout: float) -> None:
        """Until the next :meth:`_notify` (one after this call began), at most
        ``timeout`` seconds."""
        event = asyncio.Event()
        self._waiters.add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self._waiters.discard(event)

    def _sync_pauses(self) -> None:
        """Pause the partitions a metadata lookup holds back, and every assigned
        partition while the window is stuck full; resume the others.

        A full window stops the poll loop from taking records, so the consumer's
        buffer fills and its fetcher stops by itself; only a window full for
        :data:`PAUSE_AFTER` seconds without a break pauses the partitions (which
        drops what the consumer buffered: it is fetched again on resume), until
        the window is half empty. (Pausing at every full window would refetch
        several times a second while handlers keep up.)"""
        engine, s = self.engine, self.settings.engine
        now = self._now()
        if engine.room() > 0:
            self._full_since = None
        elif self._full_since is None:
            self._full_since = now
        if self.throttled:
            if (
                engine.window_records <= s.max_records // 2
                and engine.window_bytes <= s.max_bytes // 2
            ):
                self.throttled = False
        elif self._full_since is not None and now - self._full_since >= PAUSE_AFTER:
            self.throttled = True
            log.info(
                "parallel consumer: the window (max_records_in_flight=%d, "
                "max_bytes_in_flight=%d) has been full for %.3gs: fetching paused",
                s.max_records,
                s.max_bytes,
                now - self._full_since,
            )
        consumer = self.consumer
        assigned = consumer.assignment()
        want = assigned if self.throttled else self._seeding
        paused = consumer.paused()
        pause = (want & assigned) - paused
        resume = paused - want
        if pause:
            consumer.pause(*pause)
        if resume:
            consumer.resume(*(resume & assigned))

    # ------------------------------------------------------------ handlers

    def _dispatch(self) -> None:
        """Start what may start now; arm the timer of the next retry."""
        if self._handler is None:
            return
        for work in self.engine.take(self._now()):
            self._start(work)
        due = self.engine.next_retry()
        if due is not None and (self._retry_at is None or due < self._retry_at):
            if self._retry_timer is not None:
                self._retry_timer.cancel()
            assert self._loop is not None
            self._retry_at = due
            self._retry_timer = self._loop.call_at(due, self._on_retry_timer)

    def _on_retry_timer(self) -> None:
        self._retry_timer = self._retry_at = None
        self._dispatch()

    def _start(self, work: Work) -> None:
        handler, loop = self._handler, self._loop
        assert handler is not None and loop is not None
        if self._threads is not None:
            self._threads.call(handler, work.record, work)
        elif self._executor is not None:
            fut = loop.run_in_executor(self._executor, handler, work.record)
            fut.add_done_callback(partial(self._done, work))
        else:
            loop.create_task(self._run_one(handler, work))

    async def _run_one(self, handler: Callable[[Any], Any], work: Work) -> None:
        """One handler call as a task: its outcome goes to the batch."""
        try:
            result = handler(work.record)
            if result is not None and inspect.isawaitable(result):
                await result
        except BaseException as exc:  # the record's outcome (a cancel too)
            self._outcome(work, exc)
        else:
            self._outcome(work, None)

    def _done(self, work: Work, fut: asyncio.Future[Any]) -> None:
        exc = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        self._outcome(work, exc)

    def _outcome(self, work: Work, exc: BaseException | None) -> None:
        """Outcomes of one pass of the loop are taken together (one dispatch)."""
        self._outcomes.append((work, exc))
        if not self._flush_due:
            self._flush_due = True
            assert self._loop is not None
            self._loop.call_soon(self._flush_outcomes)

    def _flush_outcomes(self) -> None:
        self._flush_due = False
        outcomes, self._outcomes = self._outcomes, []
        self._finished_batch(outcomes)

    def _finished_batch(self, outcomes: list[tuple[Any, BaseException | None]]) -> None:
        for work, exc in outcomes:
            self._finished(work, exc, more=True)
        self._after_outcomes()

    def _finished(self, work: Work, exc: BaseException | None, *, more: bool = False) -> None:
        """``work``'s handler call ended (``exc``: how it failed): to the engine;
        then (unless ``more`` outcomes follow) start what may start."""
        engine = self.engine
        now = self._now()
        if exc is None:
            engine.succeeded(work, now)
            if self._processed is not None:
                self._processed.record()
        else:
            what = engine.failed(work, now)
            rec = work.record
            if what == RETRY:
                log.info(
                    "record %s failed (attempt %d): %r; retrying in %.3gs",
                    _where(rec),
                    work.attempts,
                    exc,
                    work.ready_at - now,
                )
            elif what == GIVE_UP:
                self._spawn(self._give_up(work, exc))
        if not more:
            self._after_outcomes()

    def _after_outcomes(self) -> None:
        engine = self.engine
        if engine.done_pending >= self._commit_at or (engine.done_pending and engine.room() <= 0):
            self._commit_now.set()  # a quarter of the window done, or a full window to free
        self._dispatch()
        self._notify()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _give_up(self, work: Work, exc: BaseException) -> None:
        rec = work.record
        try:
            if self.dead_letters is not None:
                await self.dead_letters.send(rec, exc, work.attempts)
                log.warning(
                    "record %s failed %d times (%r): sent to the dead-letter topic",
                    _where(rec),
                    work.attempts,
                    exc,
                )
            elif self.settings.on_error is not None:
                await self._call(self.settings.on_error, rec, exc)
            else:
                log.error(
                    "record %s failed %d times: %r; no dead_letter_topic or on_error: "
                    "stopping (the record is not committed)",
                    _where(rec),
                    work.attempts,
                    exc,
                )
                raise exc
        except asyncio.CancelledError:  # (closing)
            self.engine.abandon(work)
            raise
        except BaseException as err:  # it ends the run: raised from run()
            self.engine.abandon(work)
            if self.fatal is None:
                self.fatal = err
            if err is not exc:
                log.error("record %s: giving it up failed: %r; stopping", _where(rec), err)
            self.stop()
        else:
            self.engine.succeeded(work, self._now())
        self._dispatch()
        self._notify()

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` as handlers run: on the executor, or awaited if it returns
        an awaitable."""
        if self._executor is not None:
            assert self._loop is not None
            return await self._loop.run_in_executor(self._executor, fn, *args)
        result = fn(*args)
        if inspect.isawaitable(result):
            result = await result
        return result

    # ------------------------------------------------------------ commits

    async def _commit_loop(self) -> None:
        while True:
            self._commit_now.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._commit_now.wait(), self.settings.commit_interval)
            await self.commit()

    async def commit(self, tps: Iterable[TopicPartition] | None = None) -> bool:
        """Commit what changed (of ``tps``; default all); False if it failed."""
        engine = self.engine
        for _ in range(8):  # the metadata budget halves at most this often
            snap = engine.snapshot(tps)
            if not snap:
                return True
            try:
                await self.consumer.commit(snap.offsets)
            except OffsetMetadataTooLargeError:
                engine.commit_failed(snap)
                budget = engine.shrink_metadata(max(len(o.metadata) for o in snap.offsets.values()))
                log.warning(
                    "the broker refused a completed-offsets map as too large "
                    "(offset.metadata.max.bytes is below offset_metadata_max_bytes): "
                    "the map now takes at most %d bytes",
                    budget,
                )
                continue
            except (CommitFailedError, RebalanceInProgressCommitError) as exc:
                engine.commit_failed(snap)
                log.info("parallel consumer: commit not applied (%s); committing again later", exc)
                return False
            except KafkaError as exc:
                engine.commit_failed(snap)
                log.warning("parallel consumer: commit failed: %s", exc)
                return False
            engine.committed(snap)
            self._notify()
            return True
        return False

    # ------------------------------------------------------------ rebalances

    async def _drain(self, tps: list[TopicPartition], why: str, limit: float | None = None) -> None:
        """Start nothing more of ``tps``; wait (at most ``limit``, default
        ``drain_timeout_ms``) for their running handlers."""
        engine = self.engine
        engine.revoke(tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.settings.drain_timeout if limit is None else limit)
        while True:
            left = engine.running_in(tps)
            if not left:
                return
            wait = deadline - loop.time()
            if wait <= 0:
                log.warning(
                    "parallel consumer (%s): %d handlers of %s still running after "
                    "drain_timeout_ms; their records stay uncommitted (processed again)",
                    why,
                    left,
                    sorted(tps),
                )
                return
            await self._wait(wait)

    async def assigned(self, tps: set[TopicPartition]) -> None:
        """Read the committed metadata of ``tps`` (kept paused meanwhile) and
        start following them."""
        self._seeding |= tps
        self._sync_pauses()
        try:
            committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
            try:
                committed = await self.consumer.committed(tps)
            except KafkaError as exc:
                log.warning(
                    "parallel consumer: could not read the committed offsets of %s (%s): "
                    "records done beyond them are processed again",
                    sorted(tps),
                    exc,
                )
            for tp in tps:
                om = committed.get(tp)
                if not self.engine.assign(tp, om):
                    log.warning(
                        "parallel consumer: the completed-offsets map committed for %s is not "
                        "usable here (another version, or damaged): records done beyond "
                        "offset %s are processed again",
                        tp,
                        om.offset if om is not None else None,
                    )
        finally:
            self._seeding -= tps
            self._sync_pauses()
            self._notify()

    async def revoked(self, tps: set[TopicPartition]) -> None:
        """Running handlers of ``tps`` finish, what is done is committed, they go."""
        self._seeding -= tps
        parts = self.engine.parts
        mine = [tp for tp in tps if tp in parts]
        if mine:
            # (heartbeats may wait behind a rebalance listener: as the consumer's
            # own wait at a revocation, at most half the session timeout; the
            # partitions a stopped run drained already are not waited for again)
            session = self.consumer.settings.session_timeout_ms / 2000
            fresh = [tp for tp in mine if not parts[tp].revoked]
            if fresh:
                await self._drain(fresh, "revocation", min(self.settings.drain_timeout, session))
            await self.commit(mine)
            self.engine.remove(mine)
        self._notify()

    def lost(self, tps: set[TopicPartition]) -> None:
        self._seeding -= tps
        self.engine.remove(tps)
        self._notify()

    async def close(self, timeout: float) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.dead_letters is not None:
            await self.dead_letters.close(timeout)

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, float]:
        """The parallel consumer's own metrics (see docs/parallel-consumer.md)."""
        engine = self.engine
        now = self._now() if self._loop is not None else 0.0
        out: dict[str, float] = {
            "records-in-flight": engine.running,
            "records-window": engine.window_records,
            "bytes-window": engine.window_bytes,
            "fetch-paused": 1.0 if self.throttled else 0.0,
            "records-skipped-total": engine.skipped,
            "records-failed-total": engine.failures,
            "records-retried-total": engine.retries,
            "records-given-up-total": engine.given_up,
            "records-dead-lettered-total": self.dead_letters.sent if self.dead_letters else 0,
        }
        queued = 0
        oldest = NAN
        for tp, part in list(engine.parts.items()):
            q = engine.queued(part)
            queued += q
            out[tagged("records-queued", topic=tp.topic, partition=tp.partition)] = q
            age = engine.oldest_age(part, now)
            if age is not None:
                ms = age * 1000.0
                out[tagged("oldest-incomplete-age-ms", topic=tp.topic, partition=tp.partition)] = ms
                if not oldest >= ms:  # (NaN first)
                    oldest = ms
        out["records-queued"] = queued
        out["oldest-incomplete-age-ms"] = oldest
        processed = self._processed
        if processed is not None:
            out["records-processed-total"] = processed.count
            out["records-processed-rate"] = processed.count_rate()
        return out


class Listener:
    """The rebalance listener the parallel consumer subscribes with: its own
    work first, then the application's ``listener`` (sync or async methods)."""

    def __init__(self, driver: Driver, listener: Any = None) -> None:
        self.driver = driver
        self.listener = listener

    async def _user(self, method: str, tps: set[TopicPartition]) -> None:
        fn = getattr(self.listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(self.listener, "on_partitions_revoked", None)
        if fn is None:
            return
        result = fn(tps)
        if inspect.isawaitable(result):
            await result

    async def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        await self.driver.assigned(set(tps))
        await self._user("on_partitions_assigned", set(tps))

    async def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        await self.driver.revoked(set(tps))
        await self._user("on_partitions_revoked", set(tps))

    async def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        self.driver.lost(set(tps))
        await self._user("on_partitions_lost", set(tps))
