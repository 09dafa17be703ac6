"""What ``kpax.aio.Producer.send`` and ``send_many`` return: the call's outcome, to await.

Role: the asyncio face buffers at the call, as the sync face does -- every
path (the C send path, the Python path, ``KPAX_PURE_PYTHON=1``), every kind of
record -- so ``send`` is a plain function and what it returns is only awaited
for the record's :class:`~kpax.producer.batch.RecordFuture` (``send_many``:
the :class:`~kpax.producer.batch.BulkFuture`). A send that cannot be buffered
at the call (a topic not yet in the metadata, buffer memory full) goes on in
a task of its own, started at the call; awaiting it waits for that task, and
cancelling the await cancels it (the record is then not sent, as a coroutine
cancelled before it ran). :class:`Sent` is the finished case (the C path's own
is ``_sendpath.Sent``: same behaviour, same warning), :class:`Deferred` the
task's. Both are coroutines to asyncio (``create_task``, ``gather``,
``asyncio.iscoroutine``) and to type checkers (mypy's ``unused-coroutine``
catches a forgotten ``await``).

One that is dropped without being awaited warns (RuntimeWarning, pointing at
the line that dropped it): the record is sent all the same, but nothing sees
its outcome. Sends made in a delivery callback, which cannot await, do not warn.

Imports: the standard library only.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["Deferred", "ManyDeferred", "ManySent", "Sent", "never_awaited"]


def never_awaited(what: str, topic: object) -> str:
    """The text of the warning for a send never awaited (``what``: ``send`` or
    ``send_many``); the C path's is the same."""
    if what == "send":
        return (
            f"kpax.aio.Producer.send() for topic {topic!r} was never awaited: the record "
            "is sent all the same, but nothing will see its outcome (await send() for its "
            "RecordFuture)"
        )
    return (
        f"kpax.aio.Producer.send_many() for topic {topic!r} was never awaited: the records "
        "are sent all the same, but nothing will see their outcome (await send_many() for "
        "its BulkFuture)"
    )


def _exception(typ: Any, val: Any, tb: Any) -> BaseException:
    """``throw``'s arguments (an instance, or a class and a value) as an instance."""
    if isinstance(typ, BaseException):
        exc = typ
    elif isinstance(val, BaseException):
        exc = val
    elif isinstance(typ, type) and issubclass(typ, BaseException):
        exc = typ() if val is None else typ(val)
    else:
        return TypeError("exceptions must be classes or instances deriving from BaseException")
    return exc.with_traceback(tb) if tb is not None else exc


def _reused() -> RuntimeError:
    return RuntimeError("cannot reuse already awaited coroutine")


class Sent(Coroutine[Any, Any, Any]):
    """A send done at the call: awaiting it returns ``result`` (the record's
    future), after one pass of the event loop when ``pause`` (a send that
    opened a new batch: the sender gets to send the batch just closed while the
    caller fills the next one, as ``asyncio.sleep(0)`` would). ``loud``: warn if
    dropped never awaited. (``await`` runs the generator of ``__await__``: no
    StopIteration made; ``send``/``throw`` drive one for asyncio's tasks.)"""

    __slots__ = ("_it", "_loud", "_pause", "_result", "_topic")

    #: What was called (the warning's text): ``send``, or ``send_many`` (ManySent).
    _what = "send"

    def __init__(self, result: Any, pause: bool, loud: bool, topic: object) -> None:
        self._result = result
        self._pause = pause
        self._loud = loud
        self._topic = topic
        # (_it, the generator driven by send/throw, is set when first needed)

    def __await__(self) -> Generator[Any, None, Any]:
        result = self._result
        if result is None:
            raise _reused()
        self._result = None  # (awaited: no warning, whatever happens next)
        if self._pause:
            self._pause = False
            yield  # a bare yield: the task runs again at the loop's next pass
        return result

    def send(self, value: Any) -> Any:
        it = self._driven()
        if it is None:
            it = self._it = self.__await__()
        elif inspect.getgeneratorstate(it) == inspect.GEN_CLOSED:  # (ran to its end)
            raise _reused()
        return it.send(value)

    def _driven(self) -> Generator[Any, None, Any] | None:
        """The generator ``send`` drives, once it has started."""
        try:
            return self._it
        except AttributeError:
            return None

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        # the send is done: the exception comes straight back
        self._result = None
        raise _exception(typ, val, tb)

    def close(self) -> None:
        self._result = None
        it = self._driven()
        if it is not None:
            it.close()

    def __del__(self) -> None:
        if self._result is not None and self._loud:
            # stacklevel 2: the line that dropped it
            warnings.warn(never_awaited(self._what, self._topic), RuntimeWarning, stacklevel=2)


class ManySent(Sent):
    """:class:`Sent` of a ``send_many`` (its result: the BulkFuture)."""

    __slots__ = ()
    _what = "send_many"


class Deferred(Sent):
    """A send that could not be done at the call, going on in ``task`` (started
    at the call): awaiting it waits for the task and returns its result;
    cancelling the await cancels the task."""

    __slots__ = ()

    def __init__(self, task: asyncio.Task[Any], loud: bool, topic: object) -> None:
        super().__init__(task, False, loud, topic)

    def __await__(self) -> Generator[Any, None, Any]:
        task = self._result
        if task is None:
            raise _reused()
        self._result = None  # (awaited: no warning, whatever happens next)
        try:
            return (yield from task.__await__())
        except asyncio.CancelledError:
            task.cancel()  # (the await was cancelled: so is the send, if not done yet)
            raise

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = _exception(typ, val, tb)
        it = self._driven()
        if it is None:
            task = self._result
            self._result = None
            if task is not None and isinstance(exc, asyncio.CancelledError):
                task.cancel()  # cancelled before it was awaited: so is the send
            raise exc
        return it.throw(exc)


class ManyDeferred(Deferred):
    """:class:`Deferred` of a ``send_many``."""

    __slots__ = ()
    _what = "send_many"
