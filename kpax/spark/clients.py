"""Kafka clients kept by a Spark Python worker from one task to the next.

Role: a Python worker (``spark.python.worker.reuse``, Spark's default) runs many
tasks one after another; creating a client per task costs a thread, a
metadata bootstrap and connections each time (the JVM connector pools its
consumers and producers per executor the same way). :func:`consumer_for`,
:func:`producer_for` and :func:`admin_for` hand out the worker's client for a
configuration. A consumer is unassigned when its task ends (it fetches
nothing while the worker waits); a producer has flushed; a client whose task
failed is closed and forgotten, so the next task starts from a fresh one.
Transactional producers are never kept (one per task, see kpax.spark.txn).

Also :func:`warn_if_pure_python`: once per executor (the first of its Python
workers), a warning when kpax runs without its C extensions (kpax shipped as
a zip with ``--py-files``, or a build without a compiler).

Imports: kpax (Consumer, Producer, Admin) inside the functions, the standard library.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("kpax.spark")

__all__ = ["admin_for", "close_all", "consumer_for", "producer_for", "warn_if_pure_python"]

_lock = threading.Lock()
_consumers: dict[str, list[Any]] = {}
_producers: dict[str, list[Any]] = {}
_admins: dict[str, Any] = {}
_warned = False


def _key(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True, default=str)


def warn_if_pure_python() -> bool:
    """Warn (once per executor) when kpax's C extensions are not in use; True if so."""
    global _warned
    from kpax.producer.fastpath import sendpath
    from kpax.proto.accel import PURE_PYTHON_REQUESTED, speedups

    if (speedups is not None and sendpath is not None) or PURE_PYTHON_REQUESTED:
        return False
    if _warned:
        return True
    _warned = True
    # One warning per executor: the first Python worker forked by this executor's
    # daemon (their common parent) to get here says it.
    flag = os.path.join(tempfile.gettempdir(), f"kpax-spark-pure-python-{os.getppid()}")
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:
        return True
    import kpax

    missing = [n for n, m in (("_speedups", speedups), ("_sendpath", sendpath)) if m is None]
    msg = (
        f"kpax spark: kpax runs without its C extensions ({', '.join(missing)} not "
        f"importable; kpax imported from {os.path.dirname(kpax.__file__)}): reading and "
        f"writing are several times slower. A zip shipped with --py-files cannot load C "
        f"extensions: install kpax on every node or ship a packed virtualenv with "
        f"spark.archives (docs/spark.md, Deployment)"
    )
    log.warning(msg)  # no handler configured: Python's last-resort one, to stderr
    return True


@contextmanager
def consumer_for(cfg: dict[str, Any]) -> Iterator[Any]:
    """The worker's idle consumer for ``cfg`` (or a new one), unassigned after use."""
    import kpax

    key = _key(cfg)
    with _lock:
        pool = _consumers.setdefault(key, [])
        consumer = pool.pop() if pool else None
    if consumer is None:
        consumer = kpax.Consumer(**cfg)
    try:
        yield consumer
        consumer.assign([])
    except BaseException:
        _close_quietly(consumer)
        raise
    with _lock:
        _consumers.setdefault(key, []).append(consumer)


@contextmanager
def producer_for(cfg: dict[str, Any]) -> Iterator[Any]:
    """The worker's idle (at-least-once) producer for ``cfg`` (or a new one); the
    caller flushes before the block ends."""
    import kpax

    key = _key(cfg)
    with _lock:
        pool = _producers.setdefault(key, [])
        producer = pool.pop() if pool else None
    if producer is None:
        producer = kpax.Producer(**cfg)
    try:
        yield producer
    except BaseException:
        _close_quietly(producer)
        raise
    with _lock:
        _producers.setdefault(key, []).append(producer)


def admin_for(cfg: dict[str, Any]) -> Any:
    """The worker's Admin client for ``cfg`` (thread-safe; shared)."""
    import kpax

    key = _key(cfg)
    with _lock:
        admin = _admins.get(key)
        if admin is None:
            admin = _admins[key] = kpax.Admin(**cfg)
    return admin


def _close_quietly(client: Any) -> None:
    try:
        if isinstance(client, _admin_class()):
            client.close()
        else:
            client.close(2.0)
    except Exception as exc:  # closing a client whose task failed: nothing to add
        log.debug("kpax spark: closing a client: %s", exc)


def _admin_class() -> type[Any]:
    from kpax.admin import Admin

    return Admin


@atexit.register
def close_all() -> None:
    """Close every kept client (at the worker's exit; tests call it too)."""
    with _lock:
        clients = [c for pool in (*_consumers.values(), *_producers.values()) for c in pool]
        clients.extend(_admins.values())
        _consumers.clear()
        _producers.clear()
        _admins.clear()
    for c in clients:
        _close_quietly(c)
