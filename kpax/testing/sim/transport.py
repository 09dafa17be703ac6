"""In-memory byte streams between asyncio protocols, for the virtual-time loop.

Role: :class:`MemoryNetwork` is the simulation's network: listeners by
``host:port``, and for each connection a pair of :class:`MemoryTransport`
ends whose writes reach the other end's protocol by loop callbacks -- in
order, whole or in pieces, after the link's delay -- like a TCP stream on
loopback. Faults a test can cause: a delay per listener
(:meth:`MemoryNetwork.set_delay`), cutting every connection of a listener
(:meth:`MemoryNetwork.cut`: both ends see a reset, bytes in transit are
lost) and refusing new ones (:meth:`MemoryNetwork.unlisten`).

Either end's protocol may be an ``asyncio.Protocol`` (``data_received``) or
an ``asyncio.BufferedProtocol`` (``get_buffer``/``buffer_updated``, as
kpax's broker connection is).

Imports: kpax.testing.sim.process and the standard library.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable
from typing import Any

from kpax.testing.sim.process import PROCESS

__all__ = ["Acceptor", "MemoryNetwork", "MemoryTransport"]


#: ``acceptor()`` -> the server side's protocol for a new connection.
Acceptor = Callable[[], asyncio.BaseProtocol]


class MemoryTransport(asyncio.Transport):
    """One end of an in-memory connection. Bytes written are delivered to the
    peer's protocol in order; ``close`` delivers what is in transit first."""

    def __init__(  # noqa: PLR0917 - both ends are built in one place
        self,
        loop: asyncio.AbstractEventLoop,
        protocol: asyncio.BaseProtocol,
        address: tuple[str, int],
        peer_address: tuple[str, int],
        delay: Callable[[], float],
        context: contextvars.Context,
    ) -> None:
        super().__init__()
        self._loop = loop
        #: Whose callbacks this end's protocol runs in (a simulated process's, or
        #: none for the broker's side): a killed process must not take the
        #: broker's timers with it.
        self._context = context
        self._protocol = protocol
        self._address = address
        self._peer_address = peer_address
        self._delay = delay
        self.peer: MemoryTransport | None = None
        #: Bytes on their way to the peer: (when they arrive, the bytes).
        self._transit: collections.deque[tuple[float, bytes]] = collections.deque()
        self._delivering: asyncio.TimerHandle | asyncio.Handle | None = None
        self._closing = False
        self._lost = False
        self._reading = True
        #: Bytes that reached this end while reading was paused.
        self._held: collections.deque[bytes] = collections.deque()
        self.bytes_written = 0

    # ------------------------------------------------------------ asyncio.Transport

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer_address
        if name == "sockname":
            return self._address
        return default

    def is_closing(self) -> bool:
        return self._closing

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol

    def is_reading(self) -> bool:
        return self._reading and not self._closing

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        if self._reading:
            return
        self._reading = True
        while self._held and self._reading and not self._lost:
            self._feed(self._held.popleft())

    def get_write_buffer_size(self) -> int:
        return sum(len(b) for _, b in self._transit)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (0, 0)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        self.bytes_written += len(data)
        at = self._loop.time() + self._delay()
        if self._transit and self._transit[-1][0] > at:
            at = self._transit[-1][0]  # a stream: never ahead of earlier bytes
        self._transit.append((at, bytes(data)))
        self._schedule()

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def close(self) -> None:
        """Close after the bytes in transit reach the peer (an orderly FIN)."""
        if self._closing:
            return
        self._closing = True
        if not self._transit:
            self._finish(None)
        # else: _deliver_head finishes once the transit queue is empty

    def abort(self) -> None:
        """Cut at once: bytes in transit are lost, the peer sees a reset."""
        self.reset(ConnectionResetError("connection aborted"))

    # ------------------------------------------------------------ delivery

    def _schedule(self) -> None:
        if self._delivering is not None or not self._transit:
            return
        at = self._transit[0][0]
        delay = at - self._loop.time()
        if delay > 0:
            self._delivering = self._loop.call_at(
                at, self._deliver_head, context=self._peer_context()
            )
        else:
            self._delivering = self._loop.call_soon(
                self._deliver_head, context=self._peer_context()
            )

    def _peer_context(self) -> contextvars.Context:
        peer = self.peer
        return peer._context if peer is not None else self._context

    def _deliver_head(self) -> None:
        self._delivering = None
        now = self._loop.time()
        while self._transit and self._transit[0][0] <= now:
            _, data = self._transit.popleft()
            peer = self.peer
            if peer is not None and not peer._lost:
                peer._receive(data)
        if self._transit:
            self._schedule()
        elif self._closing and not self._lost:
            self._finish(None)

    def _receive(self, data: bytes) -> None:
        if not self._reading:
            self._held.append(data)
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        proto = self._protocol
        if isinstance(proto, asyncio.BufferedProtocol):
            view = memoryview(data)
            while view and not self._lost:
                buf = memoryview(proto.get_buffer(len(view))).cast("B")
                n = min(len(buf), len(view))
                if n == 0:
                    raise RuntimeError("get_buffer() returned an empty buffer")
                buf[:n] = view[:n]
                view = view[n:]
                proto.buffer_updated(n)
        elif isinstance(proto, asyncio.Protocol):
            proto.data_received(data)
        else:  # pragma: no cover - datagram protocols are not streams
            raise TypeError(f"cannot feed bytes to {proto!r}")

    def _finish(self, exc: Exception | None) -> None:
        """This end is done: its protocol hears ``connection_lost``; the peer
        hears of the close (an EOF, or ``exc`` for a reset)."""
        if self._lost:
            return
        self._lost = True
        self._closing = True
        self._transit.clear()
        if self._delivering is not None:
            self._delivering.cancel()
            self._delivering = None
        self._loop.call_soon(self._protocol.connection_lost, exc, context=self._context)
        peer = self.peer
        if peer is not None and not peer._lost:
            if exc is None:
                self._loop.call_soon(peer._peer_closed, context=peer._context)
            else:
                reset = ConnectionResetError("connection reset by peer")
                self._loop.call_soon(peer._finish, reset, context=peer._context)

    def _peer_closed(self) -> None:
        """The peer closed in order: an EOF here, then this end closes too."""
        if self._lost:
            return
        proto = self._protocol
        keep_open = False
        if isinstance(proto, asyncio.Protocol | asyncio.BufferedProtocol):
            keep_open = bool(proto.eof_received())
        if not keep_open:
            self._closing = True
            if not self._transit:
                self._finish(None)

    def reset(self, exc: Exception) -> None:
        """Both ends fail with ``exc`` (a fault), what is in transit is lost."""
        peer = self.peer
        self._finish(exc)
        if peer is not None:
            peer._finish(exc)


class MemoryNetwork:
    """Listeners and connections of one simulation (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._listeners: dict[tuple[str, int], Acceptor] = {}
        self._delays: dict[tuple[str, int], Callable[[], float]] = {}
        self._connections: dict[tuple[str, int], list[MemoryTransport]] = {}
        #: process name -> the client ends it opened (kpax.testing.sim.loop.PROCESS)
        self._by_process: dict[str, list[MemoryTransport]] = {}
        self._next_port = 40000
        #: Connections made so far (a test may count reconnects).
        self.connects = 0

    def listen(self, host: str, port: int, acceptor: Acceptor) -> None:
        self._listeners[(host, port)] = acceptor

    def unlisten(self, host: str, port: int) -> None:
        """Refuse new connections to ``host:port`` (those open stay open)."""
        self._listeners.pop((host, port), None)

    def set_delay(self, host: str, port: int, delay: float | Callable[[], float]) -> None:
        """Bytes to and from ``host:port`` take ``delay`` seconds (a number, or a
        function called per write: a seeded random delay)."""
        self._delays[(host, port)] = delay if callable(delay) else (lambda: float(delay))

    def cut(self, host: str, port: int) -> int:
        """Reset every open connection of ``host:port``; returns how many."""
        conns = self._connections.pop((host, port), [])
        live = [c for c in conns if not c._lost]
        for c in live:
            c.reset(ConnectionResetError(f"connection to {host}:{port} cut"))
        return len(live)

    def cut_process(self, name: str) -> int:
        """Reset every connection process ``name`` opened; returns how many."""
        live = [c for c in self._by_process.pop(name, []) if not c._lost]
        for c in live:
            c.reset(ConnectionResetError(f"process {name} killed"))
        return len(live)

    def close_all(self) -> None:
        for key in list(self._connections):
            self.cut(*key)

    async def connect(
        self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: str, port: int
    ) -> tuple[MemoryTransport, asyncio.BaseProtocol]:
        key = (host, port)
        acceptor = self._listeners.get(key)
        if acceptor is None:
            raise ConnectionRefusedError(111, f"Connect call failed ('{host}', {port})")
        self.connects += 1
        delay = self._delays.get(key)

        def link_delay() -> float:
            return delay() if delay is not None else 0.0

        self._next_port += 1
        local = ("127.0.0.1", self._next_port)
        client_ctx = contextvars.copy_context()  # the connecting process's
        server_ctx = contextvars.copy_context()
        server_ctx.run(PROCESS.set, None)  # the broker belongs to no process
        client_proto = protocol_factory()
        server_proto = server_ctx.run(acceptor)
        client = MemoryTransport(self._loop, client_proto, local, key, link_delay, client_ctx)
        server = MemoryTransport(self._loop, server_proto, key, local, link_delay, server_ctx)
        client.peer, server.peer = server, client
        self._connections.setdefault(key, []).append(server)
        proc = PROCESS.get()
        if proc is not None:
            self._by_process.setdefault(proc, []).append(client)
        server_ctx.run(server_proto.connection_made, server)
        client_proto.connection_made(client)
        await asyncio.sleep(0)  # as a real connect returns on a later loop turn
        return client, client_proto
