"""Who leads what: bootstrap, the metadata cache, leaders and coordinators.

Role: the kpax ``cluster`` layer. One :class:`Cluster` per client holds one
:class:`~kpax.broker.Broker` (so one connection) per broker node, shared by
everything in that client. Its lookups are single attempts --
``lookup_topic(name)``, ``lookup_leader(topic, partition)``,
``coordinator(key, type)`` -- whose retries and deadline are the request
path's (:mod:`kpax.cluster.request_path`; ``topic``, ``leader`` and
``partitions`` with a timeout are thin callers of it). It refreshes the metadata
on demand (unknown topic, missing leader), after ``leader_is_down`` /
``coordinator_is_down`` invalidations, and on a schedule
(``metadata_max_age_ms``). Concurrent refreshes are coalesced into one
request.

Topics of interest: a refresh asks for the topics the client named so far
(``refresh(topics)``, ``topic(name)``), until it :meth:`Cluster.forget` them (the
producer does, for a topic idle for ``metadata_max_idle_ms``; ``before_refresh``
is its hook). A name Kafka would refuse (:mod:`kpax.proto.topic_names`) never
reaches a request: ``topic(name)`` raises InvalidTopicError at once, and a
refresh that finds one among its topics drops it, records the error for it
(``snapshot.topic_errors``) and asks for the others -- one bad name cannot
break the metadata of every topic. Each listener (:meth:`Cluster.add_listener`)
is called after every metadata update, periodic or on demand.

Connections: one per broker for everything but long-poll fetches, which get
a second one per broker (:meth:`Cluster.fetch_broker`). A Kafka broker reads
one request per connection at a time (it mutes the connection until the
response is sent), so a request pipelined behind a Fetch that waits up to
``fetch_max_wait_ms`` for data would wait as long: commits, heartbeats,
join/sync, offset and metadata requests must never queue behind one. (The
Java consumer keeps its coordinator on a separate connection for the same
reason; franz-go separates produce, fetch and group traffic.)

Bootstrap tries every address; when none answers, one
:class:`NoBrokersAvailableError` lists each address and why (DNS, refused,
timeout, TLS, auth).

Rebootstrap (KIP-899, KIP-1102; ``metadata_recovery_strategy="rebootstrap"``,
the default as in the Java client since 4.0): when a refresh finds every broker
of the metadata unreachable, or a broker answers REBOOTSTRAP_REQUIRED, the
bootstrap addresses are tried again as at start, and the metadata they give
replaces what the client knew. A different cluster id (the cluster was replaced
behind the same addresses) drops the old metadata whole -- topic ids, leaders,
coordinators -- instead of merging into it. ``"none"`` keeps to the brokers of
the metadata.

Imports: kpax.broker, kpax.cluster.metadata, kpax.cluster.request_path, kpax.event_loops,
kpax.metrics, kpax.proto, kpax.tasks, kpax.user_callbacks, the standard library.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kpax.broker.broker import Broker
from kpax.broker.options import ConnectionOptions, connection_options
from kpax.cluster.metadata import (
    GROUP,
    TRANSACTION,
    ClusterSnapshot,
    PartitionInfo,
    TopicInfo,
    snapshot_from_response,
)
from kpax.cluster.request_path import RequestPath
from kpax.event_loops import check_loop
from kpax.metrics import ConnectionMetrics
from kpax.proto.error_codes import (
    InvalidTopicError,
    LeaderNotAvailableError,
    RebootstrapRequiredError,
    UnknownTopicOrPartitionError,
)
from kpax.proto.error_families import code_in, code_of
from kpax.proto.errors import (
    AuthenticationError,
    BrokerIdentityError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    NoBrokersAvailableError,
    error_for_code,
)
from kpax.proto.messages import FindCoordinatorRequest, MetadataRequest
from kpax.proto.topic_names import check_topic, topic_problem
from kpax.tasks import cancel_and_wait
from kpax.user_callbacks import call_user

log = logging.getLogger("kpax.cluster")

__all__ = ["GROUP", "TRANSACTION", "Cluster", "split_address"]


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    host = host.strip("[]")  # [::1]:9092
    return host, int(port)


class Cluster:
    """The metadata cache and the broker connections of one client."""

    def __init__(
        self,
        bootstrap_servers: Iterable[str],
        options: ConnectionOptions,
        *,
        metadata_max_age_ms: int = 300000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        allow_auto_topic_creation: bool = True,
        metadata_recovery_strategy: str = "rebootstrap",
    ) -> None:
        self.bootstrap = [a.strip() for a in bootstrap_servers if a.strip()]
        #: Go back to the bootstrap addresses when every known broker fails.
        self.rebootstrap = metadata_recovery_strategy == "rebootstrap"
        self.options = options
        self.metadata_max_age = metadata_max_age_ms / 1000
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.snapshot = ClusterSnapshot()
        self._brokers: dict[int, Broker] = {}
        self._bootstrap_brokers: list[Broker] = []
        self._interest: set[str] = set()
        #: topic -> when a caller last named it (``refresh(topics)``, ``topic()``).
        self._asked_at: dict[str, float] = {}
        self._want_all = False
        #: Ask every refresh (the periodic one too) for every topic: a consumer's
        #: pattern subscription matches against all topic names (and a request
        #: naming a deleted topic could re-create it under auto-creation).
        self.all_topics = False
        self._requested_gen = 0
        self._completed_gen = 0
        self._refresh_task: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._coordinator_brokers: dict[int, Broker] = {}
        self._fetch_brokers: dict[int, Broker] = {}
        self._closed = False
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        #: The event loop the cluster was started on (None before).
        self.loop: asyncio.AbstractEventLoop | None = None
        #: The client's name in errors (the client sets it).
        self.client_name = "kpax.aio client"
        #: Why this cluster must never be used again (set in a child of fork():
        #: its connections are the parent's); raised by every call.
        self.unusable: KafkaError | None = None
        self._background: set[asyncio.Future[None]] = set()
        #: Called after every metadata update (:meth:`add_listener`).
        self._listeners: list[Callable[[], None]] = []
        #: Why metadata cannot be had now (no broker reachable, authentication
        #: failed), None while it can: set by each refresh's outcome, logged once
        #: per change (``kpax.cluster``: a warning when lost, info when recovered).
        self.health: KafkaError | None = None
        #: Called with the error when :attr:`health` goes from fine to failing
        #: (the clients' ``error_callback``), on the event loop.
        self.on_unhealthy: Callable[[KafkaError], None] | None = None
        #: Called at the start of each refresh, before the topics to ask for are
        #: chosen (the producer forgets its idle topics there).
        self.before_refresh: Callable[[], None] | None = None
        #: Names a refresh dropped from the topics of interest: not valid topic names.
        self._rejected: dict[str, str] = {}

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        connection_metrics: ConnectionMetrics | None = None,
        *,
        allow_auto_topic_creation: bool | None = None,
    ) -> Cluster:
        """The cluster of a client from its resolved (validated) configuration:
        ``bootstrap_servers``, the connection options
        (:func:`~kpax.broker.options.connection_options`, counting into
        ``connection_metrics``), ``metadata_max_age_ms``, ``retry_backoff_ms``,
        ``retry_backoff_max_ms``. Topics are auto-created when
        ``allow_auto_topic_creation`` says so (None: as the config's
        ``allow_auto_create_topics``, True when it has none)."""
        if allow_auto_topic_creation is None:
            allow_auto_topic_creation = bool(config.get("allow_auto_create_topics", True))
        return cls(
            config["bootstrap_servers"],
            connection_options(config, connection_metrics),
            metadata_max_age_ms=config["metadata_max_age_ms"],
            retry_backoff_ms=config["retry_backoff_ms"],
            retry_backoff_max_ms=config["retry_backoff_max_ms"],
            allow_auto_topic_creation=allow_auto_topic_creation,
            metadata_recovery_strategy=config.get("metadata_recovery_strategy", "rebootstrap"),
        )

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Bootstrap: fetch the first metadata from any bootstrap address. Once
        started, the cluster belongs to that event loop (:attr:`loop`): a call
        from another loop is an IllegalStateError (kpax.event_loops)."""
        self._check_usable()
        if self._started:
            check_loop(self.loop, "a call", self.client_name)
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            await self.refresh()
            self.loop = asyncio.get_running_loop()
            self._started = True
            self._periodic = asyncio.ensure_future(self._refresh_periodically())

    async def close(self) -> None:
        self._check_usable()
        check_loop(self.loop, "close()", self.client_name)
        self._closed = True
        await cancel_and_wait([t for t in (self._periodic, self._refresh_task) if t is not None])
        brokers = {id(b): b for b in self._all_brokers()}
        await asyncio.gather(*(b.close() for b in brokers.values()), return_exceptions=True)

    def _all_brokers(self) -> list[Broker]:
        return [
            *self._brokers.values(),
            *self._bootstrap_brokers,
            *self._coordinator_brokers.values(),
            *self._fetch_brokers.values(),
        ]

    def handles(self) -> list[Broker]:
        """Every broker handle this client holds (for diagnostics and tests)."""
        return self._all_brokers()

    def _check_open(self) -> None:
        self._check_usable()
        if self._closed:
            raise ClientClosedError("the client is closed")

    def _check_usable(self) -> None:
        if self.unusable is not None:
            raise type(self.unusable)(self.unusable.message)

    # ------------------------------------------------------------ brokers

    def broker(self, node_id: int) -> Broker:
        """The handle of broker ``node_id`` (known from metadata)."""
        return self._handle(self._brokers, node_id)

    def fetch_broker(self, node_id: int) -> Broker:
        """A second handle to broker ``node_id``, with a connection of its own,
        for long-poll Fetch requests only (see the module docstring)."""
        return self._handle(self._fetch_brokers, node_id)

    def _handle(self, handles: dict[int, Broker], node_id: int) -> Broker:
        self._check_open()
        b = handles.get(node_id)
        if b is None:
            info = self.snapshot.brokers.get(node_id)
            if info is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
            b = handles[node_id] = self._node_handle(info.host, info.port, node_id)
        return b

    def _node_handle(self, host: str, port: int, node_id: int) -> Broker:
        """A handle to node ``node_id``, which names the cluster it expects (KIP-1242)."""
        b = Broker(host, port, self.options, node_id=node_id)
        b.cluster_id = self.snapshot.cluster_id
        return b

    @property
    def brokers(self) -> dict[int, Broker]:
        """Handles of every broker in the metadata (created lazily, connected lazily)."""
        return {n: self.broker(n) for n in self.snapshot.brokers}

    def least_loaded_broker(self) -> Broker:
        """A connected broker with the fewest requests in flight, else any known broker."""
        self._check_open()
        candidates = [self.broker(n) for n in self.snapshot.brokers]
        if not candidates:
            if not self._bootstrap_brokers:
                raise NoBrokersAvailableError("no broker known yet: call start() first")
            return self._bootstrap_brokers[0]
        connected = [b for b in candidates if b.connected]
        if connected:
            return min(connected, key=lambda b: b._conn.in_flight if b._conn else 0)
        return random.choice(candidates)

    def controller(self) -> Broker:
        cid = self.snapshot.controller_id
        if cid >= 0 and cid in self.snapshot.brokers:
            return self.broker(cid)
        return self.least_loaded_broker()

    # ------------------------------------------------------------ metadata

    def _adopt(self, snapshot: ClusterSnapshot) -> None:
        # A bootstrap connection to an advertised address becomes that node's
        # connection, so the client does not open a second one.
        # One that duplicates a node already connected (bootstrap addresses are
        # used again when a refresh found no broker) is closed: one connection per broker.
        for boot in list(self._bootstrap_brokers):
            for node_id, info in snapshot.brokers.items():
                if (info.host, info.port) != (boot.host, boot.port):
                    continue
                self._bootstrap_brokers.remove(boot)
                if node_id not in self._brokers:
                    boot.node_id = node_id
                    self._brokers[node_id] = boot
                else:
                    self._close_later(boot)
                break
        for node_id, info in snapshot.brokers.items():
            for handles in (self._brokers, self._fetch_brokers):
                b = handles.get(node_id)
                if b is not None and (b.host, b.port) != (info.host, info.port):
                    # The node moved: forget the old connection.
                    handles.pop(node_id)
                    self._close_later(b)
        if snapshot.brokers:
            # The bootstrap addresses that are not nodes are done with (as in the
            # Java client): a later refresh asks the nodes, and only a rebootstrap
            # goes back to those addresses (see the module docstring).
            for boot in self._bootstrap_brokers:
                self._close_later(boot)
            self._bootstrap_brokers.clear()
        for handles in (self._brokers, self._fetch_brokers, self._coordinator_brokers):
            for b in handles.values():
                b.cluster_id = snapshot.cluster_id
        if self._rejected:
            invalid = code_of(InvalidTopicError)
            for name in self._rejected:
                snapshot.topic_errors[name] = invalid
        self.snapshot = snapshot
        for listener in self._listeners:
            try:
                listener()
            except Exception:  # a listener's bug must not break the metadata
                log.exception("metadata listener %r failed", listener)

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (on the client's loop) after every metadata update:
        the periodic refresh, one asked for, a rebootstrap."""
        self._listeners.append(listener)

    @property
    def interest(self) -> frozenset[str]:
        """The topics the next refresh asks for (unless it asks for every topic)."""
        return frozenset(self._interest)

    def interested(self, name: str) -> bool:
        """Whether refreshes ask for topic ``name`` (so its metadata is kept fresh)."""
        return name in self._interest

    def asked_at(self, name: str) -> float:
        """When a caller last named topic ``name`` (``refresh(topics)``, ``topic()``;
        time.monotonic()), 0.0 if never or since forgotten."""
        return self._asked_at.get(name, 0.0)

    def forget(self, topics: Iterable[str]) -> None:
        """Stop asking for ``topics`` and drop what is known of them: a later
        lookup asks the cluster again (and a deleted topic is not re-created by
        auto-creation in the meantime)."""
        snapshot = self.snapshot
        for name in topics:
            self._interest.discard(name)
            self._asked_at.pop(name, None)
            snapshot.topics.pop(name, None)
            snapshot.topic_errors.pop(name, None)
            self._rejected.pop(name, None)

    def _drop_invalid(self) -> None:
        """Take every name Kafka would refuse out of the topics of interest (a
        Metadata request naming one could not be encoded, or the broker would
        fail it): each is logged once and recorded as INVALID_TOPIC_EXCEPTION
        for its waiters; the refresh asks for the others."""
        for name in list(self._interest):
            problem = topic_problem(name) if isinstance(name, str) else "not a str"
            if problem is None:
                continue
            self._interest.discard(name)
            self._asked_at.pop(name, None)
            if name not in self._rejected:
                log.warning(
                    "topic name %r is not valid (%s): left out of metadata requests", name, problem
                )
            self._rejected[name] = problem

    def _close_later(self, broker: Broker) -> None:
        task = asyncio.ensure_future(broker.close())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _metadata_from(
        self, broker: Broker, topics: list[str] | None, *, fresh: bool = False
    ) -> ClusterSnapshot:
        """The metadata ``broker`` gives, merged into what is known (``fresh``: from
        a rebootstrap, merged only when the cluster id is the same)."""
        if topics is None:
            req = MetadataRequest(
                topics=None, allow_auto_topic_creation=self.allow_auto_topic_creation
            )
        else:
            req = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=self.allow_auto_topic_creation,
            )
        resp = await broker.request(req)
        if code_in(getattr(resp, "error_code", 0), RebootstrapRequiredError):
            raise RebootstrapRequiredError(f"metadata from {broker.address}")
        previous: ClusterSnapshot | None = self.snapshot
        if fresh and previous is not None and previous.cluster_id != resp.cluster_id:
            log.warning(
                "bootstrap addresses now lead to cluster %s (was %s): the old metadata is dropped",
                resp.cluster_id,
                previous.cluster_id,
            )
            previous = None
        return snapshot_from_response(resp, previous, None if previous is None else topics)

    async def _do_refresh(self) -> None:
        gen = self._requested_gen
        if self.before_refresh is not None:
            try:
                self.before_refresh()
            except Exception:  # the hook's bug must not stop the refresh
                log.exception("before_refresh hook %r failed", self.before_refresh)
        self._drop_invalid()
        every = self._want_all or self.all_topics or not self._started
        topics = None if every else sorted(self._interest)
        if topics is not None and not topics:
            topics = []
        errors: list[str] = []
        candidates: list[Broker] = []
        if self.snapshot.brokers:
            first = self.least_loaded_broker()
            candidates.append(first)
            candidates.extend(b for b in self.brokers.values() if b is not first)
        # Bootstrap addresses come last (or alone, before the first metadata).
        if not self._bootstrap_brokers and not self.snapshot.brokers:
            for address in self.bootstrap:
                try:
                    host, port = split_address(address)
                except ValueError:
                    errors.append(f"{address}: not host:port")
                    continue
                self._bootstrap_brokers.append(Broker(host, port, self.options))
        candidates.extend(self._bootstrap_brokers)
        if not candidates and not errors:
            raise NoBrokersAvailableError("no bootstrap servers configured")
        must_rebootstrap = False
        # Addresses now serving another cluster or node (KIP-1242): asked again, as
        # bootstrap addresses, by the rebootstrap.
        moved: set[tuple[str, int]] = set()
        for broker in candidates:
            self._check_open()
            try:
                snapshot = await self._metadata_from(broker, topics)
            except AuthenticationError:
                raise
            except (RebootstrapRequiredError, BrokerIdentityError) as exc:
                errors.append(f"{broker.address}: {exc.message}")
                if isinstance(exc, BrokerIdentityError):
                    moved.add((broker.host, broker.port))
                must_rebootstrap = True
                break
            except KafkaError as exc:
                errors.append(f"{broker.address}: {exc.message}")
                continue
            self._adopt(snapshot)
            self._completed_gen = gen
            return
        if self.snapshot.brokers and (self.rebootstrap or must_rebootstrap):
            tried = {(b.host, b.port) for b in candidates} - moved
            if await self._rebootstrap(topics, tried, errors):
                self._completed_gen = gen
                return
        if not self.snapshot.brokers:
            raise NoBrokersAvailableError(
                "no bootstrap broker answered: " + "; ".join(errors or ["none tried"])
            )
        raise KafkaConnectionError("metadata refresh failed on every broker: " + "; ".join(errors))

    async def _rebootstrap(
        self, topics: list[str] | None, tried: set[tuple[str, int]], errors: list[str]
    ) -> bool:
        """Every broker of the metadata failed: ask the bootstrap addresses (those
        not just tried) as at start. True when one answered (its metadata adopted)."""
        for address in self.bootstrap:
            try:
                host, port = split_address(address)
            except ValueError:
                continue
            if (host, port) in tried:
                continue
            self._check_open()
            broker = Broker(host, port, self.options)
            try:
                snapshot = await self._metadata_from(broker, topics, fresh=True)
            except AuthenticationError:
                await broker.close()
                raise
            except KafkaError as exc:
                errors.append(f"{address} (rebootstrap): {exc.message}")
                await broker.close()
                continue
            log.warning(
                "no broker of the metadata answered (%s): rebootstrapped from %s",
                "; ".join(errors),
                address,
            )
            self._forget_nodes(snapshot)
            self._bootstrap_brokers.append(broker)
            self._adopt(snapshot)
            return True
        return False

    def _forget_nodes(self, snapshot: ClusterSnapshot) -> None:
        """Before adopting a rebootstrap's metadata: drop the connections to nodes
        it does not have (or has at another address) and the coordinators found
        through the old metadata."""
        new = snapshot.brokers
        for handles in (self._brokers, self._fetch_brokers):
            for node_id, b in list(handles.items()):
                info = new.get(node_id)
                if info is None or (info.host, info.port) != (b.host, b.port):
                    self._close_later(handles.pop(node_id))
        for b in self._coordinator_brokers.values():
            self._close_later(b)
        self._coordinator_brokers.clear()
        self._coordinators.clear()

    async def refresh(
        self, topics: Iterable[str] | None = None, *, all_topics: bool = False
    ) -> None:
        """Fetch fresh metadata (for ``topics`` plus those already of interest,
        or for every topic). Concurrent callers share one request."""
        self._check_open()
        if topics is not None:
            now = time.monotonic()
            for name in topics:
                self._interest.add(name)
                self._asked_at[name] = now
        if all_topics:
            self._want_all = True
        self._requested_gen += 1
        want = self._requested_gen
        try:
            while self._completed_gen < want:
                task = self._refresh_task
                if task is None or task.done():
                    task = self._refresh_task = asyncio.ensure_future(self._do_refresh())
                    task.add_done_callback(_consume)
                    task.add_done_callback(self._refreshed)
                await asyncio.shield(task)
        finally:
            if all_topics:
                self._want_all = False

    def _refreshed(self, task: asyncio.Future[None]) -> None:
        """A refresh ended: note the change of :attr:`health`, if any, once."""
        if task.cancelled() or self._closed:
            return
        exc = task.exception()
        if exc is None:
            if self.health is not None:
                log.info("%s: metadata reachable again (%s)", self.client_name, self.health.message)
                self.health = None
            return
        if not isinstance(exc, (KafkaConnectionError, AuthenticationError)):
            return  # (one request's trouble, not the client's)
        was = self.health
        self.health = exc
        if was is not None and type(was) is type(exc):
            log.debug("%s: still failing: %s", self.client_name, exc)
            return
        log.warning("%s: cannot get metadata: %s", self.client_name, exc)
        if self.on_unhealthy is not None:
            call_user(self.on_unhealthy, exc, f"{self.client_name}: error_callback", log)

    async def _refresh_periodically(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.metadata_max_age)
            try:
                await self.refresh()
            except KafkaError as exc:
                if self.health is None or exc is not self.health:
                    log.warning("periodic metadata refresh failed: %s", exc)

    def leader_is_down(self, topic: str, partition: int) -> None:
        """Forget the leader of ``topic``/``partition``; the next lookup refreshes."""
        info = self.snapshot.topics.get(topic)
        if info is not None and partition in info.partitions:
            old = info.partitions[partition]
            info.partitions[partition] = PartitionInfo(
                old.topic,
                old.partition,
                -1,
                old.leader_epoch,
                old.replicas,
                old.isr,
                old.offline_replicas,
                code_of(LeaderNotAvailableError),
            )

    def lookup_topic_cached(self, name: str) -> TopicInfo | None:
        """Topic ``name``'s metadata when the cache has it (asked for before), else None."""
        info = self.snapshot.topics.get(name)
        return info if info is not None and name in self._interest else None

    async def lookup_topic(self, name: str) -> TopicInfo:
        """One attempt: topic ``name``'s metadata, from the cache or one refresh.
        Raises InvalidTopicError (a name Kafka refuses) at once, the topic's
        error from the metadata, or UnknownTopicOrPartitionError (retriable: it
        may be being created); the retries are the request path's
        (:meth:`topic`)."""
        self._check_open()
        info = self.lookup_topic_cached(name)
        if info is not None:
            return info
        check_topic(name)  # InvalidTopicError naming it, before it is asked for
        await self.refresh([name])
        info = self.snapshot.topics.get(name)
        if info is not None and info.partitions:
            return info
        code = self.snapshot.topic_errors.get(name)
        err = UnknownTopicOrPartitionError if code is None else error_for_code(code)
        if not err.retriable and not issubclass(err, UnknownTopicOrPartitionError):
            raise err(f"metadata for topic {name!r}: retrying cannot help")
        raise err(f"topic {name!r} is not in the metadata (yet)", retriable=True)

    async def lookup_leader(self, topic: str, partition: int) -> tuple[Broker, PartitionInfo]:
        """One attempt: the broker leading ``topic``/``partition`` and the
        partition's metadata, from what the cache knows (a topic it does not know
        is looked up once). LeaderNotAvailableError (retriable) while the leader
        is unknown: the request path refreshes and retries."""
        info = await self.lookup_topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition} (it has {len(info.partitions)})",
                retriable=False,  # the metadata was just refreshed: retrying cannot help
            )
        if p.leader >= 0 and p.leader in self.snapshot.brokers:
            return self.broker(p.leader), p
        raise LeaderNotAvailableError(f"no leader known for {topic}-{partition} (yet)")

    @property
    def requests(self) -> RequestPath:
        """A request path over this cluster (the retrying lookups below)."""
        return RequestPath(self)

    async def topic(self, name: str, *, timeout: float | None = None) -> TopicInfo:
        """Metadata of topic ``name``, looked up again (the request path's backoff)
        until it is known or ``timeout`` (seconds; default: the request timeout)
        passes."""
        self._check_open()
        return await self.requests.topic(name, timeout=timeout)

    async def list_topics(self, topic: str | None, timeout: float) -> dict[str, list[int]]:
        """``{topic: partition ids}`` of every topic of the cluster (internal ones
        left out), or of ``topic`` alone (the clients' ``list_topics``)."""
        if topic is not None:
            return {topic: sorted(await self.partitions(topic, timeout=timeout))}
        await asyncio.wait_for(self.refresh(all_topics=True), timeout)
        return {
            name: t.partition_ids
            for name, t in sorted(self.snapshot.topics.items())
            if not t.is_internal
        }

    async def partitions(self, topic: str, *, timeout: float | None = None) -> list[int]:
        return (await self.topic(topic, timeout=timeout)).partition_ids

    async def leader(
        self, topic: str, partition: int, *, timeout: float | None = None
    ) -> tuple[Broker, PartitionInfo]:
        """The broker leading ``topic``/``partition`` and the partition's metadata,
        looked up again (refreshing, the request path's backoff) while the leader
        is unknown, up to ``timeout``."""
        return await self.requests.leader(topic, partition, timeout=timeout)

    # ------------------------------------------------------------ coordinators

    async def coordinator(self, key: str, key_type: int = GROUP) -> Broker:
        """One attempt: the broker coordinating group (``key_type=GROUP``) or
        transactional id (``TRANSACTION``) ``key``, cached or asked for once
        (FindCoordinator). A coordinator loading or not available is a retriable
        error naming the key; the request path (route ``ToCoordinator``) retries."""
        self._check_open()
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            b = self._coordinator_brokers.get(cached) or self._brokers.get(cached)
            if b is not None:
                return b
        if not self.snapshot.brokers:
            await self.start()
        what = "group" if key_type == GROUP else "transactional id"
        return await self._find_coordinator(key, key_type, what)

    async def _find_coordinator(self, key: str, key_type: int, what: str) -> Broker:
        broker = self.least_loaded_broker()
        version = await broker.api_version(FindCoordinatorRequest)
        if version >= 4:
            req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            req = FindCoordinatorRequest(key=key, key_type=key_type)
        resp = await broker.request(req, version=version)
        c: Any = resp.coordinators[0] if version >= 4 else resp
        if c.error_code:
            raise error_for_code(c.error_code)(
                f"FindCoordinator for {what} {key!r} on {broker.describe()}",
                error_message=c.error_message,
            )
        node_id, host, port = c.node_id, c.host, c.port
        self._coordinators[(key_type, key)] = node_id
        b = self._brokers.get(node_id)
        if b is None or (b.host, b.port) != (host, port):
            b = self._coordinator_brokers.get(node_id)
            if b is None or (b.host, b.port) != (host, port):
                b = self._coordinator_brokers[node_id] = self._node_handle(host, port, node_id)
        return b

    def coordinator_is_down(self, key: str, key_type: int = GROUP) -> None:
        """Forget the coordinator of ``key``; the next lookup asks again."""
        self._coordinators.pop((key_type, key), None)


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
