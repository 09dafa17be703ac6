"""The asyncio admin client (``kpax.aio.Admin``): topics, configs, offsets, groups, ACLs, users.

Role: turn admin calls into requests routed to the right broker (controller
for topic changes, partition leaders for offsets and record deletion, group
coordinators for group operations, the named broker for broker configs),
retry retriable failures with backoff until ``default_api_timeout_ms``, and
return per-item results (:class:`~kpax.structs.BatchResult`): one failing
topic does not hide the others' outcome.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.config, kpax.metrics, kpax.structs,
kpax.admin.*, the standard library.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kpax.admin.types import (
    CLASSIC,
    CONSUMER,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    GroupDescription,
    GroupListing,
    MemberDescription,
    PatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
)
from kpax.broker.broker import Broker
from kpax.broker.options import COMMON_OPTIONS, connection_options
from kpax.cluster.cluster import GROUP, Cluster
from kpax.cluster.request_path import Deadline, RequestPath, RetryPolicy, ToLeader
from kpax.config import Option, positive_int, resolve
from kpax.metrics import ConnectionMetrics, Metrics, metrics_enabled
from kpax.proto.error_codes import (
    GroupIdNotFoundError,
    LeaderNotAvailableError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kpax.proto.error_families import (
    COORDINATOR_ERRORS,
    PARTITION_LEADER_ERRORS,
    UNKNOWN_TOPIC_ERRORS,
    code_in,
)
from kpax.proto.errors import KafkaError, UnsupportedApiError, error_for_code
from kpax.proto.messages import (
    AlterUserScramCredentialsRequest as AlterScramRequest,
)
from kpax.proto.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from kpax.structs import (
    BatchResult,
    BrokerDescription,
    ClusterDescription,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionDescription,
    TopicDescription,
    TopicPartition,
)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

ADMIN_OPTIONS: dict[str, Option] = {
    **COMMON_OPTIONS,
    "default_api_timeout_ms": Option(60000, positive_int),
}

#: Special timestamps of ListOffsets.
OFFSET_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3, "earliest_local": -4}

#: How long a leader-routed call waits for a just-created topic to appear.
_NEW_TOPIC_GRACE = 3.0

Outcome = dict[K, Any]


def _error(code: int, context: str, message: str | None = None) -> KafkaError:
    return error_for_code(code)(context, error_message=message)


class AsyncAdmin:
    """``kpax.aio.Admin``: ``async with AsyncAdmin("host:9092") as admin: ...``."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        if bootstrap_servers is not None:
            config["bootstrap_servers"] = bootstrap_servers
        self.config = resolve("admin", ADMIN_OPTIONS, config)
        #: Counters behind :meth:`metrics` (kpax.metrics; None when switched off).
        self._metrics = Metrics() if metrics_enabled() else None
        self._conn_metrics = ConnectionMetrics(self._metrics) if self._metrics else None
        self.cluster = Cluster(
            self.config["bootstrap_servers"],
            connection_options(self.config, self._conn_metrics),
            metadata_max_age_ms=self.config["metadata_max_age_ms"],
            retry_backoff_ms=self.config["retry_backoff_ms"],
            retry_backoff_max_ms=self.config["retry_backoff_max_ms"],
            allow_auto_topic_creation=False,
        )
        self._timeout = self.config["default_api_timeout_ms"] / 1000
        #: The one request path (routing, retries, deadline) every call goes through.
        self.requests = RequestPath(
            self.cluster,
            RetryPolicy(self.config["retry_backoff_ms"], self.config["retry_backoff_max_ms"]),
        )

    @property
    def timeout(self) -> float:
        """``default_api_timeout_ms`` in seconds: the timeout of calls given none."""
        return float(self._timeout)

    async def start(self) -> AsyncAdmin:
        await self.cluster.start()
        return self

    async def close(self) -> None:
        await self.cluster.close()

    def metrics(self) -> dict[str, float]:
        """The Java admin client's metrics that apply, as ``{name: value}``
        (requests, responses, bytes, ``request-latency-avg``, ``connection-count``...;
        see docs/observability.md). Safe to call from any thread."""
        out: dict[str, float] = {}
        if self._metrics is not None and self._conn_metrics is not None:
            self._conn_metrics.snapshot(out, self._metrics.clock())
        return out

    async def __aenter__(self) -> AsyncAdmin:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ machinery

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

    # ------------------------------------------------------------ cluster and topics

    async def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """Cluster id, controller, brokers."""

        async def call() -> ClusterDescription:
            broker = self.cluster.least_loaded_broker()
            resp = await broker.request(DescribeClusterRequest())
            if resp.error_code:
                raise _error(
                    resp.error_code, f"DescribeCluster on {broker.describe()}", resp.error_message
                )
            return ClusterDescription(
                cluster_id=resp.cluster_id,
                controller_id=resp.controller_id,
                brokers=tuple(
                    BrokerDescription(b.broker_id, b.host, b.port, b.rack)
                    for b in sorted(resp.brokers, key=lambda b: b.broker_id)
                ),
            )

        return await self._once("describe_cluster", call, timeout)

    async def list_topics(
        self, *, internal: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Names of every topic (internal ones like __consumer_offsets only if asked)."""
        await self.cluster.start()
        await self.cluster.refresh(all_topics=True)
        topics = self.cluster.snapshot.topics.values()
        return sorted(t.name for t in topics if internal or not t.is_internal)

    async def describe_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of each topic."""

        async def attempt(names: list[str]) -> Outcome[str]:
            await self.cluster.refresh(names)
            snap = self.cluster.snapshot
            out: Outcome[str] = {}
            for name in names:
                info = snap.topics.get(name)
                code = snap.topic_errors.get(name, 0)
                if info is None or (code and not code_in(code, LeaderNotAvailableError)):
                    # An unknown topic is final here: describing does not create it.
                    err = error_for_code(code) if code else UnknownTopicOrPartitionError
                    out[name] = err(f"describe topic {name!r}")
                    continue
                out[name] = TopicDescription(
                    name=name,
                    topic_id=info.topic_id,
                    is_internal=info.is_internal,
                    partitions=tuple(
                        PartitionDescription(
                            p.partition,
                            p.leader,
                            p.leader_epoch,
                            p.replicas,
                            p.isr,
                            p.offline_replicas,
                        )
                        for _, p in sorted(info.partitions.items())
                    ),
                )
            return out

        return await self._per_item("describe topic", topics, attempt, timeout)

    async def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Create topics (a bare name takes the broker's default partitions and
        replication). Each result is None on success; a topic that already
        exists fails with ``TopicAlreadyExistsError``, for that topic only."""
        wanted = {t.name if isinstance(t, NewTopic) else t: t for t in topics}
        specs = {n: (t if isinstance(t, NewTopic) else NewTopic(n)) for n, t in wanted.items()}
        api_timeout = int((self._timeout if timeout is None else timeout) * 1000)

        async def attempt(names: list[str]) -> Outcome[str]:
            req = CreateTopicsRequest(
                topics=[_creatable(specs[n]) for n in names],
                timeout_ms=api_timeout,
                validate_only=validate_only,
            )
            broker = self.cluster.controller()
            resp = await broker.request(req)
            out: Outcome[str] = {}
            for t in resp.topics:
                if t.error_code:
                    out[t.name] = _error(
                        t.error_code,
                        f"create topic {t.name!r} on {broker.describe()}",
                        t.error_message,
                    )
                else:
                    out[t.name] = None
            return out

        return await self._per_item("create topic", specs, attempt, timeout, on_retry=self._refresh)

    async def delete_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete topics by name (per-topic results)."""
        api_timeout = int((self._timeout if timeout is None else timeout) * 1000)

        async def attempt(names: list[str]) -> Outcome[str]:
            broker = self.cluster.controller()
            version = await broker.api_version(DeleteTopicsRequest)
            if version >= 6:
                req = DeleteTopicsRequest(
                    topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
                    timeout_ms=api_timeout,
                )
            else:
                req = DeleteTopicsRequest(topic_names=names, timeout_ms=api_timeout)
            resp = await broker.request(req, version=version)
            return {
                r.name: (
                    _error(
                        r.error_code,
                        f"delete topic {r.name!r} on {broker.describe()}",
                        getattr(r, "error_message", None),
                    )
                    if r.error_code
                    else None
                )
                for r in resp.responses
            }

        return await self._per_item(
            "delete topic", topics, attempt, timeout, on_retry=self._refresh
        )

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Grow topics to ``new_totals[topic]`` partitions."""
        api_timeout = int((self._timeout if timeout is None else timeout) * 1000)

        async def attempt(names: list[str]) -> Outcome[str]:
            req = CreatePartitionsRequest(
                topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(
                        name=n, count=new_totals[n], assignments=None
                    )
                    for n in names
                ],
                timeout_ms=api_timeout,
                validate_only=validate_only,
            )
            broker = self.cluster.controller()
            resp = await broker.request(req)
            return {
                r.name: (
                    _error(r.error_code, f"create partitions of {r.name!r}", r.error_message)
                    if r.error_code
                    else None
                )
                for r in resp.results
            }

        return await self._per_item(
            "create partitions", new_totals, attempt, timeout, on_retry=self._refresh
        )

    # ------------------------------------------------------------ configs

    def _config_broker(self, resource: ConfigResource) -> Broker:
        if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and (
            resource.name.isdigit()
        ):
            return self.cluster.broker(int(resource.name))
        return self.cluster.least_loaded_broker()

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[ConfigResource, dict[str, ConfigEntry]]:
        """Configuration entries of topics and brokers (``keys`` limits which)."""
        key_list = list(keys) if keys is not None else None

        async def attempt(items: list[ConfigResource]) -> Outcome[ConfigResource]:
            by_broker: dict[int, tuple[Broker, list[ConfigResource]]] = {}
            for r in items:
                b = self._config_broker(r)
                by_broker.setdefault(id(b), (b, []))[1].append(r)
            out: Outcome[ConfigResource] = {}
            for broker, group in by_broker.values():
                req = DescribeConfigsRequest(
                    resources=[
                        DescribeConfigsRequest.DescribeConfigsResource(
                            resource_type=int(r.type),
                            resource_name=r.name,
                            configuration_keys=key_list,
                        )
                        for r in group
                    ],
                    include_synonyms=include_synonyms,
                    include_documentation=include_documentation,
                )
                resp = await broker.request(req)
                for res in resp.results:
                    key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                    if res.error_code:
                        out[key] = _error(
                            res.error_code, f"describe configs of {key}", res.error_message
                        )
                        continue
                    out[key] = {
                        c.name: ConfigEntry(
                            name=c.name,
                            value=c.value,
                            read_only=c.read_only,
                            source=_config_source(c.config_source),
                            is_sensitive=c.is_sensitive,
                            synonyms=tuple(
                                (s.name, s.value, s.source) for s in getattr(c, "synonyms", [])
                            ),
                            documentation=getattr(c, "documentation", None),
                        )
                        for c in res.configs
                    }
            return out

        return await self._per_item("describe configs", resources, attempt, timeout)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[ConfigResource, None]:
        """Set, delete, append to or subtract from configuration values."""
        ops = {r: list(c) for r, c in changes.items()}

        async def attempt(items: list[ConfigResource]) -> Outcome[ConfigResource]:
            out: Outcome[ConfigResource] = {}
            by_broker: dict[int, tuple[Broker, list[ConfigResource]]] = {}
            for r in items:
                b = self._config_broker(r)
                by_broker.setdefault(id(b), (b, []))[1].append(r)
            for broker, group in by_broker.values():
                req = IncrementalAlterConfigsRequest(
                    resources=[
                        IncrementalAlterConfigsRequest.AlterConfigsResource(
                            resource_type=int(r.type),
                            resource_name=r.name,
                            configs=[
                                IncrementalAlterConfigsRequest.AlterableConfig(
                                    name=op.name, config_operation=int(op.op), value=op.value
                                )
                                for op in ops[r]
                            ],
                        )
                        for r in group
                    ],
                    validate_only=validate_only,
                )
                resp = await broker.request(req)
                for res in resp.responses:
                    key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                    out[key] = (
                        _error(res.error_code, f"alter configs of {key}", res.error_message)
                        if res.error_code
                        else None
                    )
            return out

        return await self._per_item("alter configs", ops, attempt, timeout)

    # ------------------------------------------------------------ offsets and records

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, str | int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, OffsetAndTimestamp]:
        """Offsets by ``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a
        timestamp in ms (the first offset at or after it; -1 when none)."""
        wanted: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str):
                if spec not in OFFSET_SPECS:
                    raise ValueError(
                        f"offset spec {spec!r} for {tp}: use 'earliest', 'latest', "
                        "'max_timestamp' or a timestamp in ms"
                    )
                wanted[TopicPartition(*tp)] = OFFSET_SPECS[spec]
            else:
                if isinstance(spec, bool) or not isinstance(spec, int) or not 0 <= spec < 2**63:
                    raise ValueError(
                        f"offset spec {spec!r} for {tp}: a timestamp is an int of ms "
                        "since the epoch, from 0 to 2**63-1"
                    )
                wanted[TopicPartition(*tp)] = spec
        level = 1 if isolation_level == "read_committed" else 0

        return await self._per_leader(
            "list offsets",
            wanted,
            lambda broker, tps: self._list_offsets_on(broker, tps, wanted, level),
            timeout,
        )

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
                return deadline.elapsed() < _NEW_TOPIC_GRACE
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

    async def _list_offsets_on(
        self,
        broker: Broker,
        tps: list[TopicPartition],
        wanted: Mapping[TopicPartition, int],
        level: int,
    ) -> Outcome[TopicPartition]:
        by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp in tps:
            by_topic[tp.topic].append(tp)
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=level,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=tp.partition, timestamp=wanted[tp]
                        )
                        for tp in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
            timeout_ms=int(self.cluster.options.request_timeout_ms),
        )
        resp = await broker.request(req)
        out: Outcome[TopicPartition] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    err = _error(p.error_code, f"list offsets of {tp} on {broker.describe()}")
                    if isinstance(err, PARTITION_LEADER_ERRORS):
                        self.cluster.leader_is_down(t.name, p.partition_index)
                    out[tp] = err
                else:
                    out[tp] = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch)
        return out

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> BatchResult[TopicPartition, int]:
        """Delete records below ``before[tp]`` (-1: up to the high watermark);
        each result is the partition's new low watermark."""
        offsets = {TopicPartition(*tp): o for tp, o in before.items()}
        api_timeout = int((self._timeout if timeout is None else timeout) * 1000)

        async def on(broker: Broker, tps: list[TopicPartition]) -> Outcome[TopicPartition]:
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(tp)
            req = DeleteRecordsRequest(
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(
                        name=topic,
                        partitions=[
                            DeleteRecordsRequest.DeleteRecordsPartition(
                                partition_index=tp.partition, offset=offsets[tp]
                            )
                            for tp in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
                timeout_ms=api_timeout,
            )
            resp = await broker.request(req)
            out: Outcome[TopicPartition] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        err = _error(p.error_code, f"delete records of {tp}")
                        if isinstance(err, PARTITION_LEADER_ERRORS):
                            self.cluster.leader_is_down(t.name, p.partition_index)
                        out[tp] = err
                    else:
                        out[tp] = p.low_watermark
            return out

        return await self._per_leader("delete records", offsets, on, timeout)

    # ------------------------------------------------------------ groups

    async def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> list[GroupListing]:
        """Every group on every broker (optionally filtered by state and type)."""
        await self.cluster.start()

        async def call() -> list[GroupListing]:
            brokers = list(self.cluster.brokers.values())
            req = ListGroupsRequest(
                states_filter=list(states or []), types_filter=list(types or [])
            )
            responses = await asyncio.gather(*(b.request(req) for b in brokers))
            found: dict[str, GroupListing] = {}
            for broker, resp in zip(brokers, responses, strict=True):
                if resp.error_code:
                    raise _error(resp.error_code, f"list groups on {broker.describe()}")
                for g in resp.groups:
                    found[g.group_id] = GroupListing(
                        g.group_id,
                        g.protocol_type,
                        getattr(g, "group_state", ""),
                        getattr(g, "group_type", ""),
                    )
            return sorted(found.values(), key=lambda g: g.group_id)

        return await self._once("list groups", call, timeout)

    async def _coordinator_call(
        self,
        what: str,
        groups: Iterable[str],
        one: Callable[[Broker, str], Awaitable[Any]],
        timeout: float | None,
    ) -> BatchResult[str, Any]:
        async def attempt(ids: list[str]) -> Outcome[str]:
            out: Outcome[str] = {}

            async def run(group: str) -> None:
                try:
                    broker = await self.cluster.coordinator(group, GROUP)
                    out[group] = await one(broker, group)
                except KafkaError as exc:
                    if isinstance(exc, COORDINATOR_ERRORS) or not exc.code:
                        self.cluster.coordinator_is_down(group, GROUP)
                    out[group] = exc

            await asyncio.gather(*(run(g) for g in ids))
            return out

        return await self._per_item(what, groups, attempt, timeout)

    async def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, GroupDescription]:
        """Type (classic or consumer), state, assignor and members (with their
        assigned partitions) of each group.

        As the Java admin client does, each group is first asked for with
        ConsumerGroupDescribe (KIP-848 groups); when its coordinator says the
        group is not a consumer group (GROUP_ID_NOT_FOUND) or does not speak
        that API, DescribeGroups describes it as a classic group. A group that
        is neither (unknown, or of another type such as share or streams)
        fails with :class:`~kpax.errors.GroupIdNotFoundError` naming the group
        and the coordinator, with the broker's answers to both requests."""

        async def one(broker: Broker, group: str) -> GroupDescription:
            try:
                return await self._describe_consumer_group(broker, group)
            except (GroupIdNotFoundError, UnsupportedVersionError, UnsupportedApiError) as exc:
                not_consumer = exc
            try:
                return await self._describe_classic_group(broker, group)
            except GroupIdNotFoundError as exc:
                first = getattr(not_consumer, "error_message", None)
                if not first or first == exc.error_message:
                    raise
                raise GroupIdNotFoundError(
                    f"describe group {group!r} on {broker.describe()}",
                    error_message=f"{first} {exc.error_message or ''}".strip(),
                ) from None

        return await self._coordinator_call("describe group", group_ids, one, timeout)

    async def _describe_consumer_group(self, broker: Broker, group: str) -> GroupDescription:
        """ConsumerGroupDescribe: a KIP-848 group, or GroupIdNotFoundError."""
        resp = await broker.request(ConsumerGroupDescribeRequest(group_ids=[group]))
        g = resp.groups[0]
        if g.error_code:
            raise _error(
                g.error_code,
                f"describe consumer group {group!r} on {broker.describe()}",
                g.error_message,
            )
        return GroupDescription(
            group_id=g.group_id,
            state=g.group_state,
            protocol_type=CONSUMER,
            protocol=g.assignor_name,
            members=tuple(
                MemberDescription(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    group_instance_id=m.instance_id,
                    assignment=_described_partitions(m.assignment),
                    target_assignment=_described_partitions(m.target_assignment),
                    member_epoch=m.member_epoch,
                    subscribed_topics=tuple(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex or None,  # "" = none
                    rack=m.rack_id,
                    upgraded=None if m.member_type == -1 else m.member_type == 1,
                )
                for m in g.members
            ),
            type=CONSUMER,
            coordinator=broker.node_id if broker.node_id is not None else -1,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
        )

    async def _describe_classic_group(self, broker: Broker, group: str) -> GroupDescription:
        """DescribeGroups: a classic group (JoinGroup/SyncGroup)."""
        resp = await broker.request(DescribeGroupsRequest(groups=[group]))
        g = resp.groups[0]
        if g.error_code:
            raise _error(
                g.error_code,
                f"describe group {group!r} on {broker.describe()}",
                getattr(g, "error_message", None),
            )
        is_consumer = g.protocol_type == CONSUMER
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                group_instance_id=getattr(m, "group_instance_id", None),
                assignment=_decode_assignment(m.member_assignment) if is_consumer else (),
                subscribed_topics=_decode_subscription(m.member_metadata) if is_consumer else None,
            )
            for m in g.members
        )
        return GroupDescription(
            group_id=g.group_id,
            state=g.group_state,
            protocol_type=g.protocol_type,
            protocol=g.protocol_data,
            members=members,
            type=CLASSIC,
            coordinator=broker.node_id if broker.node_id is not None else -1,
        )

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete empty groups (a group with members fails with NonEmptyGroupError)."""

        async def one(broker: Broker, group: str) -> None:
            resp = await broker.request(DeleteGroupsRequest(groups_names=[group]))
            r = resp.results[0]
            if r.error_code:
                raise _error(r.error_code, f"delete group {group!r} on {broker.describe()}")

        return await self._coordinator_call("delete group", group_ids, one, timeout)

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all partitions, or those asked for;
        a partition with no committed offset is left out)."""
        tps = [TopicPartition(*tp) for tp in partitions] if partitions is not None else None

        async def one(broker: Broker, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
            version = await broker.api_version(OffsetFetchRequest, max_version=9)
            topics = None
            if tps is not None:
                by_topic: dict[str, list[int]] = defaultdict(list)
                for tp in tps:
                    by_topic[tp.topic].append(tp.partition)
                topics = by_topic
            if version >= 8:
                req = OffsetFetchRequest(
                    groups=[
                        OffsetFetchRequest.OffsetFetchRequestGroup(
                            group_id=group,
                            topics=None
                            if topics is None
                            else [
                                OffsetFetchRequest.OffsetFetchRequestTopics(
                                    name=t, partition_indexes=ps
                                )
                                for t, ps in topics.items()
                            ],
                        )
                    ],
                    require_stable=require_stable,
                )
            else:
                req = OffsetFetchRequest(
                    group_id=group,
                    topics=None
                    if topics is None
                    else [
                        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                        for t, ps in topics.items()
                    ],
                    require_stable=require_stable,
                )
            resp = await broker.request(req, version=version)
            if version >= 8:
                g = resp.groups[0]
                code, topics_out = g.error_code, g.topics
            else:
                code, topics_out = resp.error_code, resp.topics
            if code:
                raise _error(code, f"fetch offsets of group {group!r} on {broker.describe()}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in topics_out:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        raise _error(p.error_code, f"fetch offset of group {group!r} for {tp}")
                    if p.committed_offset >= 0:
                        out[tp] = OffsetAndMetadata(
                            p.committed_offset,
                            p.metadata or "",
                            getattr(p, "committed_leader_epoch", -1),
                        )
            return out

        result = await self._coordinator_call("fetch group offsets", [group_id], one, timeout)
        return result[group_id]  # type: ignore[no-any-return]

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Set the group's committed offsets (the group must have no active members)."""
        wanted = {
            TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o))
            for tp, o in offsets.items()
        }

        async def attempt(items: list[TopicPartition]) -> Outcome[TopicPartition]:
            try:
                broker = await self.cluster.coordinator(group_id, GROUP)
                by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
                for tp in items:
                    by_topic[tp.topic].append(tp)
                req = OffsetCommitRequest(
                    group_id=group_id,
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    topics=[
                        OffsetCommitRequest.OffsetCommitRequestTopic(
                            name=t,
                            partitions=[
                                OffsetCommitRequest.OffsetCommitRequestPartition(
                                    partition_index=tp.partition,
                                    committed_offset=wanted[tp].offset,
                                    committed_leader_epoch=wanted[tp].leader_epoch,
                                    committed_metadata=wanted[tp].metadata,
                                )
                                for tp in parts
                            ],
                        )
                        for t, parts in by_topic.items()
                    ],
                )
                resp = await broker.request(req, max_version=9)
            except KafkaError as exc:
                if isinstance(exc, COORDINATOR_ERRORS) or not exc.code:
                    self.cluster.coordinator_is_down(group_id, GROUP)
                raise
            out: Outcome[TopicPartition] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if code_in(p.error_code, COORDINATOR_ERRORS):
                        self.cluster.coordinator_is_down(group_id, GROUP)
                    if not p.error_code:
                        out[tp] = None
                        continue
                    err = _error(
                        p.error_code,
                        f"commit offset of group {group_id!r} for {tp} on {broker.describe()}",
                    )
                    if isinstance(err, UnknownMemberIdError):
                        # What a coordinator answers an outside commit while the
                        # group has members (classic and consumer groups alike).
                        err = UnknownMemberIdError(
                            f"commit offset of group {group_id!r} for {tp} on "
                            f"{broker.describe()}: the group has active members; its "
                            "offsets can be altered only while it is empty"
                        )
                    out[tp] = err
            return out

        return await self._per_item("alter group offsets", wanted, attempt, timeout)

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Forget the group's committed offsets of ``partitions`` (not subscribed ones)."""
        tps = [TopicPartition(*tp) for tp in partitions]

        async def attempt(items: list[TopicPartition]) -> Outcome[TopicPartition]:
            broker = await self.cluster.coordinator(group_id, GROUP)
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in items:
                by_topic[tp.topic].append(tp)
            req = OffsetDeleteRequest(
                group_id=group_id,
                topics=[
                    OffsetDeleteRequest.OffsetDeleteRequestTopic(
                        name=t,
                        partitions=[
                            OffsetDeleteRequest.OffsetDeleteRequestPartition(
                                partition_index=tp.partition
                            )
                            for tp in parts
                        ],
                    )
                    for t, parts in by_topic.items()
                ],
            )
            resp = await broker.request(req)
            if resp.error_code:
                if code_in(resp.error_code, COORDINATOR_ERRORS):
                    self.cluster.coordinator_is_down(group_id, GROUP)
                err = _error(resp.error_code, f"delete offsets of group {group_id!r}")
                return dict.fromkeys(items, err)
            out: Outcome[TopicPartition] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (
                        _error(p.error_code, f"delete offset of group {group_id!r} for {tp}")
                        if p.error_code
                        else None
                    )
            return out

        return await self._per_item("delete group offsets", tps, attempt, timeout)

    # ------------------------------------------------------------ ACLs

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        """ACLs matching the filter (all ACLs by default)."""
        f = acl_filter or AclBindingFilter()

        async def call() -> list[AclBinding]:
            broker = self.cluster.least_loaded_broker()
            resp = await broker.request(DescribeAclsRequest(**_filter_fields(f)))
            if resp.error_code:
                raise _error(
                    resp.error_code, f"describe ACLs on {broker.describe()}", resp.error_message
                )
            return [
                _binding(r.resource_type, r.resource_name, r.pattern_type, a)
                for r in resp.resources
                for a in r.acls
            ]

        return await self._once("describe ACLs", call, timeout)

    async def create_acls(
        self, acls: Iterable[AclBinding], *, timeout: float | None = None
    ) -> BatchResult[AclBinding, None]:
        """Create ACLs (per-ACL results)."""

        async def attempt(items: list[AclBinding]) -> Outcome[AclBinding]:
            broker = self.cluster.least_loaded_broker()
            resp = await broker.request(
                CreateAclsRequest(
                    creations=[
                        CreateAclsRequest.AclCreation(
                            resource_type=int(a.resource_type),
                            resource_name=a.resource_name,
                            resource_pattern_type=int(a.pattern_type),
                            principal=a.principal,
                            host=a.host,
                            operation=int(a.operation),
                            permission_type=int(a.permission_type),
                        )
                        for a in items
                    ]
                )
            )
            return {
                a: (
                    _error(r.error_code, f"create ACL {a}", r.error_message)
                    if r.error_code
                    else None
                )
                for a, r in zip(items, resp.results, strict=True)
            }

        return await self._per_item("create ACL", acls, attempt, timeout)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
    ) -> BatchResult[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching each filter; each result lists what was deleted."""

        async def attempt(items: list[AclBindingFilter]) -> Outcome[AclBindingFilter]:
            broker = self.cluster.least_loaded_broker()
            resp = await broker.request(
                DeleteAclsRequest(
                    filters=[DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in items]
                )
            )
            out: Outcome[AclBindingFilter] = {}
            for f, r in zip(items, resp.filter_results, strict=True):
                if r.error_code:
                    out[f] = _error(r.error_code, f"delete ACLs matching {f}", r.error_message)
                    continue
                out[f] = [
                    _binding(m.resource_type, m.resource_name, m.pattern_type, m)
                    for m in r.matching_acls
                    if not m.error_code
                ]
            return out

        return await self._per_item("delete ACLs", filters, attempt, timeout)

    # ------------------------------------------------------------ SCRAM users

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> BatchResult[str, UserScramCredentials]:
        """The SCRAM mechanisms and iteration counts of each user (all users by default)."""
        names = list(users) if users is not None else None

        async def call() -> BatchResult[str, UserScramCredentials]:
            broker = self.cluster.least_loaded_broker()
            resp = await broker.request(
                DescribeUserScramCredentialsRequest(
                    users=None
                    if names is None
                    else [DescribeUserScramCredentialsRequest.UserName(name=n) for n in names]
                )
            )
            if resp.error_code:
                raise _error(resp.error_code, "describe SCRAM credentials", resp.error_message)
            values: dict[str, UserScramCredentials] = {}
            errors: dict[str, KafkaError] = {}
            for r in resp.results:
                if r.error_code:
                    errors[r.user] = _error(
                        r.error_code, f"describe SCRAM credentials of {r.user!r}", r.error_message
                    )
                else:
                    values[r.user] = UserScramCredentials(
                        r.user,
                        tuple(
                            ScramCredentialInfo(ScramMechanism(c.mechanism), c.iterations)
                            for c in r.credential_infos
                        ),
                    )
            return BatchResult(values, errors)

        return await self._once("describe SCRAM credentials", call, timeout)

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Create, update or delete SCRAM credentials (the password is salted and
        hashed here; only the salted password travels)."""
        items = list(alterations)

        async def attempt(users: list[str]) -> Outcome[str]:
            mine = [a for a in items if a.user in users]
            upserts = []
            for a in mine:
                if isinstance(a, UserScramCredentialUpsertion):
                    salt = a.salt or os.urandom(32)
                    hash_name = (
                        "sha256" if a.mechanism == ScramMechanism.SCRAM_SHA_256 else "sha512"
                    )
                    salted = hashlib.pbkdf2_hmac(hash_name, a.password.encode(), salt, a.iterations)
                    upserts.append(
                        AlterScramRequest.ScramCredentialUpsertion(
                            name=a.user,
                            mechanism=int(a.mechanism),
                            iterations=a.iterations,
                            salt=salt,
                            salted_password=salted,
                        )
                    )
            deletions = [
                AlterScramRequest.ScramCredentialDeletion(name=a.user, mechanism=int(a.mechanism))
                for a in mine
                if isinstance(a, UserScramCredentialDeletion)
            ]
            broker = self.cluster.controller()
            resp = await broker.request(AlterScramRequest(deletions=deletions, upsertions=upserts))
            return {
                r.user: (
                    _error(r.error_code, f"alter SCRAM credentials of {r.user!r}", r.error_message)
                    if r.error_code
                    else None
                )
                for r in resp.results
            }

        return await self._per_item(
            "alter SCRAM credentials", [a.user for a in items], attempt, timeout
        )


async def _wrap_one(key: str, call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    try:
        return {key: await call()}
    except KafkaError as exc:
        return {key: exc}


def _creatable(t: NewTopic) -> Any:
    return CreateTopicsRequest.CreatableTopic(
        name=t.name,
        num_partitions=t.num_partitions if not t.replica_assignment else -1,
        replication_factor=t.replication_factor if not t.replica_assignment else -1,
        assignments=[
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
            for p, b in sorted(t.replica_assignment.items())
        ],
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
            for k, v in sorted(t.configs.items())
        ],
    )


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """The fields DescribeAcls and DeleteAcls filters share, by their protocol names."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission_type),
    }


def _binding(resource_type: int, resource_name: str, pattern_type: int, acl: Any) -> AclBinding:
    """An AclBinding from a described or deleted ACL entry."""
    return AclBinding(
        resource_type=ResourceType(resource_type),
        resource_name=resource_name,
        principal=acl.principal,
        operation=AclOperation(acl.operation),
        permission_type=AclPermissionType(acl.permission_type),
        host=acl.host,
        pattern_type=PatternType(pattern_type),
    )


def _config_source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


def _decode_consumer_protocol(cls: Any, data: Any) -> Any:
    """A consumer-protocol message (int16 version + body) from a classic
    member's join metadata or assignment; None when absent or undecodable."""
    raw = bytes(data or b"")
    if len(raw) < 2:
        return None
    version = int.from_bytes(raw[:2], "big", signed=True)
    version = min(max(version, cls.MIN_VERSION), cls.MAX_VERSION)
    try:
        obj, _ = cls.decode_from(raw, 2, version)
    except KafkaError:
        return None
    return obj


def _decode_assignment(data: Any) -> tuple[TopicPartition, ...]:
    """Partitions in a consumer-protocol assignment."""
    obj = _decode_consumer_protocol(ConsumerProtocolAssignment, data)
    if obj is None:
        return ()
    return tuple(TopicPartition(t.topic, p) for t in obj.assigned_partitions for p in t.partitions)


def _decode_subscription(data: Any) -> tuple[str, ...] | None:
    """Topics in a consumer-protocol subscription (None when undecodable)."""
    obj = _decode_consumer_protocol(ConsumerProtocolSubscription, data)
    return None if obj is None else tuple(obj.topics)


def _described_partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    """Partitions of a ConsumerGroupDescribe assignment, sorted."""
    return tuple(
        sorted(
            TopicPartition(t.topic_name, p)
            for t in assignment.topic_partitions
            for p in t.partitions
        )
    )
