"""The admin client's shared base (``AdminBase``): options, construction, the request path.

Role: resolve the admin options (``ADMIN_OPTIONS``), build the cluster view and
the one request path (:class:`~kpax.cluster.request_path.RequestPath`), and
wrap it for the domain mixins (kpax.admin.topics, .configs, .offsets, .groups,
.acls, .users, .cluster): ``_per_item`` (per-item calls, retried item by item
until the deadline), ``_once`` (one call, one result) and ``_per_leader`` (one
request per partition leader). An admin operation lives in its domain module,
never here.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.config, kpax.metrics, kpax.structs,
the standard library.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from kpax.broker.broker import Broker
from kpax.broker.options import COMMON_OPTIONS
from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import Deadline, RequestPath, RetryPolicy, ToLeader
from kpax.config import Option, positive_int, resolve
from kpax.metrics import ConnectionMetrics, Metrics, metrics_enabled
from kpax.proto.error_families import UNKNOWN_TOPIC_ERRORS
from kpax.proto.errors import KafkaError, error_for_code
from kpax.structs import BatchResult, TopicPartition

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

ADMIN_OPTIONS: dict[str, Option] = {
    **COMMON_OPTIONS,
    "default_api_timeout_ms": Option(60000, positive_int),
}

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

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        if bootstrap_servers is not None:
            config["bootstrap_servers"] = bootstrap_servers
        self.config = resolve("admin", ADMIN_OPTIONS, config)
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
    ) -> BatchResult[K, Any]:
        """Run ``attempt`` over the pending items until each has a value or a
        final error; retriable failures are retried with backoff until the
        deadline, then reported as they last were.

        An unknown topic is final after ``unknown_topic_grace`` seconds (the
        protocol calls it retriable, but an admin call should not wait a
        minute to say a topic does not exist)."""
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

        return await self.requests.each(
            what,
            items,
            attempt,
            timeout=self._timeout if timeout is None else timeout,
            retry=retry,
            on_retry=refresh,
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
        known to every broker yet)."""
        await self.cluster.start()

        def retry(err: KafkaError, deadline: Deadline) -> bool:
            if isinstance(err, UNKNOWN_TOPIC_ERRORS):
                return deadline.elapsed() < NEW_TOPIC_GRACE
            return err.retriable

        return await self.requests.fan_out(
            what,
            partitions,
            lambda tp: ToLeader(tp.topic, tp.partition),
            on_leader,
            timeout=self._timeout if timeout is None else timeout,
            retry=retry,
            resolve_timeout=0.5,
        )


async def _wrap_one(key: str, call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        return {key: await call()}
    except KafkaError as exc:
        return {key: exc}
