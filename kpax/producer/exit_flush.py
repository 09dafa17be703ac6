"""At interpreter exit, records a producer holds are delivered, within a bound, or reported.

Role: a record sent without ``flush()`` or ``close()`` before the program
ends is not silently dropped. Every producer registers here (:func:`track`:
the blocking ``kpax.Producer`` once started, the asyncio core once started),
and an ``atexit`` hook (:func:`flush_at_exit`), run before the I/O threads
die, closes each open one: a blocking producer delivers what it holds, each
within its ``delivery_timeout_ms`` capped at :data:`EXIT_FLUSH_MAX_S`, all
at once under one deadline, as kafka-python closes its producers at exit.
An asyncio producer is closed on its event loop if that loop still runs in
another thread; otherwise (its loop has ended, as ``asyncio.run`` ends it)
nothing can send what it holds. Whatever was not delivered is reported
loudly: an error log line (printed on stderr when logging is not set up)
naming the producer and the count of records lost, and what to do.

A producer collected unclosed closes in the background (kpax.sync_face);
:func:`closing` lets the hook wait for that close too, and count.

A child of ``fork()`` forgets the parent's producers (kpax.forks makes them
unusable there): its exit closes nothing of the parent's.

Imports: kpax.producer.batch and the standard library.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import time
import weakref
from collections.abc import Iterable
from typing import Any

from kpax.producer.batch import ProducerBatch

__all__ = ["EXIT_FLUSH_MAX_S", "closing", "flush_at_exit", "pending", "track", "undelivered"]

log = logging.getLogger("kpax.producer")

#: The longest the interpreter's exit waits for producers' records (seconds);
#: each producer waits at most its ``delivery_timeout_ms`` (when its records
#: succeed or fail anyway), all at once.
EXIT_FLUSH_MAX_S = 30.0

#: Open producers: ``kpax.Producer`` faces and started ``kpax.aio.Producer`` cores.
_open: weakref.WeakSet[Any] = weakref.WeakSet()
#: Producers collected unclosed, closing in the background: (name, core, done, batches).
_closing: list[Any] = []


def track(producer: Any) -> None:
    """Close ``producer`` at exit if it is still open then (see the module docstring)."""
    _open.add(producer)


def pending(core: Any, *, lock: bool = True) -> list[tuple[ProducerBatch, int]]:
    """The batches a producer core has not completed, each with its record count
    (counted now: a completed batch drops its records). ``lock=False`` in a
    finalizer, which may run in a thread holding the accumulator's lock (the
    set is copied in one step under the GIL)."""
    acc = core.accumulator
    if lock:
        with acc.lock:
            batches = list(acc.incomplete)
    else:
        batches = list(acc.incomplete)
    return [(b, b.count or len(b.values)) for b in batches]


def undelivered(batches: Iterable[tuple[ProducerBatch, int]]) -> int:
    """How many records of ``batches`` (from :func:`pending`) were not delivered."""
    lost = 0
    for batch, count in batches:
        if not batch.done:
            lost += count
        elif batch.parts is not None:  # split: its parts' outcomes
            lost += undelivered((part, part.count) for _, part in batch.parts)
        elif batch.error is not None:
            lost += count
    return lost


def closing(name: str, core: Any, done: concurrent.futures.Future[Any]) -> None:
    """``core`` (of a producer collected unclosed) is closing in the background:
    what it fails to deliver is reported when the close ends, or at exit if it
    has not ended by then."""
    entry = (name, core, done, pending(core, lock=False))
    _closing.append(entry)

    def ended(_: object) -> None:
        _report_collected(entry, "")

    done.add_done_callback(ended)


_Closing = tuple[str, Any, concurrent.futures.Future[Any], list[tuple[ProducerBatch, int]]]


def _report_collected(entry: _Closing, when: str) -> None:
    try:
        _closing.remove(entry)  # (whoever removes it reports: the close's end, or exit)
    except ValueError:
        return
    name, core, _, batches = entry
    lost = undelivered(batches)
    if lost:
        log.error(
            "%s (client_id=%r): %d record(s) were not delivered: the producer was "
            "garbage-collected without close() and closed in the background%s; call "
            "close() (or use the producer in a `with` block)",
            name,
            core.config.get("client_id"),
            lost,
            when,
        )


def _bound(core: Any) -> float:
    return min(float(core.settings.delivery_timeout_ms) / 1000, EXIT_FLUSH_MAX_S)


def _report(name: str, core: Any, lost: int, why: str) -> None:
    log.error(
        "%s (client_id=%r): %d record(s) sent without flush() or close() were not "
        "delivered before the interpreter exited (%s); call flush() or close() "
        "(or use the producer in a `with` block) before the program ends",
        name,
        core.config.get("client_id"),
        lost,
        why,
    )


def flush_at_exit() -> None:
    """The ``atexit`` hook: close every open producer, within the bound, and report
    the records not delivered (see the module docstring)."""
    started = time.monotonic()
    waits: list[tuple[str, Any, Any, list[tuple[ProducerBatch, int]], float]] = []
    producers = list(_open)
    faces_cores = {id(p.aio) for p in producers if hasattr(p, "aio")}
    for producer in producers:
        if id(producer) in faces_cores:
            continue  # a blocking face's core: the face closes it
        core = getattr(producer, "aio", producer)
        if getattr(producer, "_forked", False) or getattr(producer, "_closed", False):
            continue  # (the face's flag: a face closed, or closing in the background)
        if getattr(core, "closed", True) or not getattr(core, "_started", False):
            continue
        batches = pending(core)
        if not batches:
            continue
        waits.append((_name(producer), producer, core, batches, _bound(core)))
    if not waits and not _closing:
        return
    deadline = started + max([w[4] for w in waits] + [EXIT_FLUSH_MAX_S if _closing else 0.0])
    for name, producer, core, batches, bound in waits:
        left = max(min(started + bound, deadline) - time.monotonic(), 0.0)
        why = _close(producer, core, left)
        lost = undelivered(batches)
        if lost:
            _report(name, core, lost, why or f"waited {time.monotonic() - started:.1f}s")
    for entry in list(_closing):
        left = max(min(started + _bound(entry[1]), deadline) - time.monotonic(), 0.0)
        try:
            entry[2].result(left)
        except Exception:  # (timed out or failed: counted below)
            pass
        _report_collected(
            entry,
            f", and had not delivered them when the interpreter exited "
            f"(waited {time.monotonic() - started:.1f}s)",
        )


def _name(producer: Any) -> str:
    return str(getattr(type(producer), "_client_name", type(producer).__name__))


def _close(producer: Any, core: Any, timeout: float) -> str:
    """Close ``producer`` within ``timeout``; why its records could not be sent, if known."""
    if producer is not core:  # the blocking face: its own I/O thread
        try:
            producer.close(timeout)
        except Exception as exc:
            return f"close failed: {exc}"
        return ""
    loop = core._loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return "its event loop has ended: await producer.close() or flush() on it before"
    if _running_here(loop):
        return "the event loop still running at exit is this thread's"
    future = asyncio.run_coroutine_threadsafe(core.close(timeout), loop)
    try:
        future.result(timeout + 1.0)
    except Exception as exc:
        return f"close failed: {exc!r}"
    return ""


def _running_here(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _forget_in_child() -> None:
    _open.clear()
    _closing.clear()


atexit.register(flush_at_exit)
if hasattr(os, "register_at_fork"):  # (not on Windows: no fork)
    os.register_at_fork(after_in_child=_forget_in_child)
