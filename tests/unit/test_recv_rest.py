"""``_speedups.recv_rest``: a large response frame's rest read from the socket
with the GIL released (the sync face's connections, kpax.broker.connection).
It reads while bytes keep coming, never past the frame, gives the socket back
after a quiet spell or its time budget, and leaves an end of stream in the
socket for the transport's next read; an error, which the kernel reports only
once, it returns."""

from __future__ import annotations

import errno
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from kpax.proto.accel import speedups

recv_rest = getattr(speedups, "recv_rest", None)
pytestmark = pytest.mark.skipif(recv_rest is None, reason="runs only with the accelerator built")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)  # as an event loop's transport leaves it
    yield a, b
    a.close()
    b.close()


def test_it_reads_while_bytes_keep_coming_and_never_past_the_frame(pair) -> None:
    reader, writer = pair
    frame = bytes(range(256)) * 4096  # 1 MiB
    after = b"the next frame"

    def write() -> None:
        for i in range(0, len(frame), 64 * 1024):
            writer.sendall(frame[i : i + 64 * 1024])
            time.sleep(0.0002)  # well under the quiet spell that ends the read
        writer.sendall(after)

    t = threading.Thread(target=write)
    t.start()
    buf = bytearray(len(frame) + 10)
    buf[:10] = b"0123456789"  # what arrived before: kept
    got = 0
    deadline = time.monotonic() + 10
    while got < len(frame):  # a busy machine may pause the writer past a quiet spell
        assert time.monotonic() < deadline
        n, err = recv_rest(reader.fileno(), buf, 10 + got, len(buf), 5_000_000, 200_000)
        assert err == 0
        got += n
    t.join()
    assert got == len(frame)
    assert buf == b"0123456789" + frame
    reader.setblocking(True)
    assert reader.recv(100) == after  # the next frame's bytes stay in the socket


def test_nothing_arriving_gives_the_socket_back_after_the_quiet_spell(pair) -> None:
    reader, _writer = pair
    buf = bytearray(100)
    start = time.monotonic()
    assert recv_rest(reader.fileno(), buf, 0, 100, 10_000_000, 20_000) == (0, 0)
    assert time.monotonic() - start < 5  # 20 ms asked; bounded on a busy machine


def test_a_steady_trickle_is_cut_at_the_time_budget(pair) -> None:
    reader, writer = pair
    stop = threading.Event()

    def trickle() -> None:
        while not stop.is_set():
            try:
                writer.send(b"x")
            except OSError:
                return
            time.sleep(0.001)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        buf = bytearray(1 << 20)
        start = time.monotonic()
        got, err = recv_rest(reader.fileno(), buf, 0, len(buf), 50_000, 500_000)
        took = time.monotonic() - start
    finally:
        stop.set()
        t.join()
    assert 0 < got < len(buf) and err == 0
    assert took < 5  # 50 ms asked, though a byte came every millisecond
    assert buf[:got] == b"x" * got


def test_the_end_of_the_stream_is_left_for_the_transport(pair) -> None:
    reader, writer = pair
    writer.sendall(b"partial")
    writer.close()
    buf = bytearray(100)
    assert recv_rest(reader.fileno(), buf, 0, 100, 1_000_000, 1_000_000) == (7, 0)
    assert buf[:7] == b"partial"
    assert reader.recv(10) == b""  # the transport's next read sees the end


def test_a_reset_is_returned_once_and_the_socket_then_reads_as_ended() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    server.close()  # a reset: the client's next read fails with ECONNRESET, once
    client.setblocking(False)
    try:
        got, err = recv_rest(client.fileno(), bytearray(100), 0, 100, 1_000_000, 1_000_000)
        assert (got, err) == (0, errno.ECONNRESET)
        assert client.recv(10) == b""  # reported once: the socket now reads as ended
    finally:
        client.close()


@pytest.mark.parametrize(
    ("pos", "end", "budget", "idle"),
    [(-1, 10, 0, 0), (5, 4, 0, 0), (0, 11, 0, 0), (0, 10, -1, 0), (0, 10, 0, -1)],
)
def test_bad_arguments_are_refused(pair, pos: int, end: int, budget: int, idle: int) -> None:
    reader, _writer = pair
    with pytest.raises(ValueError, match="recv_rest"):
        recv_rest(reader.fileno(), bytearray(10), pos, end, budget, idle)
    with pytest.raises(TypeError):
        recv_rest(reader.fileno(), b"read-only", 0, 1, 0, 0)
