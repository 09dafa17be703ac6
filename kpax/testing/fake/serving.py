"""Serving the sans-I/O core on an asyncio loop: what every face of the fake shares.

Role: :class:`Serving` holds a :class:`~kpax.testing.fake.cluster.FakeCluster`,
the broker side (:class:`BrokerSide`, an ``asyncio.Protocol``) of every open
client connection, and the timer that calls ``cluster.tick`` at the core's next
deadline. A face subclasses it and says which loop it runs on and what time it
is: the TCP face (:class:`kpax.testing.FakeKafka`: a background thread, the wall
clock) and the simulation's (:class:`kpax.testing.sim.kafka.SimKafka`: the
test's virtual-time loop, in-memory connections).

After anything that may have made an answer ready (bytes from a client, a
connection gone, a fault or move made from outside, the timer) the face calls
:meth:`Serving.flush`: each connection writes what the core has for it (in
connection order, so a run is deterministic), and the timer is set again.

Imports: kpax.testing.fake.{cluster,connection} and the standard library.
"""

from __future__ import annotations

import asyncio

from kpax.testing.fake.cluster import FakeCluster
from kpax.testing.fake.connection import FakeConnection

__all__ = ["BrokerSide", "Serving"]


class BrokerSide(asyncio.Protocol):
    """The fake broker's end of one client connection."""

    def __init__(self, serving: Serving, node_id: int) -> None:
        self.serving = serving
        self.node_id = node_id
        self.transport: asyncio.Transport | None = None
        self.conn: FakeConnection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        serving = self.serving
        try:
            self.conn = serving.cluster.connect(self.node_id, serving.now_ms())
        except ConnectionRefusedError:
            transport.abort()
            return
        serving.sides[self.conn.conn_id] = self

    def data_received(self, data: bytes) -> None:
        if self.conn is not None:
            self.conn.receive(data, self.serving.now_ms())
            self.serving.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.serving.sides.pop(self.conn.conn_id, None)
            self.conn.close()
            self.serving.flush()

    def send_due(self) -> None:
        """Write what the core has for this connection; close it after if the core did."""
        conn, transport = self.conn, self.transport
        if conn is None or transport is None or transport.is_closing():
            return
        data = conn.data_to_send()
        if data:
            transport.write(data)
        if conn.closed:
            transport.close()


class Serving:
    """See the module docstring. Subclasses give :meth:`now_ms` and :meth:`event_loop`."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        #: The broker side of each open connection, by the core's connection id.
        self.sides: dict[int, BrokerSide] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def now_ms(self) -> int:
        raise NotImplementedError

    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the connections and the timer run on (None: not serving)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Every connection sends what is due; the timer is set for the next deadline."""
        for conn_id in sorted(self.sides):
            side = self.sides.get(conn_id)
            if side is not None:
                side.send_due()
        self._schedule()

    def _schedule(self) -> None:
        loop = self.event_loop()
        if loop is None:
            return
        deadline = self.cluster.next_deadline()
        if deadline is None or (self._timer_at is not None and self._timer_at <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        delay = max(0.0, (deadline - self.now_ms() + 1) / 1000)
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self.cluster.tick(self.now_ms())
        self.flush()

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None
