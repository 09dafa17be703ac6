"""The optional C send path, loaded once: ``sendpath`` is the module or None.

Role: kpax.producer._sendpath (built from _sendpath.c when kpax is installed
with a C compiler at hand) runs the producer's per-record path -- argument
checks, partition choice, append to the open batch, the record's future -- in
C for the common record, and hands every other case to the pure-Python path,
which stays the reference. ``KPAX_PURE_PYTHON=1`` (read once, at import, by
kpax.proto.accel) turns it off along with the record loops.

Imports: kpax.proto.accel, the standard library; kpax.producer._sendpath when present.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kpax.proto.accel import PURE_PYTHON_REQUESTED

__all__ = [
    "BatchBase",
    "FutureBase",
    "QueueBase",
    "enter_callbacks",
    "in_callbacks",
    "leave_callbacks",
    "new_lock",
    "sendpath",
]

sendpath: ModuleType | None = None
if not PURE_PYTHON_REQUESTED:
    try:
        from kpax.producer import _sendpath as sendpath
    except ImportError:  # built without a compiler: the pure-Python path
        sendpath = None

if sendpath is not None:
    # The asyncio face's send returns a finished _sendpath.Sent for the common
    # record: a coroutine to asyncio (create_task, gather, iscoroutine).
    Coroutine.register(sendpath.Sent)

#: The accumulator's lock: the C one when the C path is there (C takes it
#: without calling Python), else threading.Lock.
new_lock: Callable[[], Any] = sendpath.Lock if sendpath is not None else threading.Lock


class _CallbackDepth(threading.local):
    depth = 0


_callbacks = _CallbackDepth()


def _py_enter_callbacks() -> None:
    _callbacks.depth += 1


def _py_leave_callbacks() -> None:
    if _callbacks.depth > 0:
        _callbacks.depth -= 1


# Whether this thread is running delivery callbacks now (kpax.producer.batch
# brackets a batch's callbacks with enter/leave): a send made in one is not warned
# about when never awaited (a callback cannot await it), and one that would wait
# for buffer memory fails at once (it would block delivery). A per-thread count
# in C when the C path is built (its asyncio send reads it), else in Python.
# (in_callbacks returns something true or false: the C function a bool, the
# Python one the depth, read without a Python frame: the send path calls it.)
enter_callbacks: Callable[[], None]
leave_callbacks: Callable[[], None]
in_callbacks: Callable[[], object]
if sendpath is not None:
    enter_callbacks = sendpath.enter_callbacks
    leave_callbacks = sendpath.leave_callbacks
    in_callbacks = sendpath.in_callbacks
else:
    enter_callbacks = _py_enter_callbacks
    leave_callbacks = _py_leave_callbacks
    in_callbacks = partial(getattr, _callbacks, "depth")


class _PyBatchBase:
    """The columns of a producer batch (pure Python; C: _sendpath.BatchBase)."""

    __slots__ = ("cap", "headers", "keys", "size", "timestamps", "values")

    values: list[bytes | None]
    keys: list[bytes | None]
    timestamps: list[int]
    headers: list[Any] | None
    size: int
    cap: int


class _PyQueueBase:
    """The open batch of a partition queue (pure Python; C: _sendpath.QueueBase)."""

    __slots__ = ("open",)

    open: Any


class _PyFutureBase:
    """A record's place (pure Python; C: _sendpath.FutureBase)."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: Any, index: int, timestamp: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp


# Base classes of ProducerBatch, PartitionQueue and RecordFuture: C structs when
# the C path is built (it reads and writes their fields directly).
if TYPE_CHECKING or sendpath is None:
    BatchBase = _PyBatchBase
    QueueBase = _PyQueueBase
    FutureBase = _PyFutureBase
else:
    BatchBase = sendpath.BatchBase
    QueueBase = sendpath.QueueBase
    FutureBase = sendpath.FutureBase
