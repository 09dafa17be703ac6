"""The admin client's shared base (``AdminBase``): options, construction, the request path.

Role: resolve the admin options (``ADMIN_OPTIONS``), build the cluster view and
the one request path (:class:`~kpax.cluster.request_path.RequestPath`), and
wrap it for the domain mixins (kpax.admin.topics, .configs, .offsets, .groups,
.share_groups, .acls, .users, .cluster): ``_per_item`` (per-item calls, retried
item by item until the deadline), ``_once`` (one call, one result),
``_per_leader`` (one request per partition leader) and, for the two group
domains (kpax.admin.groups, .share_groups), ``_coordinator_call`` (one call per
group, to its coordinator) and ``_delete_groups`` (DeleteGroups, which deletes
a group of any type). An admin operation lives in its domain module, never here.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.config, kpax.metrics, kpax.structs,
the standard library.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from kpax.broker.broker import Broker
from kpax.broker.options import ConnectionConfig
from kpax.cluster.cluster import GROUP, Cluster
from kpax.cluster.request_path import (
    Deadline,
    RequestPath,
    RetryPolicy,
    Route,
    ToCoordinator,
    ToLeader,
)
from kpax.config import Option, OptionTable, given_options, option_table, positive_int, resolve
from kpax.metrics import ConnectionMetrics, Metrics, metrics_enabled
from kpax.proto.error_codes import InvalidTopicError, NonEmptyGroupError
from kpax.proto.error_families import UNKNOWN_TOPIC_ERRORS, code_in
from kpax.proto.errors import KafkaError, error_for_code
from kpax.proto.messages import DeleteGroupsRequest
from kpax.proto.topic_names import check_topic
from kpax.structs import BatchResult, TopicPartition

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class AdminConfig(ConnectionConfig, total=False):
    """The options of ``kpax.Admin`` / ``kpax.aio.Admin`` (their ``**config``),
    each declared once (:func:`kpax.config.option_table`)."""

    default_api_timeout_ms: Annotated[int, Option(60000, positive_int)]


#: The admin client's option table (from :class:`AdminConfig`).
ADMIN_OPTIONS: OptionTable = option_table(AdminConfig)

#: How long a call on an existing topic (leader-routed, or describe, delete,
#: create partitions) retries UNKNOWN_TOPIC_OR_PARTITION: a topic just created
#: may not be known to every broker yet (KRaft propagates metadata
#: asynchronously); after that, the topic does not exist.
NEW_TOPIC_GRACE = 3.0

#: What one attempt of a per-item call returns: a value or a KafkaError per item.
Outcome = dict[K, Any]


def broker_error(code: int, context: str, message: str | None = None) -> KafkaError:
    """The KafkaError of a broker's error code, with the call's context."""
    return error_for_code(code)(context, error_message=message)


class AdminBase:
    """What every admin operation stands on: ``config``, ``cluster``, ``requests``
    and the call wrappers. The domain mixins derive from it; ``AsyncAdmin``
    (kpax.admin.client) combines them."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[AdminConfig],
    ) -> None:
        self.config = resolve("admin", ADMIN_OPTIONS, given_options(bootstrap_servers, config))
        #: Counters behind :meth:`metrics` (kpax.metrics; None when switched off).
        self._metrics = Metrics() if metrics_enabled() else None
        self._conn_metrics = ConnectionMetrics(self._metrics) if self._metrics else None
        self.cluster = Cluster.from_config(
            self.config, self._conn_metrics, allow_auto_topic_creation=False
        )
        self._timeout = self.config["default_api_timeout_ms"] / 1000
        #: The one request path (routing, retries, deadline) every call goes through.
        self.requests = RequestPath(
            self.cluster,
            RetryPolicy(self.config["retry_backoff_ms"], self.config["retry_backoff_max_ms"]),
        )

    # ------------------------------------------------------------ call wrappers

    async def _per_item(
        self,
        what: str,
        items: Iterable[K],
        attempt: Callable[[list[K]], Awaitable[Outcome[K]]],
        timeout: float | None,
        *,
        on_retry: Callable[[], Awaitable[None]] | None = None,
        unknown_topic_grace: float = 0.0,
        topic_of: Callable[[K], str | None] | None = None,
    ) -> BatchResult[K, Any]:
        """Run ``attempt`` over the pending items until each has a value or a
        final error; retriable failures are retried with backoff until the
        deadline, then reported as they last were.

        An unknown topic is final after ``unknown_topic_grace`` seconds (the
        protocol calls it retriable, but an admin call should not wait a
        minute to say a topic does not exist). ``topic_of(item)``: the topic
        name an item names (None: none), checked first -- an item naming a
        topic Kafka would refuse fails with InvalidTopicError and is not sent
        (as the Java admin does for a name it cannot represent)."""
        items, invalid = _split_invalid(items, topic_of)
        await self.cluster.start()

        def retry(err: KafkaError, deadline: Deadline) -> bool:
            if isinstance(err, UNKNOWN_TOPIC_ERRORS):
                return deadline.elapsed() < unknown_topic_grace
            return err.retriable

        refresh = None
        if on_retry is not None:
            again = on_retry

            async def refresh(_keys: list[K]) -> None:
                await again()

        result = await self.requests.each(
            what,
            items,
            attempt,
            timeout=self._timeout if timeout is None else timeout,
            retry=retry,
            on_retry=refresh,
        )
        return _with_invalid(result, invalid)

    async def _routed(
        self,
        what: str,
        items: Iterable[K],
        route_of: Callable[[K], Route],
        send: Callable[[Broker, list[K]], Awaitable[Outcome[K]]],
        timeout: float | None,
        *,
        unknown_topic_grace: float = 0.0,
        topic_of: Callable[[K], str | None] | None = None,
        resolve_timeout: float | None = None,
    ) -> BatchResult[K, Any]:
        """Items routed by what they are (``route_of``: the controller, a node, a
        group's coordinator, any broker) through the one request path: one
        ``send(broker, items)`` per broker, all brokers at once; an item that
        failed retriably is routed again (its stale route forgotten, the
        metadata refreshed for the controller or a node) and retried until the
        deadline. Unknown topics and invalid names as in :meth:`_per_item`."""
        items, invalid = _split_invalid(items, topic_of)
        await self.cluster.start()

        def retry(err: KafkaError, deadline: Deadline) -> bool:
            if isinstance(err, UNKNOWN_TOPIC_ERRORS):
                return deadline.elapsed() < unknown_topic_grace
            return err.retriable

        result = await self.requests.fan_out(
            what,
            items,
            route_of,
            send,
            timeout=self._timeout if timeout is None else timeout,
            retry=retry,
            resolve_timeout=resolve_timeout,
        )
        return _with_invalid(result, invalid)

    async def _on_route(
        self, what: str, route: Route, call: Callable[[Broker], Awaitable[V]], timeout: float | None
    ) -> V:
        """One call with one result on ``route`` (the request path's :meth:`call`)."""
        await self.cluster.start()
        return await self.requests.call(
            what, route, call, timeout=self._timeout if timeout is None else timeout
        )

    async def _refresh(self) -> None:
        await self.cluster.refresh()

    async def _once(self, what: str, call: Callable[[], Awaitable[V]], timeout: float | None) -> V:
        result = await self._per_item(
            what, [what], lambda _: _wrap_one(what, call), timeout, on_retry=self._refresh
        )
        return result[what]  # type: ignore[no-any-return]

    async def _per_leader(
        self,
        what: str,
        partitions: Iterable[TopicPartition],
        on_leader: Callable[[Broker, list[TopicPartition]], Awaitable[Outcome[TopicPartition]]],
        timeout: float | None,
    ) -> BatchResult[TopicPartition, Any]:
        """Send one request per leader (``on_leader``) for the partitions it leads,
        all at once, through the one request path; partitions whose request or
        answer failed retriably are routed again and retried. An unknown topic
        is final after a short grace period (a topic just created may not be
        known to every broker yet). A partition of a topic Kafka would refuse
        fails with InvalidTopicError, unsent."""
        return await self._routed(
            what,
            partitions,
            lambda tp: ToLeader(tp.topic, tp.partition),
            on_leader,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_partition,
            resolve_timeout=0.5,
        )

    # ------------------------------------------------------------ group coordinator calls

    async def _coordinator_call(
        self,
        what: str,
        groups: Iterable[str],
        one: Callable[[Broker, str], Awaitable[Any]],
        timeout: float | None,
    ) -> BatchResult[str, Any]:
        """Run ``one`` on each group's coordinator (route ``ToCoordinator``), all
        at once, per item: a coordinator that moved or failed is forgotten (the
        one table of kpax.proto.error_families) and found again for the retry;
        the group calls of kpax.admin.groups and .share_groups stand on it."""

        async def send(broker: Broker, ids: list[str]) -> Outcome[str]:
            out: Outcome[str] = {}

            async def run(group: str) -> None:
                try:
                    out[group] = await one(broker, group)
                except KafkaError as exc:
                    out[group] = exc

            await asyncio.gather(*(run(g) for g in ids))
            return out

        return await self._routed(what, groups, lambda g: ToCoordinator(g, GROUP), send, timeout)

    async def _delete_groups(
        self, kind: str, group_ids: Iterable[str], timeout: float | None
    ) -> BatchResult[str, None]:
        """DeleteGroups, one request per group, to its coordinator (it deletes a
        group of any type): ``delete_groups`` and ``delete_share_groups``, ``kind``
        naming the group in messages ("group", "share group")."""

        async def one(broker: Broker, group: str) -> None:
            resp = await broker.request(DeleteGroupsRequest(groups_names=[group]))
            r = resp.results[0]
            if r.error_code:
                context = f"delete {kind} {group!r} on {broker.describe()}"
                if code_in(r.error_code, NonEmptyGroupError):
                    context += ": it has members; a group can be deleted only while it is empty"
                raise broker_error(
                    r.error_code,
                    context,
                    r.error_message,  # (DeleteGroups v3+, Kafka 4.4: the cause, if any)
                )

        return await self._coordinator_call(f"delete {kind}", group_ids, one, timeout)


def topic_of_name(name: str) -> str:
    """An item that is a topic name (the ``topic_of`` of per-topic calls)."""
    return name


def topic_of_partition(tp: TopicPartition) -> str:
    """The topic of a partition (the ``topic_of`` of per-partition calls)."""
    return tp[0]


def _split_invalid(
    items: Iterable[K], topic_of: Callable[[K], str | None] | None
) -> tuple[list[K], dict[K, KafkaError]]:
    """``items`` without those naming an invalid topic, and those with their
    InvalidTopicError (:func:`kpax.proto.topic_names.check_topic`)."""
    # a bare name is one name, never its letters (delete_topics("orders"))
    kept: list[K] = [items] if isinstance(items, str) else list(items)  # type: ignore[list-item]
    if topic_of is None:
        return kept, {}
    invalid: dict[K, KafkaError] = {}
    good: list[K] = []
    for item in kept:
        name = topic_of(item)
        try:
            if name is not None:
                check_topic(name)
        except InvalidTopicError as exc:
            invalid[item] = exc
        else:
            good.append(item)
    return good, invalid


def _with_invalid(result: BatchResult[K, Any], invalid: dict[K, KafkaError]) -> BatchResult[K, Any]:
    if not invalid:
        return result
    return BatchResult(result.succeeded, {**result.errors, **invalid})


async def _wrap_one(key: str, call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        return {key: await call()}
    except KafkaError as exc:
        return {key: exc}
