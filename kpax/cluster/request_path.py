"""The one request path: route to the right broker, split per broker, retry inside one deadline.

Role: a client request goes to "the leader of this partition", "the
coordinator of this group (or transactional id)", "this broker", "any broker"
or "the controller". :class:`RequestPath` turns such a :data:`Route` into a
broker (:meth:`~RequestPath.resolve`), forgets a route the broker's answer
proved stale (:meth:`~RequestPath.forget`: a leader on the leader families, a
coordinator on :data:`~kpax.proto.error_families.COORDINATOR_ERRORS` or a
broken connection) and retries with one backoff policy inside one
:class:`Deadline`:

- :meth:`~RequestPath.call` -- one request to one route, resent while the
  error is retriable;
- :meth:`~RequestPath.fan_out` -- many keys (partitions, groups...), one
  request per broker for the keys it serves, all brokers at once; each key
  that failed retriably is routed again and retried, the others keep their
  result or error (a :class:`~kpax.structs.BatchResult`);
- :meth:`~RequestPath.each` -- the retry loop under ``fan_out``, for callers
  that route a batch themselves (admin calls that go to any broker or the
  controller).

Changing how kpax retries (which errors, how long, what is refreshed) is a
change here, not in each client.

Imports: kpax.broker, kpax.cluster.metadata (kpax.cluster.cluster for types), kpax.proto,
kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.broker.backoff import Backoff
from kpax.broker.broker import Broker
from kpax.cluster.metadata import GROUP, PartitionInfo, TopicInfo
from kpax.proto.error_codes import NotLeaderOrFollowerError
from kpax.proto.error_families import Stale, stale_after
from kpax.proto.errors import KafkaError, KafkaTimeoutError
from kpax.structs import BatchResult

if TYPE_CHECKING:
    from kpax.cluster.cluster import Cluster

__all__ = [
    "ANY_BROKER",
    "CONTROLLER",
    "Deadline",
    "RequestPath",
    "RetryPolicy",
    "Route",
    "ToCoordinator",
    "ToLeader",
    "ToNode",
    "once",
    "retriable",
]

K = TypeVar("K")
V = TypeVar("V")


class Deadline:
    """One deadline for a whole call, however many attempts it takes."""

    __slots__ = ("at", "started", "total")

    def __init__(self, timeout: float) -> None:
        self.started = time.monotonic()
        self.total = timeout
        self.at = self.started + timeout

    def left(self) -> float:
        """Seconds left (0 once passed)."""
        return max(self.at - time.monotonic(), 0.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    async def sleep(self, delay: float) -> bool:
        """Sleep ``delay`` seconds, unless that would pass the deadline: False then
        (without sleeping)."""
        if time.monotonic() + delay >= self.at:
            return False
        await asyncio.sleep(delay)
        return True


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait between attempts: ``retry_backoff_ms`` doubling up to
    ``retry_backoff_max_ms``, with jitter (the Java client's rule)."""

    backoff_ms: int = 100
    backoff_max_ms: int = 1000

    def backoff(self) -> Backoff:
        return Backoff(self.backoff_ms, self.backoff_max_ms)

    def delay(self, attempt: int) -> float:
        """Seconds before retry number ``attempt`` (1 for the first retry) of
        something retried on its own schedule (a producer batch)."""
        return Backoff(self.backoff_ms, self.backoff_max_ms).delay(max(attempt - 1, 0))


@dataclass(frozen=True)
class ToLeader:
    """The leader of ``topic``/``partition``."""

    topic: str
    partition: int


@dataclass(frozen=True)
class ToCoordinator:
    """The coordinator of group (``key_type=GROUP``) or transactional id
    (``key_type=TRANSACTION``) ``key``."""

    key: str
    key_type: int = GROUP


@dataclass(frozen=True)
class ToNode:
    """Broker ``node_id`` itself (e.g. describe its configs or log dirs)."""

    node_id: int


@dataclass(frozen=True)
class _AnyBroker:
    """The least loaded broker (metadata-like requests any broker answers)."""


@dataclass(frozen=True)
class _Controller:
    """The broker the cluster metadata names as controller."""


ANY_BROKER = _AnyBroker()
CONTROLLER = _Controller()

Route = ToLeader | ToCoordinator | ToNode | _AnyBroker | _Controller

#: ``retry(error, deadline)``: may a key that failed with ``error`` be tried again?
RetryRule = Callable[[KafkaError, Deadline], bool]


def retriable(error: KafkaError, deadline: Deadline) -> bool:
    """The default rule: the error says retrying can help."""
    return error.retriable


def once(error: KafkaError, deadline: Deadline) -> bool:
    """One attempt, never resent: for a request a loop sends on its own timing
    (a heartbeat: the next beat is its retry). The route an error proved stale
    is still forgotten, so the next one finds it again."""
    return False


class RequestPath:
    """See the module docstring. One per client, over its :class:`Cluster`."""

    def __init__(self, cluster: Cluster, policy: RetryPolicy | None = None) -> None:
        self.cluster = cluster
        self.policy = policy or RetryPolicy(cluster.retry_backoff_ms, cluster.retry_backoff_max_ms)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1: the first retry) of
        something a loop resends on its own timing (a heartbeat, a join, a share
        session): the one backoff policy, for loops that pace themselves."""
        return self.policy.delay(attempt)

    def deadline(self, timeout: float | None) -> Deadline:
        """A deadline ``timeout`` seconds away (default: the request timeout)."""
        if timeout is None:
            timeout = self.cluster.options.request_timeout_ms / 1000
        return Deadline(timeout)

    # ------------------------------------------------------------ routes

    async def resolve(self, route: Route, deadline: Deadline) -> Broker:
        """The broker for ``route`` now: one lookup of the leader or coordinator
        when it is not known (cut at the deadline: a retriable KafkaTimeoutError
        naming the route). Its failure is the attempt's: the caller's loop
        retries."""
        if not isinstance(route, (ToLeader, ToCoordinator)):  # nothing to look up
            return await self._resolve(route)
        try:
            return await asyncio.wait_for(self._resolve(route), max(deadline.left(), 0.001))
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(
                f"looking up {_describe(route)} did not complete within "
                f"{round(deadline.total, 2):g}s",
                retriable=True,
            ) from None

    async def _resolve(self, route: Route) -> Broker:
        cluster = self.cluster
        if isinstance(route, ToLeader):
            broker, _ = await cluster.lookup_leader(route.topic, route.partition)
            return broker
        if isinstance(route, ToCoordinator):
            return await cluster.coordinator(route.key, route.key_type)
        if isinstance(route, ToNode):
            await cluster.start()
            return cluster.broker(route.node_id)
        await cluster.start()
        if isinstance(route, _Controller):
            return cluster.controller()
        return cluster.least_loaded_broker()

    def forget(self, route: Route, error: BaseException) -> None:
        """Drop what ``error`` proved stale about ``route`` (the table of
        :func:`~kpax.proto.error_families.stale_after`): a partition's leader, a
        coordinator, or whichever of them a broken connection led to."""
        stale = stale_after(error)
        if isinstance(route, ToLeader):
            if stale & (Stale.LEADER | Stale.CONNECTION):
                self.cluster.leader_is_down(route.topic, route.partition)
        elif isinstance(route, ToCoordinator) and stale & (Stale.COORDINATOR | Stale.CONNECTION):
            self.cluster.coordinator_is_down(route.key, route.key_type)

    async def _refresh(self, routes: Iterable[Route], deadline: Deadline) -> None:
        """Before a retry: the metadata of leader-routed topics, or (a route to
        the controller or a node) the cluster's, which names where they are now."""
        routes = list(routes)
        topics = sorted({r.topic for r in routes if isinstance(r, ToLeader)})
        whole = any(isinstance(r, (_Controller, ToNode)) for r in routes)
        if (not topics and not whole) or deadline.expired:
            return
        try:
            await asyncio.wait_for(self.cluster.refresh(topics), max(deadline.left(), 0.001))
        except (KafkaError, asyncio.TimeoutError):
            pass  # the next attempt reports what is still wrong

    # ------------------------------------------------------------ lookups

    async def lookup(
        self,
        what: str,
        attempt: Callable[[], Awaitable[V]],
        *,
        timeout: float | None = None,
        between: Callable[[], Awaitable[None]] | None = None,
    ) -> V:
        """``await attempt()`` (one lookup: a topic, a leader) again while it
        fails retriably, with the backoff policy, ``between()`` (a metadata
        refresh) before each retry, until the deadline. Then its last error,
        saying it still failed after the timeout (and, being retriable, that a
        later retry may succeed); an error retrying cannot help is raised at once."""
        deadline = self.deadline(timeout)
        backoff = self.policy.backoff()
        while True:
            try:
                return await asyncio.wait_for(attempt(), max(deadline.left(), 0.001))
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(
                    f"{what} did not complete within {round(deadline.total, 2):g}s"
                ) from None
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if not await deadline.sleep(backoff.next_delay()):
                    raise type(exc)(
                        f"{exc.message}; still so after {round(deadline.total, 2):g}s "
                        "(retriable: a later retry may succeed)",
                        retriable=True,
                    ) from exc
            if between is not None:
                try:
                    await asyncio.wait_for(between(), max(deadline.left(), 0.001))
                except (KafkaError, asyncio.TimeoutError):
                    pass  # the next attempt reports what is still wrong

    async def topic(self, name: str, *, timeout: float | None = None) -> TopicInfo:
        """Topic ``name``'s metadata, looked up until known (see :meth:`lookup`)."""
        info = self.cluster.lookup_topic_cached(name)
        if info is not None:
            return info
        cluster = self.cluster
        return await self.lookup(
            f"metadata of topic {name!r}", lambda: cluster.lookup_topic(name), timeout=timeout
        )

    async def leader(
        self, topic: str, partition: int, *, timeout: float | None = None
    ) -> tuple[Broker, PartitionInfo]:
        """The leader of ``topic``/``partition`` and the partition's metadata,
        looked up (the topic refreshed between tries) until known."""
        cluster = self.cluster
        return await self.lookup(
            f"the leader of {topic}-{partition}",
            lambda: cluster.lookup_leader(topic, partition),
            timeout=timeout,
            between=lambda: cluster.refresh([topic]),
        )

    # ------------------------------------------------------------ one route

    async def call(
        self,
        what: str,
        route: Route,
        send: Callable[[Broker], Awaitable[V]],
        *,
        timeout: float | None = None,
        retry: RetryRule = retriable,
        cut: bool = True,
    ) -> V:
        """``await send(broker)`` on ``route``'s broker; ``send`` raises a
        KafkaError for an error answer. Retried, rerouted, while ``retry`` allows
        and the deadline is not passed; then the last error is raised (a
        KafkaTimeoutError naming ``what`` when time ran out first).

        ``cut=False``: an attempt already sent is not cut at the deadline (its
        own request timeout bounds it: a JoinGroup may wait a whole rebalance);
        the deadline then only stops further attempts."""
        deadline = self.deadline(timeout)
        backoff = self.policy.backoff()
        last: KafkaError | None = None
        while True:
            broker: Broker | None = None
            try:
                broker = await self.resolve(route, deadline)
                if not cut:
                    return await send(broker)
                return await asyncio.wait_for(send(broker), max(deadline.left(), 0.001))
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(
                    f"{what} did not complete within {deadline.total:g}s" + _waiting(broker, last)
                ) from None
            except KafkaError as exc:
                last = exc
                self.forget(route, exc)  # stale whether or not it is tried again
                if not retry(exc, deadline):
                    raise
                if not await deadline.sleep(backoff.next_delay()):
                    raise
                await self._refresh([route], deadline)

    # ------------------------------------------------------------ many keys

    async def each(
        self,
        what: str,
        keys: Iterable[K],
        attempt: Callable[[list[K]], Awaitable[Mapping[K, Any]]],
        *,
        timeout: float | None = None,
        retry: RetryRule = retriable,
        forget: Callable[[K, KafkaError], None] | None = None,
        on_retry: Callable[[list[K]], Awaitable[None]] | None = None,
        waiting_on: Callable[[K], Broker | None] | None = None,
    ) -> BatchResult[K, Any]:
        """The retry loop for many keys: ``attempt(keys)`` returns per key a value
        or a KafkaError instance (it may raise one for all of them). Keys whose
        error ``retry`` allows go again after a backoff -- ``forget(key, error)``
        first, ``on_retry(keys)`` (e.g. a metadata refresh) just before -- until
        the deadline; the others keep their value or error. An attempt never
        runs past the deadline; a key it cut names the broker ``waiting_on(key)``
        says it was waiting for."""
        deadline = self.deadline(timeout)
        backoff = self.policy.backoff()
        pending = list(dict.fromkeys(keys))
        last: dict[K, KafkaError] = {}
        values: dict[K, Any] = {}
        errors: dict[K, KafkaError] = {}
        while pending:
            try:
                outcome: Mapping[K, Any] = await asyncio.wait_for(
                    attempt(pending), max(deadline.left(), 0.001)
                )
            except asyncio.TimeoutError:
                # (rounded: fan_out passes what is left of its own deadline)
                within = f"{what} did not complete within {round(deadline.total, 2):g}s"
                for key in pending:
                    on = waiting_on(key) if waiting_on is not None else None
                    errors[key] = KafkaTimeoutError(within + _waiting(on, last.get(key)))
                break
            except KafkaError as exc:
                outcome = dict.fromkeys(pending, exc)
            retry_next: list[K] = []
            for key in pending:
                result = outcome.get(key, _MISSING)
                if result is _MISSING:
                    result = KafkaError(f"{what}: no outcome for {key}", retriable=True)
                if not isinstance(result, KafkaError):
                    values[key] = result
                elif retry(result, deadline):
                    if forget is not None:
                        forget(key, result)
                    last[key] = result
                    retry_next.append(key)
                else:
                    errors[key] = result
            pending = retry_next
            if not pending:
                break
            if not await deadline.sleep(backoff.next_delay()):
                errors.update((k, last[k]) for k in pending)
                break
            if on_retry is not None:
                try:
                    await asyncio.wait_for(on_retry(pending), max(deadline.left(), 0.001))
                except (KafkaError, asyncio.TimeoutError):
                    pass  # the next attempt reports what is still wrong
        return BatchResult(values, errors)

    async def fan_out(
        self,
        what: str,
        keys: Iterable[K],
        route_of: Callable[[K], Route],
        send: Callable[[Broker, list[K]], Awaitable[Mapping[K, Any]]],
        *,
        timeout: float | None = None,
        retry: RetryRule = retriable,
        resolve_timeout: float | None = 0.5,
    ) -> BatchResult[K, Any]:
        """For each key, ``route_of(key)``; keys are grouped by broker and
        ``send(broker, keys)`` runs for every broker at once, returning per key
        a value or a KafkaError instance (a key it leaves out failed with
        NOT_LEADER_OR_FOLLOWER). A KafkaError raised by ``send`` is the outcome
        of all its keys. Keys whose error ``retry`` allows are routed again and
        retried after a backoff (and a metadata refresh of their topics) until
        the deadline (:meth:`each`); the rest keep their value or error.

        ``resolve_timeout`` bounds each route lookup (an unresolved route is a
        retriable outcome of its key); None: the whole deadline."""
        deadline = self.deadline(timeout)
        routes: dict[K, Route] = {}

        def route(key: K) -> Route:
            r = routes.get(key)
            if r is None:
                r = routes[key] = route_of(key)
            return r

        sent_to: dict[K, Broker] = {}  # the broker of each key's latest attempt

        async def attempt(pending: list[K]) -> Mapping[K, Any]:
            limit = resolve_timeout
            return await self._attempt(what, pending, route, send, deadline, limit, sent_to)

        async def refresh(pending: list[K]) -> None:
            await self._refresh([route(k) for k in pending], deadline)

        return await self.each(
            what,
            keys,
            attempt,
            timeout=deadline.left(),
            retry=retry,
            forget=lambda key, error: self.forget(route(key), error),
            on_retry=refresh,
            waiting_on=sent_to.get,
        )

    async def _attempt(  # noqa: PLR0917
        self,
        what: str,
        pending: list[K],
        route: Callable[[K], Route],
        send: Callable[[Broker, list[K]], Awaitable[Mapping[K, Any]]],
        deadline: Deadline,
        resolve_timeout: float | None,
        sent_to: dict[K, Broker],
    ) -> dict[K, Any]:
        """One round: route every pending key, one request per broker, all at once
        (``sent_to``: each key's broker, noted before its request goes)."""
        out: dict[K, Any] = {}
        groups: dict[int, tuple[Broker, list[K]]] = {}
        resolved: dict[Route, Broker | KafkaError] = {}  # each route once a round
        for key in pending:
            r = route(key)
            found = resolved.get(r)
            if found is None:
                limit = (
                    deadline
                    if resolve_timeout is None
                    else Deadline(min(resolve_timeout, deadline.left()))
                )
                try:
                    found = await self.resolve(r, limit)
                except KafkaError as exc:
                    found = exc
                resolved[r] = found
            if isinstance(found, KafkaError):
                out[key] = found
                continue
            broker = found
            node = broker.node_id if broker.node_id is not None else -1
            groups.setdefault(node, (broker, []))[1].append(key)
            sent_to[key] = broker
        calls = list(groups.values())
        answers = await asyncio.gather(
            *(send(broker, group) for broker, group in calls), return_exceptions=True
        )
        for (broker, group), answer in zip(calls, answers, strict=True):
            if isinstance(answer, KafkaError):
                for key in group:
                    out[key] = answer
                continue
            if isinstance(answer, BaseException):
                raise answer
            for key in group:
                result = answer.get(key, _MISSING)
                if result is _MISSING:
                    result = NotLeaderOrFollowerError(
                        f"{what}: {broker.describe()} did not answer for {key}"
                    )
                out[key] = result
        return out


_MISSING: Any = object()


def _describe(route: Route) -> str:
    if isinstance(route, ToLeader):
        return f"the leader of {route.topic}-{route.partition}"
    if isinstance(route, ToCoordinator):
        kind = "group" if route.key_type == GROUP else "transactional id"
        return f"the coordinator of {kind} {route.key!r}"
    if isinstance(route, ToNode):
        return f"broker {route.node_id}"
    return "the controller" if isinstance(route, _Controller) else "a broker"


def _waiting(broker: Broker | None, before: KafkaError | None) -> str:
    """What a timeout message adds: the broker the attempt was waiting for, and
    how the attempt before failed."""
    text = f" (waiting for {broker.describe()})" if broker is not None else ""
    if before is not None:
        text += f"; the attempt before failed: {before.message}"
    return text
