"""How a producer's records end: ``flush``, ``close`` and what close says of records left.

Role: the bodies of :meth:`AsyncProducer.flush <kpax.producer.client.AsyncProducer.flush>`
(wait for the sends made so far, deferred ones included, to be acknowledged) and
:meth:`~kpax.producer.client.AsyncProducer.close` (send what is buffered within the
timeout, then fail what is left with ClientClosedError saying whether each record's
outcome is unknown or it was never sent, and why; stop the sender; close the
connections).

Imports: kpax.producer.{batch,batch_state}, kpax.event_loops, kpax.forks, kpax.proto.errors.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from kpax.event_loops import check_loop
from kpax.forks import forked_error
from kpax.producer.batch import ProducerBatch
from kpax.producer.batch_state import BatchState
from kpax.proto.errors import ClientClosedError, KafkaTimeoutError

if TYPE_CHECKING:
    from kpax.producer.client import AsyncProducer

# (module names: read per batch, where an Enum class attribute costs ~100 ns)
_IN_FLIGHT = BatchState.IN_FLIGHT
_RETRY_WAIT = BatchState.RETRY_WAIT
_SPLIT = BatchState.SPLIT


#: States of a batch whose records were sent (in flight, waiting to be sent
#: again, split: its parts were): a close fails them as of unknown outcome.
_SENT = frozenset({_IN_FLIGHT, _RETRY_WAIT, _SPLIT})


async def flush(p: AsyncProducer, timeout: float | None = None) -> None:
    """Send everything buffered now -- and the sends made before that are
    still waiting to be buffered (a new topic's metadata, buffer memory) --
    and wait for the outcome (KafkaTimeoutError after ``timeout`` seconds)."""
    if p._forked:
        raise forked_error(p, "flush()")
    check_loop(p._loop, "flush()", p._client_name)
    acc = p.accumulator
    with acc.lock:
        pending = list(acc.incomplete)
        acc.flushing += 1
    p.sender.wake()
    try:
        if p._deferred:
            started = time.monotonic()
            await settle_deferred(p, timeout, "flush")
            with acc.lock:
                pending = list(acc.incomplete)
            p.sender.wake()
            if timeout is not None:
                timeout = max(timeout - (time.monotonic() - started), 0.0)
        await wait_batches(pending, timeout, "flush")
    finally:
        with acc.lock:
            acc.flushing -= 1


async def settle_deferred(p: AsyncProducer, timeout: float | None, what: str) -> None:
    """Wait for the sends made so far that are not buffered yet (kpax.producer.deferred.defer:
    each topic's last one ends after those before it) to be buffered or to
    fail; KafkaTimeoutError after ``timeout`` seconds."""
    tasks = list(p._deferred.values())
    if not tasks:
        return
    if timeout is not None and timeout <= 0:
        pending = {t for t in tasks if not t.done()}
    else:
        _, pending = await asyncio.wait(tasks, timeout=timeout)
    if pending:
        raise KafkaTimeoutError(
            f"{what}: sends to {len(pending)} topic(s) still waiting to be buffered (for "
            f"metadata or buffer memory) after {timeout:g}s"
        )


async def wait_batches(batches: list[ProducerBatch], timeout: float | None, what: str) -> None:
    waiters = []
    loop = asyncio.get_running_loop()
    for b in batches:
        fut: asyncio.Future[None] = loop.create_future()
        if b.add_waiter(fut):
            waiters.append(fut)
    if not waiters:
        return
    _, pending = await asyncio.wait(waiters, timeout=timeout)
    if pending:
        for f in pending:
            f.cancel()
        raise KafkaTimeoutError(
            f"{what}: {len(pending)} batch(es) still unacknowledged after {timeout:g}s"
        )


def why_unsent(p: AsyncProducer) -> str:
    """What kept batches from being sent, when the producer knows it."""
    identity = p.sender.identity
    if identity is not None and identity.producer_id < 0:
        on = ""
        if identity.asking is not None:
            failed = identity.asking_error
            how = f"failed: {failed.message}" if failed is not None else "no answer yet"
            on = f"; asked of {identity.asking.describe()}: {how}"
        return f" (no producer id yet: InitProducerId had not succeeded{on})"
    return ""


async def close(p: AsyncProducer, timeout: float | None = None) -> None:
    """Send what is buffered (waiting at most ``timeout`` seconds; None: until
    each record is delivered or fails), then fail whatever is left with
    ClientClosedError and close the connections. ``timeout=0`` fails
    buffered records at once. On the event loop that started the producer
    only (IllegalStateError from another loop)."""
    if p._forked:
        raise forked_error(p, "close()")
    if p.closed:
        return
    check_loop(p._loop, "close()", p._client_name)
    if p._deferred and (timeout is None or timeout > 0):
        # sends made before close that still wait to be buffered go first
        started = time.monotonic()
        try:
            await settle_deferred(p, timeout, "close")
        except KafkaTimeoutError:
            pass  # (they fail with ClientClosedError)
        if timeout is not None:
            timeout = max(timeout - (time.monotonic() - started), 0.0)
        if p.closed:
            return
    p.closed = True
    p._disable_appenders()
    if p._stats_task is not None:
        p._stats_task.cancel()
    p._waits.close(
        ClientClosedError(
            "the producer was closed while this send waited for its topic's metadata "
            "(it was never sent)"
        )
    )
    acc = p.accumulator
    if p._started:
        with acc.lock:
            acc.closing = True
            pending = list(acc.incomplete)
        p.sender.wake()
        if timeout is None or timeout > 0:
            try:
                await wait_batches(pending, timeout, "close")
            except KafkaTimeoutError:
                pass
    await p.sender.stop()
    with acc.lock:
        left = list(acc.incomplete)
    if left:
        # in flight, sent before (waiting for a retry), or split (its parts were sent)
        unknown = [b for b in left if b.state in _SENT]
        unsent = [b for b in left if b.state not in _SENT]
        limit = (
            f"close timeout {round(timeout, 2):g}s" if timeout is not None else "no close timeout"
        )
        for group, what in (
            (
                unknown,
                "were sent but not acknowledged: their outcome is unknown (they may "
                "have been written)",
            ),
            (unsent, "were never sent" + why_unsent(p)),
        ):
            if not group:
                continue
            n = sum((b.count or len(b.values)) for b in group)
            err = ClientClosedError(
                f"the producer was closed ({limit}) before {n} record(s) were "
                f"acknowledged; they {what}"
            )
            err.outcome_unknown = group is unknown
            for b in group:
                p.sender.complete(b, -1, -1, err)
    if p._task is not None:
        p._task.cancel()
        try:
            await p._task
        except (asyncio.CancelledError, Exception):
            pass
    await p.cluster.close()
