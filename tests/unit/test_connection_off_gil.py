"""A sync face's connection reading the rest of a large response off the GIL
(``_speedups.recv_rest``, kpax.broker.connection), against a server playing
the broker's side with plain bytes: the response comes out whole however the
server paces it, and a reset in the middle of it fails the request with an
error naming the broker and how far the response got, in bounded time."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from kpax.broker import connection
from kpax.broker.connection import BrokerConnection
from kpax.broker.options import ConnectionOptions
from kpax.loop_thread import LoopThread
from kpax.proto.errors import KafkaConnectionError
from kpax.proto.messages import MetadataRequest
from tests.hostile_server import API_VERSIONS, _api_versions, _frame, read_request

pytestmark = pytest.mark.skipif(
    connection._RECV_REST is None, reason="runs only with the accelerator built"
)

#: A response body larger than the reader's 256 KiB scratch buffer.
BIG = 1 << 20


class _Server:
    """Answers ApiVersions, then meets the first other request with ``reply``
    (bytes) and ``then`` ("reset" or "hold")."""

    def __init__(self, reply: bytes, then: str, pace: int = 0) -> None:
        self.reply, self.then, self.pace = reply, then, pace
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.done = threading.Event()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        try:
            while True:
                got = read_request(conn)
                if got is None:
                    return
                key, version, cid, _request = got
                if key == API_VERSIONS:
                    conn.sendall(_frame(cid, bytes(_api_versions().encode(version)), 0))
                    continue
                reply = struct.pack(">i", cid).join([self.reply[:4], self.reply[8:]])
                step = self.pace or len(reply)
                for i in range(0, len(reply), step):
                    conn.sendall(reply[i : i + step])
                    if self.pace:
                        time.sleep(0.0005)
                if self.then == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                self.done.wait(30)
                return
        finally:
            conn.close()

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.sock.close()
        self.thread.join(10)


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    t = LoopThread("test-off-gil")
    yield t
    t.stop()


def _request(loop_thread: LoopThread, port: int, calls: list[tuple[int, int]]) -> object:
    async def go() -> object:
        conn = await BrokerConnection.open("127.0.0.1", port, ConnectionOptions())
        try:
            return await conn.request(MetadataRequest(topics=None), version=1, timeout=20)
        finally:
            conn.close()

    return loop_thread.run(go(), timeout=30)


@pytest.fixture
def calls(monkeypatch) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    real = connection._RECV_REST
    assert real is not None

    def counted(fd: int, buf: bytearray, pos: int, end: int, budget: int, idle: int):
        got, err = real(fd, buf, pos, end, budget, idle)
        seen.append((got, err))
        return got, err

    monkeypatch.setattr(connection, "_RECV_REST", counted)
    return seen


def test_a_reset_in_the_middle_of_a_large_response_names_the_broker(loop_thread, calls) -> None:
    cut = _frame(0, bytes(BIG), 0)[: 600 * 1024]  # the size says 1 MiB; 600 KiB come
    with _Server(cut, "reset") as server:
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError) as info:
            _request(loop_thread, server.port, calls)
    assert time.monotonic() - start < 15
    message = str(info.value)
    assert f"127.0.0.1:{server.port}" in message
    assert "of 1048580 bytes of a response" in message  # how far it got
    assert "reset" in message.lower()  # found by the direct read or by the transport
    assert calls  # the direct read ran


def test_a_paced_large_response_is_read_whole(loop_thread, calls, monkeypatch) -> None:
    """Bytes trickling in (a slow link) are read off the GIL while they keep coming;
    the rest comes through the transport after a quiet spell: the frame comes out
    whole, every byte in place."""
    seen: list[int] = []
    deliver = BrokerConnection._deliver

    def keep(self, entry, frame) -> None:  # the large frame, before decoding
        if len(frame) < BIG:
            deliver(self, entry, frame)  # ApiVersions
            return
        seen.append(len(frame))
        entry.future.set_result(bytes(frame[4:]) == body)

    monkeypatch.setattr(BrokerConnection, "_deliver", keep)
    body = bytes(range(256)) * (BIG // 256)
    with _Server(_frame(0, body, 0), "hold", pace=64 * 1024) as server:
        assert _request(loop_thread, server.port, calls) is True
    assert seen == [4 + BIG]
    assert sum(n for n, _err in calls) > 0
