"""FakeKafka: the in-process Kafka served over TCP on 127.0.0.1.

Role: the TCP face of :class:`~kpax.testing.fake.cluster.FakeCluster`. Each fake
broker listens on 127.0.0.1 on an ephemeral port; an asyncio loop on a
background thread owned by the :class:`FakeKafka` feeds the sockets' bytes to
the connections of the core, writes their answers back and calls
``cluster.tick`` when the core's next deadline comes. The clock is the wall
clock (epoch milliseconds; record timestamps and ``offsets_for_times`` compare
with it). Any client that speaks the Kafka protocol over PLAINTEXT can connect:
kpax's sync and asyncio clients, confluent-kafka, kafka-python, aiokafka.

Every method that reads or changes the cluster runs on the loop thread
(:meth:`FakeKafka.call`), so tests may call them from any thread, or from a
coroutine (they block for the short time the loop takes). Starting takes a few
milliseconds; there is no JVM.

Imports: kpax.testing.fake.{cluster,connection,faults,state}, kpax.proto.records
and the standard library.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kpax.proto.records import decode_batches
from kpax.testing.fake.cluster import FakeCluster
from kpax.testing.fake.connection import FakeConnection
from kpax.testing.fake.faults import Fault

__all__ = ["FakeKafka"]

T = TypeVar("T")


class _Protocol(asyncio.Protocol):
    def __init__(self, fake: FakeKafka, node_id: int) -> None:
        self.fake = fake
        self.node_id = node_id
        self.transport: asyncio.Transport | None = None
        self.conn: FakeConnection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        try:
            self.conn = self.fake.cluster.connect(self.node_id, self.fake.now_ms())
        except ConnectionRefusedError:
            transport.abort()
            return
        self.fake._protocols[self.conn.conn_id] = self

    def data_received(self, data: bytes) -> None:
        if self.conn is not None:
            self.conn.receive(data, self.fake.now_ms())
            self.fake._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.fake._protocols.pop(self.conn.conn_id, None)
            self.conn.close()
            self.fake._flush()

    def flush(self) -> None:
        conn, transport = self.conn, self.transport
        if conn is None or transport is None:
            return
        data = conn.data_to_send()
        if data and not transport.is_closing():
            transport.write(data)
        if conn.closed and not transport.is_closing():
            transport.close()


class FakeKafka:
    """An in-process Kafka for tests (see the module docstring and docs/testing.md).

    ``brokers``: how many (node ids 1..n) or which node ids; ``topics``: topics to
    create at start, name -> partition count; ``config``: broker configs (e.g.
    ``{"auto.create.topics.enable": "false"}``); ``seed``: the core's random seed.
    """

    def __init__(
        self,
        brokers: int | Iterable[int] = 1,
        *,
        topics: Mapping[str, int] | None = None,
        config: Mapping[str, Any] | None = None,
        racks: Mapping[int, str] | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self._t0 = time.time() - time.monotonic()
        self.cluster = FakeCluster(
            brokers,
            seed=seed,
            config={
                k: str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in (config or {}).items()
            },
            racks=dict(racks or {}),
            now_ms=self.now_ms(),
        )
        self.host = host
        self._topics = dict(topics or {})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[int, asyncio.Server] = {}
        self._protocols: dict[int, _Protocol] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    # ------------------------------------------------------------ life

    def now_ms(self) -> int:
        return int((self._t0 + time.monotonic()) * 1000)

    def start(self) -> FakeKafka:
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="kpax-fake-kafka", daemon=True)
        self._thread.start()
        ready.wait()
        try:
            for node_id in sorted(self.cluster.state.brokers):
                self._run(self._serve(node_id))
            for name, partitions in self._topics.items():
                self.create_topic(name, partitions)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            for server in self._servers.values():
                server.close()
            for proto in list(self._protocols.values()):
                if proto.transport is not None:
                    proto.transport.abort()
            self._servers.clear()

        if loop.is_running():
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> FakeKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FakeKafka({self.bootstrap or 'stopped'})"

    @property
    def bootstrap(self) -> str:
        """The brokers' addresses, ``host:port,host:port``."""
        return ",".join(self.addresses.values())

    @property
    def addresses(self) -> dict[int, str]:
        """Node id -> "host:port" of each broker (stopped ones too)."""
        return {
            n: f"{b.host}:{b.port}" for n, b in sorted(self.cluster.state.brokers.items()) if b.port
        }

    def _run(self, coro: Any) -> Any:
        """Run a coroutine on the loop thread from another thread and wait for it."""
        assert self._loop is not None and threading.current_thread() is not self._thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    async def _serve(self, node_id: int) -> None:
        """Listen for broker ``node_id`` (on its old port after a restart)."""
        loop = asyncio.get_running_loop()
        broker = self.cluster.state.brokers[node_id]
        broker.host = self.host
        server = await loop.create_server(
            lambda: _Protocol(self, node_id), self.host, broker.port, reuse_address=True
        )
        self._servers[node_id] = server
        broker.port = server.sockets[0].getsockname()[1]

    async def _unserve(self, node_id: int) -> None:
        server = self._servers.pop(node_id, None)
        if server is not None:
            server.close()

    # ------------------------------------------------------------ the loop thread

    def call(self, fn: Callable[[FakeCluster], T]) -> T:
        """Run ``fn(cluster)`` on the loop thread and return its result; the
        connections then send what is due."""
        loop = self._loop
        if loop is None:
            return fn(self.cluster)
        if threading.current_thread() is self._thread:
            out = fn(self.cluster)
            self._flush()
            return out
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(self.cluster))
            except BaseException as exc:
                future.set_exception(exc)
            self._flush()

        loop.call_soon_threadsafe(run)
        return future.result(30)

    def _flush(self) -> None:
        for proto in list(self._protocols.values()):
            proto.flush()
        self._schedule()

    def _schedule(self) -> None:
        loop = self._loop
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
        self._flush()

    # ------------------------------------------------------------ setup and faults

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> str:
        """Create a topic now (replication factor: min(3, brokers) by default);
        returns its name. ValueError if it cannot be created."""
        self.call(
            lambda c: c.create_topic(name, partitions, replication_factor, dict(config or {}))
        )
        return name

    def inject(
        self,
        api: str | None = None,
        *,
        error: str | int | None = None,
        delay_ms: int = 0,
        drop: str | None = None,
        nth: int = 1,
        times: int | None = 1,
        broker: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        probability: float = 1.0,
    ) -> Fault:
        """Inject a fault (see :mod:`kpax.testing.fake.faults`): e.g.
        ``fake.inject("Produce", error="NOT_LEADER_OR_FOLLOWER", nth=3, broker=2)``.
        The returned :class:`Fault` counts ``seen`` and ``hits``; ``remove()`` ends it."""
        return self.call(
            lambda c: c.inject(
                api,
                error=error,
                delay_ms=delay_ms,
                drop=drop,
                nth=nth,
                times=times,
                broker=broker,
                topic=topic,
                partition=partition,
                probability=probability,
            )
        )

    def clear_faults(self) -> None:
        self.call(lambda c: c.faults.clear())

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        """Make broker ``to`` the partition's leader (the leader epoch goes up)."""
        self.call(lambda c: c.move_leader(topic, partition, to))

    def set_offline(self, topic: str, partition: int) -> None:
        """The partition loses its leader (-1) until :meth:`set_online`."""
        self.call(lambda c: c.set_offline(topic, partition))

    def set_online(self, topic: str, partition: int, leader: int | None = None) -> None:
        self.call(lambda c: c.set_online(topic, partition, leader))

    def move_coordinator(
        self, *, to: int, group: str | None = None, transactional_id: str | None = None
    ) -> None:
        """Make broker ``to`` coordinate a group or a transactional id."""
        self.call(
            lambda c: c.move_coordinator(to=to, group=group, transactional_id=transactional_id)
        )

    def coordinator(self, *, group: str | None = None, transactional_id: str | None = None) -> int:
        """The node id coordinating a group or a transactional id."""
        key_type, key = (0, group) if group is not None else (1, transactional_id)
        assert key is not None, "name a group or a transactional_id"
        return self.call(lambda c: c.state.coordinator(key_type, key))

    def leader(self, topic: str, partition: int) -> int:
        return self.call(lambda c: c.partition(topic, partition).leader)

    def stop_broker(self, node_id: int) -> None:
        """Stop a broker: its connections close and new ones are refused until
        :meth:`start_broker`; its partitions move to another live replica (or go
        offline), its groups and transactions to another coordinator."""
        self._run(self._unserve(node_id))
        self.call(lambda c: c.stop_broker(node_id))

    def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again, on the same port."""
        self.call(lambda c: c.start_broker(node_id))
        self._run(self._serve(node_id))

    def drop_connections(self, broker: int | None = None) -> int:
        """Close every client connection (to one broker); returns how many."""
        return self.call(lambda c: c.close_connections(broker, "dropped by the test"))

    # ------------------------------------------------------------ inspection

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count."""
        return self.call(lambda c: {n: len(t.partitions) for n, t in c.state.topics.items()})

    def high_watermark(self, topic: str, partition: int = 0) -> int:
        return self.call(lambda c: c.partition(topic, partition).log.high_watermark)

    def records(
        self, topic: str, partition: int = 0
    ) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every record in the partition's log, control
        records (transaction markers) left out; aborted records included."""

        def read(c: FakeCluster) -> list[bytes]:
            return [b.data for b in c.partition(topic, partition).log.batches if not b.control]

        out: list[tuple[int, bytes | None, bytes | None]] = []
        for data in self.call(read):
            for batch in decode_batches(data):
                out.extend((o, k, v) for o, _t, k, v, _h in batch.tuples())
        return out

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> committed offset of a group."""
        return self.call(lambda c: {tp: o.offset for tp, o in c.offsets.get(group).items()})
