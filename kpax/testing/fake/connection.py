"""FakeConnection: one client connection to a fake broker, at the byte-stream level.

Role: the seam between the sans-I/O core and any transport. A transport (the
TCP face in :mod:`kpax.testing.fake.server`, or an in-memory one driven by a
test's own event loop) calls :meth:`FakeConnection.receive` with the bytes the
client wrote, :meth:`FakeConnection.data_to_send` for the bytes to deliver back,
and looks at :attr:`FakeConnection.closed` (then closes its side, after sending
what ``data_to_send`` returned). :meth:`FakeConnection.close` is the client
going away.

Like a Kafka broker, a connection handles one request at a time: the next
request is read only when the previous one is answered (a long-poll Fetch or an
injected delay holds back the requests behind it). ``acks=0`` Produce requests
get no answer. Time comes in with ``receive(data, now_ms)`` and with the
cluster's ``tick(now_ms)``, which pumps every connection.

Imports: kpax.testing.fake.{context,frames} and the standard library.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from kpax.testing.fake.context import Answer
from kpax.testing.fake.frames import BadFrame, FrameBuffer, with_size

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["FakeConnection"]


class FakeConnection:
    """See the module docstring."""

    def __init__(self, cluster: FakeCluster, node_id: int, conn_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.conn_id = conn_id
        self._in = FrameBuffer()
        self._frames: deque[bytes] = deque()
        self._head: Answer | None = None
        self._out: list[bytes] = []
        #: Why the fake closed the connection (None while open or closed by the client).
        self.close_reason: str | None = None
        self.closed = False
        #: Requests handled (answered or not) on this connection.
        self.handled = 0

    def __repr__(self) -> str:
        state = f"closed: {self.close_reason}" if self.closed else "open"
        return f"FakeConnection(broker {self.node_id}, #{self.conn_id}, {state})"

    def receive(self, data: bytes | bytearray | memoryview, now_ms: int) -> None:
        """Bytes the client wrote; whole requests are handled at once when nothing
        is pending ahead of them."""
        if self.closed:
            return
        self._in.feed(data)
        try:
            while (frame := self._in.next_frame()) is not None:
                self._frames.append(frame)
        except BadFrame as exc:
            self.close(f"bad request: {exc}")
            return
        self.pump(now_ms)
        self.cluster.pump_ready()

    def pump(self, now_ms: int) -> None:
        """Send what is due and handle the requests waiting behind it."""
        while not self.closed:
            head = self._head
            if head is not None:
                if not head.ready(now_ms):
                    return
                self._head = None
                if head.close:
                    self.close(f"{head.api}: connection dropped by the fake")
                    return
                if head.frame is not None:
                    self._out.append(with_size(head.frame))
                continue
            if not self._frames:
                return
            frame = self._frames.popleft()
            self.handled += 1
            self._head = self.cluster.handle(self.node_id, self.conn_id, frame, now_ms)

    def next_ready(self) -> int | None:
        """When the answer this connection waits on may go (an injected delay), or None."""
        head = self._head
        if head is not None and head.resolved and not self.closed:
            return head.ready_at
        return None

    def data_to_send(self) -> bytes:
        """The response bytes to deliver to the client (empty when there are none)."""
        if not self._out:
            return b""
        out = b"".join(self._out)
        self._out.clear()
        return out

    def close(self, reason: str | None = None) -> None:
        """Close the connection: by the client (no reason) or by the fake."""
        if self.closed:
            return
        self.closed = True
        if reason is not None:
            self.close_reason = reason
        self._frames.clear()
        self._head = None
        self.cluster.disconnected(self.conn_id)
