"""A broker handle: one lazily opened connection, reopened with backoff when it breaks.

Role: what the cluster layer holds per broker. ``await broker.request(req)``
opens the connection if needed (concurrent callers share one attempt), waits
out the exponential backoff with jitter after failed attempts, and closes the
connection when it has been idle for ``connections_max_idle_ms``. Errors from
a broken connection are retriable :class:`KafkaConnectionError`; the next
request reconnects by itself.

Imports: kpax.broker.connection, kpax.broker.backoff, kpax.broker.options,
kpax.proto.errors, the standard library.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kpax.broker.backoff import Backoff
from kpax.broker.connection import BrokerConnection, describe_broker
from kpax.broker.options import ConnectionOptions
from kpax.proto.errors import ClientClosedError, KafkaConnectionError


class Broker:
    """One broker: node id, address, and the single connection kpax keeps to it."""

    def __init__(
        self, host: str, port: int, options: ConnectionOptions, *, node_id: int | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        #: The id of the cluster this node belongs to, as the metadata says (the
        #: cluster sets it): sent with the node id in ApiVersions v5+ (KIP-1242).
        self.cluster_id: str | None = None
        self.options = options
        self._conn: BrokerConnection | None = None
        self._connecting: asyncio.Future[BrokerConnection] | None = None
        self._backoff = Backoff(options.reconnect_backoff_ms, options.reconnect_backoff_max_ms)
        self._retry_at = 0.0
        self._closed = False
        self._idle_timer: asyncio.TimerHandle | None = None
        #: How many connections this handle has opened (for tests and metrics).
        self.connects = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        return describe_broker(self.node_id, self.address)

    def __repr__(self) -> str:
        return f"<Broker {self.node_id} {self.address}>"

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    @property
    def open_connection(self) -> BrokerConnection | None:
        """The connection when it is open now, else None (no waiting, no connecting)."""
        conn = self._conn
        if self._closed or conn is None or conn.closed:
            return None
        return conn

    async def connection(self) -> BrokerConnection:
        """The open connection, opening it (once, shared by concurrent callers) if needed."""
        if self._closed:
            raise ClientClosedError(f"{self.describe()}: client is closed")
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
            # A failed attempt must not leave an unretrieved exception behind.
            self._connecting.add_done_callback(_consume)
        try:
            return await asyncio.shield(self._connecting)
        finally:
            if self._connecting is not None and self._connecting.done():
                self._connecting = None

    async def _connect(self) -> BrokerConnection:
        delay = self._retry_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            conn = await BrokerConnection.open(
                self.host, self.port, self.options, node_id=self.node_id, cluster_id=self.cluster_id
            )
        except BaseException:
            self._retry_at = time.monotonic() + self._backoff.next_delay()
            raise
        if self._closed:
            conn.close()
            raise ClientClosedError(f"{self.describe()}: client is closed")
        self._backoff.reset()
        self._retry_at = 0.0
        self._conn = conn
        self.connects += 1
        self._schedule_idle_check()
        return conn

    def _schedule_idle_check(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        idle = self.options.connections_max_idle_ms / 1000
        self._idle_timer = asyncio.get_running_loop().call_later(idle, self._idle_check)

    def _idle_check(self) -> None:
        self._idle_timer = None
        conn = self._conn
        if conn is None or conn.closed:
            return
        idle_for = time.monotonic() - conn.last_activity
        limit = self.options.connections_max_idle_ms / 1000
        if conn.in_flight == 0 and idle_for >= limit:
            conn.close(KafkaConnectionError(f"idle connection to {self.describe()} closed"))
            return
        self._idle_timer = asyncio.get_running_loop().call_later(
            max(limit - idle_for, 0.05), self._idle_check
        )

    async def request(self, request: Any, **kwargs: Any) -> Any:
        """Send ``request`` on this broker's connection (see
        :meth:`BrokerConnection.request` for the keyword arguments)."""
        conn = await self.connection()
        return await conn.request(request, **kwargs)

    async def api_version(self, request_cls: Any, max_version: int | None = None) -> int:
        """The version :meth:`request` would use for ``request_cls``."""
        conn = await self.connection()
        return conn.pick_version(request_cls, max_version)

    async def feature_level(self, name: str) -> int:
        """The cluster's finalized level of feature ``name`` (e.g.
        ``"transaction.version"``) as this broker reported it in ApiVersions; 0
        when it reports none (an older broker, or the feature is off)."""
        conn = await self.connection()
        return conn.finalized_features.get(name, 0)

    def mark_failed(self) -> None:
        """Drop the connection (e.g. after a NOT_LEADER storm or a protocol error elsewhere)."""
        if self._conn is not None:
            self._conn.close()

    async def close(self) -> None:
        self._closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        connecting = self._connecting
        if connecting is not None and not connecting.done():
            connecting.cancel()
        if self._conn is not None:
            self._conn.close(KafkaConnectionError(f"connection to {self.describe()} closed"))
            await self._conn.wait_closed()


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
