"""FakeCluster: the sans-I/O core of the in-process Kafka.

Role: the whole cluster's state and its request handling, with no socket, no
thread and no clock. Time is an input (``now_ms``; it never goes back) and every
random choice (topic ids, member ids, fetch session ids, replica placement,
fault probabilities) comes from one ``random.Random(seed)``: the same calls
with the same inputs give the same bytes.

- :meth:`FakeCluster.connect` opens a :class:`~kpax.testing.fake.connection.FakeConnection`
  to a broker: the frame-level byte stream a transport (the TCP face, or an
  in-memory one) feeds and drains.
- :meth:`FakeCluster.handle` ``(node_id, conn_id, frame, now_ms) -> Answer``: one
  request frame (size prefix excluded) in; the answer is a response frame now,
  or pending (a long-poll Fetch, a JoinGroup waiting for the others), or a
  closed connection.
- :meth:`FakeCluster.tick` ``(now_ms)``: time passes: long polls reach their
  ``max_wait_ms``, group members their session and rebalance timeouts,
  transactions their timeout, injected delays their end.
  :meth:`FakeCluster.next_deadline` says when the next of these is due.

Faults (:mod:`kpax.testing.fake.faults`) and the cluster's moves (leaders,
coordinators, brokers stopped and started) are methods here too; the TCP face
:class:`kpax.testing.FakeKafka` calls them on its loop thread.

Imports: kpax.testing.fake.* (codes, context, faults, frames, state, connection and
the handler modules), kpax.proto (messages) and the standard library.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kpax.proto.messages import REQUESTS, ApiVersionsRequest
from kpax.testing.fake import (
    admin,
    codes,
    commits,
    consumer_groups,
    fetch,
    group_api,
    metadata,
    partition_offsets,
    produce,
    share_fetch,
    share_groups,
    txn_api,
)
from kpax.testing.fake.commits import CommittedOffsets
from kpax.testing.fake.connection import FakeConnection
from kpax.testing.fake.consumer_groups import ConsumerGroups
from kpax.testing.fake.context import DEFERRED, Answer, Ctx, Waiter
from kpax.testing.fake.faults import Fault, Faults, touched
from kpax.testing.fake.fetch import FetchSessions
from kpax.testing.fake.frames import (
    BadFrame,
    RequestHeader,
    decode_request,
    encode_response,
    peek_header,
)
from kpax.testing.fake.groups import ClassicGroups
from kpax.testing.fake.share_fetch import SharePartitions
from kpax.testing.fake.share_groups import ShareGroups
from kpax.testing.fake.state import GROUP_DEFAULTS, BrokerInfo, ClusterState, Partition, Topic
from kpax.testing.fake.txn import Transactions

__all__ = ["Api", "FakeCluster"]

log = logging.getLogger("kpax.testing.fake")

Handler = Callable[[Ctx, Any], Any]


@dataclass(frozen=True)
class Api:
    """One API the fake serves: its handler and the versions it advertises.
    ``per_item``: the handler puts an injected error on the matched items
    (partitions, topics, groups) itself."""

    key: int
    handler: Handler
    min_version: int
    max_version: int
    per_item: bool = False


def _table() -> dict[int, Api]:
    out: dict[int, Api] = {}
    for module in (
        metadata,
        produce,
        fetch,
        partition_offsets,
        admin,
        commits,
        group_api,
        consumer_groups,
        txn_api,
        share_groups,
        share_fetch,
    ):
        for key, (fn, lo, hi, per_item) in module.HANDLERS.items():
            cls = REQUESTS[key]
            out[key] = Api(key, fn, max(lo, cls.MIN_VERSION), min(hi, cls.MAX_VERSION), per_item)
    return out


APIS: dict[int, Api] = _table()


class FakeCluster:
    """See the module docstring. ``brokers``: a count (node ids 1..n) or node ids;
    ``racks``: node id -> rack; ``config``: broker configs over
    :data:`~kpax.testing.fake.state.BROKER_DEFAULTS`."""

    def __init__(
        self,
        brokers: int | Iterable[int] = 1,
        *,
        seed: int = 0,
        config: dict[str, str] | None = None,
        racks: dict[int, str] | None = None,
        cluster_id: str | None = None,
        now_ms: int = 0,
    ) -> None:
        ids = list(range(1, brokers + 1)) if isinstance(brokers, int) else list(brokers)
        racks = racks or {}
        self.rng = random.Random(seed)
        self.now_ms = now_ms
        self.state = ClusterState(
            [BrokerInfo(n, rack=racks.get(n)) for n in ids],
            self.rng,
            {k: str(v) for k, v in (config or {}).items()},
            cluster_id,
        )
        #: The broker configs given at construction (DescribeConfigs: STATIC_BROKER_CONFIG).
        self.static_config = dict(self.state.config)
        self.faults = Faults(self.rng)
        self.offsets = CommittedOffsets()
        self.groups = ClassicGroups(self)
        self.consumer_groups = ConsumerGroups(self)
        self.txns = Transactions(self)
        self.share_groups = ShareGroups(self)
        self.share_partitions = SharePartitions(self)
        #: group id -> group configs set (IncrementalAlterConfigs on a GROUP resource)
        self.group_configs: dict[str, dict[str, str]] = {}
        self.fetch_sessions = FetchSessions(self)
        self.waiters: list[Waiter] = []
        #: Handler failures (bugs of the fake): the fixture fails a test that saw one.
        self.errors: list[str] = []
        #: api key -> (min, max) version advertised in ApiVersions.
        self.api_ranges = {k: (a.min_version, a.max_version) for k, a in APIS.items()}
        self.connections: dict[int, FakeConnection] = {}
        #: connections with an answer that became ready outside their own pump
        self._ready: set[int] = set()
        self._pumping = False
        self._next_conn = 1
        self._next_producer_id = 1000

    # ------------------------------------------------------------ connections

    def connect(self, node_id: int, now_ms: int | None = None) -> FakeConnection:
        """A new connection to broker ``node_id``; ConnectionRefusedError while it is stopped."""
        if now_ms is not None:
            self._advance(now_ms)
        if not self.state.is_alive(node_id):
            raise ConnectionRefusedError(f"fake broker {node_id} is stopped")
        conn = FakeConnection(self, node_id, self._next_conn)
        self.connections[conn.conn_id] = conn
        self._next_conn += 1
        return conn

    def mark_ready(self, conn_id: int) -> None:
        """A pending answer of this connection is ready (see :meth:`pump_ready`)."""
        self._ready.add(conn_id)

    def pump_ready(self) -> None:
        """Let the connections whose pending answers became ready send them and go
        on with the requests behind them (in connection order: deterministic)."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self._ready:
                conn_id = min(self._ready)
                self._ready.discard(conn_id)
                conn = self.connections.get(conn_id)
                if conn is not None:
                    conn.pump(self.now_ms)
        finally:
            self._pumping = False

    def disconnected(self, conn_id: int) -> None:
        """A connection closed (by either side): forget what waits on it."""
        self.connections.pop(conn_id, None)
        self.waiters = [w for w in self.waiters if w.conn_id != conn_id]

    def close_connections(self, node_id: int | None = None, reason: str = "") -> int:
        """Close every connection (of broker ``node_id``); returns how many."""
        closing = [c for c in self.connections.values() if node_id in (None, c.node_id)]
        for conn in closing:
            conn.close(reason or "closed by the fake")
        return len(closing)

    # ------------------------------------------------------------ requests

    def handle(self, node_id: int, conn_id: int, frame: bytes, now_ms: int) -> Answer:
        """Answer one request frame (size prefix excluded); see the module docstring."""
        self._advance(now_ms)
        now_ms = self.now_ms
        try:
            header = peek_header(frame)
        except BadFrame:
            return _closed("?")
        api = APIS.get(header.api_key)
        answer = Answer(header.api_name)
        if api is None:
            answer.set_close()  # Kafka closes a connection that sends an unknown api key
            return answer
        if header.api_key == ApiVersionsRequest.API_KEY and header.version > api.max_version:
            answer.set(metadata.unsupported_api_versions(header, self.api_ranges))
            return answer
        if not api.min_version <= header.version <= api.max_version:
            answer.set_close()
            return answer
        try:
            header, request = decode_request(frame)
        except BadFrame:
            answer.set_close()
            return answer
        fault = self.faults.match(
            header.api_name, node_id, lambda: touched(request, self._topic_name)
        )
        if fault is not None and fault.drop == "before":
            answer.set_close()
            return answer
        ctx = Ctx(self, node_id, conn_id, header, header.version, now_ms, fault, None, answer)
        if fault is not None and fault.error is not None and not api.per_item:
            response = _top_level_error(header, fault.error)
        else:
            if fault is not None and not api.per_item:
                ctx.fault = None
            try:
                response = api.handler(ctx, request)
            except Exception as exc:  # a bug of the fake: kept for the test, connection closed
                self.errors.append(f"{header.api_name} v{header.version}: {exc!r}")
                log.exception(
                    "fake broker %d: %s v%d failed", node_id, header.api_name, header.version
                )
                answer.set_close()
                return answer
        if response is DEFERRED:
            assert ctx.deferred is not None
            if fault is not None and fault.drop == "after":
                ctx.deferred.close_after = True
        elif fault is not None and fault.drop == "after":
            answer.set_close()
        elif response is None:
            answer.set(None)
        else:
            ctx.deferred = None
            answer.set(encode_response(header, response, header.version))
        if fault is not None and fault.delay_ms:
            answer.ready_at = now_ms + fault.delay_ms
        self._run_waiters()
        return answer

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self.state.by_id.get(topic_id)
        return t.name if t is not None else None

    # ------------------------------------------------------------ time

    def _advance(self, now_ms: int) -> None:
        self.now_ms = max(self.now_ms, now_ms)

    def tick(self, now_ms: int) -> None:
        """Time passes (see the module docstring); connections then send what is due."""
        self._advance(now_ms)
        self.groups.tick(self.now_ms)
        self.consumer_groups.tick(self.now_ms)
        self.txns.tick(self.now_ms)
        self.share_groups.tick(self.now_ms)
        self.share_partitions.tick(self.now_ms)
        self._run_waiters()
        for conn in list(self.connections.values()):
            conn.pump(self.now_ms)
        self.pump_ready()

    def next_deadline(self) -> int | None:
        """When :meth:`tick` has something to do next (ms), or None."""
        times = [w.deadline_ms for w in self.waiters]
        for t in (
            self.groups.next_deadline(),
            self.consumer_groups.next_deadline(),
            self.txns.next_deadline(),
            self.share_groups.next_deadline(),
            self.share_partitions.next_deadline(),
        ):
            if t is not None:
                times.append(t)
        for conn in self.connections.values():
            t = conn.next_ready()
            if t is not None:
                times.append(t)
        return min(times) if times else None

    def add_waiter(self, waiter: Waiter) -> None:
        self.waiters.append(waiter)

    def _run_waiters(self) -> None:
        if not self.waiters:
            return
        keep: list[Waiter] = []
        for w in self.waiters:
            if w.deferred.done:
                continue
            response = w.poll(self.now_ms, self.now_ms >= w.deadline_ms)
            if response is None:
                keep.append(w)
            else:
                w.deferred.resolve(response)
        self.waiters = keep

    def changed(self) -> None:
        """State changed outside a request (a fault, a move): re-check what waits."""
        self._run_waiters()
        self.pump_ready()

    def group_config(self, group_id: str, name: str) -> str:
        """A group config: set for the group, else its default (the broker's
        ``group.<name>`` where :data:`GROUP_DEFAULTS` has none)."""
        value = self.group_configs.get(group_id, {}).get(name)
        if value is not None:
            return value
        default = GROUP_DEFAULTS[name]
        return default if default is not None else self.state.conf(f"group.{name}")

    # ------------------------------------------------------------ ids

    def new_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    def new_member_id(self, client_id: str) -> str:
        return f"{client_id or 'member'}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    # ------------------------------------------------------------ topics (test setup)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: dict[str, str] | None = None,
    ) -> Topic:
        """Create a topic now (ValueError if it cannot be made); replication factor
        defaults to min(3, live brokers)."""
        rf = replication_factor
        if rf is None:
            rf = min(3, len(self.state.alive()))
        try:
            return self.state.create_topic(name, partitions, rf, dict(config or {}))
        except codes.ApiError as exc:
            raise ValueError(str(exc)) from None

    def partition(self, topic: str, index: int) -> Partition:
        p = self.state.partition(topic, index)
        if p is None:
            raise ValueError(f"no partition {topic}-{index}")
        return p

    # ------------------------------------------------------------ faults and moves

    def inject(self, api: str | None = None, **how: Any) -> Fault:
        """Add a fault (see :class:`~kpax.testing.fake.faults.Faults.add`)."""
        return self.faults.add(api, **how)

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        self.state.move_leader(topic, partition, to)
        self.changed()

    def set_offline(self, topic: str, partition: int) -> None:
        self.state.set_offline(topic, partition)
        self.changed()

    def set_online(self, topic: str, partition: int, leader: int | None = None) -> None:
        self.state.set_online(topic, partition, leader)
        self.changed()

    def move_coordinator(
        self, *, to: int, group: str | None = None, transactional_id: str | None = None
    ) -> None:
        """Make broker ``to`` the coordinator of a group or a transactional id; the
        old one answers NOT_COORDINATOR from now on (its pending joins too)."""
        if (group is None) == (transactional_id is None):
            raise ValueError("name one group or one transactional_id")
        if group is not None:
            self.state.move_coordinator(0, group, to)
            self.groups.coordinator_moved(group)
        else:
            assert transactional_id is not None
            self.state.move_coordinator(1, transactional_id, to)
        self.changed()

    def stop_broker(self, node_id: int) -> None:
        """Stop a broker: its connections close, new ones are refused; its
        partitions get another live replica as leader (or go offline)."""
        self.state.stop_broker(node_id)
        self.fetch_sessions.forget_broker(node_id)
        self.close_connections(node_id, f"fake broker {node_id} stopped")
        self.changed()

    def start_broker(self, node_id: int) -> None:
        self.state.start_broker(node_id)
        self.changed()


def _closed(api: str) -> Answer:
    answer = Answer(api)
    answer.set_close()
    return answer


def _top_level_error(header: RequestHeader, code: int) -> Any:
    response = REQUESTS[header.api_key].RESPONSE()
    if hasattr(response, "error_code"):
        response.error_code = code
    return response
