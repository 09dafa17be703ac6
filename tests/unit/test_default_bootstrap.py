"""A client built without a bootstrap address targets ``localhost:9092``, the
documented default (it was split into characters: "l: not host:port; ...").

The resolved configuration of every client (both faces) holds
``["localhost:9092"]``, and starting one connects there: a listening socket
on 127.0.0.1:9092 sees the connection (or, when that port is taken on this
machine, the client's error names localhost:9092)."""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kpax
from kpax.config import resolve
from kpax.errors import ConfigError, KafkaError

FAST = {
    "socket_connection_setup_timeout_ms": 2000,
    "request_timeout_ms": 2000,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 10,
}


def test_resolve_normalises_the_default_bootstrap() -> None:
    from kpax.broker.options import COMMON_OPTIONS

    assert resolve("producer", COMMON_OPTIONS, {})["bootstrap_servers"] == ["localhost:9092"]
    given = resolve("producer", COMMON_OPTIONS, {"bootstrap_servers": "a:1,b:2"})
    assert given["bootstrap_servers"] == ["a:1", "b:2"]


CORES: dict[str, Callable[[], Any]] = {
    "aio.Producer": kpax.aio.Producer,
    "aio.Consumer": kpax.aio.Consumer,
    "aio.Admin": kpax.aio.Admin,
    "aio.ShareConsumer": lambda: kpax.aio.ShareConsumer(group_id="g"),
}


@pytest.mark.parametrize("make", list(CORES.values()), ids=list(CORES))
def test_every_core_resolves_localhost_9092(make: Callable[[], Any]) -> None:
    client = make()
    assert client.config["bootstrap_servers"] == ["localhost:9092"]
    assert client.cluster.bootstrap == ["localhost:9092"]


class _Listener:
    """A socket on 127.0.0.1:9092 that accepts connections and closes them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # (close alone does not end accept())
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def port_9092() -> Iterator[_Listener | None]:
    """A listener on 127.0.0.1:9092, or None when the port is taken here."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", 9092))
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise
        yield None
        return
    sock.listen(16)
    sock.settimeout(None)
    listener = _Listener(sock)
    try:
        yield listener
    finally:
        listener.close()


SYNC: dict[str, Callable[[], Any]] = {
    "Producer": lambda: kpax.Producer(max_block_ms=2000, **FAST),
    "Consumer": lambda: kpax.Consumer(group_id="g", **FAST),
    "Consumer(topic)": lambda: kpax.Consumer("t", group_id="g", **FAST),
    "Admin": lambda: kpax.Admin(default_api_timeout_ms=2000, **FAST),
    "ShareConsumer": lambda: kpax.ShareConsumer(group_id="g", **FAST),
}


def _started(make: Callable[[], Any]) -> None:
    try:
        client = make()
    except KafkaError as exc:
        assert "not host:port" not in str(exc)
        assert "localhost:9092" in str(exc), exc
        return
    client.close(0)  # a real broker on this machine's 9092 answered


@pytest.mark.parametrize("make", list(SYNC.values()), ids=list(SYNC))
def test_every_sync_client_connects_to_localhost_9092(
    make: Callable[[], Any], port_9092: _Listener | None
) -> None:
    _started(make)
    if port_9092 is not None:
        assert port_9092.accepted >= 1


ASYNC: dict[str, Callable[[], Any]] = {
    "aio.Producer": lambda: kpax.aio.Producer(max_block_ms=2000, **FAST),
    "aio.Consumer": lambda: kpax.aio.Consumer(group_id="g", **FAST),
    "aio.Admin": lambda: kpax.aio.Admin(default_api_timeout_ms=2000, **FAST),
    "aio.ShareConsumer": lambda: kpax.aio.ShareConsumer(group_id="g", **FAST),
}


@pytest.mark.parametrize("make", list(ASYNC.values()), ids=list(ASYNC))
def test_every_asyncio_client_connects_to_localhost_9092(
    make: Callable[[], Any], port_9092: _Listener | None
) -> None:
    async def main() -> None:
        client = make()
        try:
            await client.start()
        except KafkaError as exc:
            assert "not host:port" not in str(exc)
            assert "localhost:9092" in str(exc), exc
        finally:
            await client.close()

    asyncio.run(main())
    if port_9092 is not None:
        assert port_9092.accepted >= 1


def test_bad_constructor_arguments_fail_before_any_thread_starts() -> None:
    # kafka-python's KafkaConsumer("topic") habit: the first argument is a topic
    # (it holds no ':'); a topic without a group is read whole (no group), so
    # only a bad argument fails, and it leaves no I/O thread behind.
    from kpax.errors import InvalidTopicError

    before = {t.name for t in threading.enumerate()}
    with pytest.raises(InvalidTopicError):
        kpax.Consumer("bad topic name!")
    with pytest.raises(ConfigError, match="consumer_timeout_ms"):
        kpax.Consumer("t", consumer_timeout_ms="soon")
    with pytest.raises(ConfigError, match="fetch_min_bytes"):
        kpax.Consumer("t", fetch_min_bytes=0)
    assert {t.name for t in threading.enumerate()} == before
