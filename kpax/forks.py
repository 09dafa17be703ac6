"""Clients do not survive ``fork()``: in the child, every public call raises at once.

Role: a shared utility (not a layer). A client's I/O thread does not exist in
a child of ``fork()`` (``os.fork``, multiprocessing's fork start method) and
its connections are the parent's sockets, so a client used there would hand
out futures that never complete and hang in ``flush()`` and ``close()``.
Every client (the blocking faces and their asyncio cores) registers itself
with :func:`track`; an ``os.register_at_fork(after_in_child=...)`` hook then
replaces, in the child only, each public method of each registered client
with one raising :class:`~kpax.proto.errors.ForkedClientError` saying to
create clients after fork, and calls the client's ``_after_fork()`` if it
has one (to drop what must not be touched: the I/O loop, the C send path).
Nothing is checked per call: the parent pays nothing, the child raises at
the first call. A client created in the child works as usual.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import inspect
import os
import types
import weakref
from collections.abc import Callable
from typing import Any

from kpax.proto.errors import ForkedClientError

__all__ = ["forked_error", "track"]

#: Every live client (weakly: a client collected leaves by itself).
_clients: weakref.WeakSet[Any] = weakref.WeakSet()
#: The process the clients were made in (set before each fork, read in the child).
_parent_pid = os.getpid()


def track(client: Any) -> None:
    """Make ``client`` unusable in a child of ``fork()`` (see the module docstring)."""
    _clients.add(client)


def forked_error(client: Any, what: str) -> ForkedClientError:
    """The error of ``what`` (a call's name) on a client inherited through fork()."""
    kind = getattr(type(client), "_client_name", None) or type(client).__name__
    return ForkedClientError(
        f"{what} on a {kind} created in process {_parent_pid}, before a fork(): this is "
        f"process {os.getpid()}, a child, where the client's I/O thread and connections "
        "do not exist (they stay in the parent). Create clients after fork, in the "
        "process that uses them (e.g. in the multiprocessing worker)"
    )


def _public_methods(cls: type) -> list[str]:
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name, None)
        if isinstance(attr, (types.FunctionType, types.BuiltinFunctionType)):
            names.append(name)
    return names


def _refusing(client: Any, name: str) -> Callable[..., Any]:
    ref = weakref.ref(client)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise forked_error(ref(), f"{name}()")

    refuse.__name__ = name
    return refuse


def _poison(client: Any) -> None:
    client.__dict__["_forked"] = True
    after = getattr(client, "_after_fork", None)
    if after is not None:
        after()
    for name in _public_methods(type(client)):
        client.__dict__[name] = _refusing(client, name)
    for name, value in list(client.__dict__.items()):
        # methods an instance holds itself (the C send path's ``send``)
        if not name.startswith("_") and isinstance(value, types.BuiltinMethodType):
            client.__dict__[name] = _refusing(client, name)


def _before_fork() -> None:
    global _parent_pid
    _parent_pid = os.getpid()


def _after_fork_in_child() -> None:
    clients = list(_clients)
    _clients.clear()
    for client in clients:
        try:
            _poison(client)
        except Exception:  # (a hook must not break the child)
            pass


if hasattr(os, "register_at_fork"):  # (not on Windows: no fork)
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
