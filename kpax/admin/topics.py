"""Admin operations on topics (``TopicAdmin``): list, describe, create, delete; create partitions.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for topics: listing
and describing come from metadata, creating, deleting and growing go to the
controller (retried after a metadata refresh); per-topic results. Calls on
an existing topic retry UNKNOWN_TOPIC_OR_PARTITION for ``NEW_TOPIC_GRACE``
(a topic just created may not be known everywhere yet), then report it. A name
Kafka would refuse fails for that topic alone with InvalidTopicError, unsent.

Imports: kpax.admin.base, kpax.cluster.request_path,
kpax.broker.broker, kpax.proto, kpax.structs, the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kpax.admin.base import NEW_TOPIC_GRACE, AdminBase, Outcome, broker_error, topic_of_name
from kpax.broker.broker import Broker
from kpax.cluster.request_path import CONTROLLER, Route
from kpax.proto.error_codes import LeaderNotAvailableError, UnknownTopicOrPartitionError
from kpax.proto.error_families import code_in
from kpax.proto.errors import error_for_code
from kpax.proto.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from kpax.structs import BatchResult, NewTopic, PartitionDescription, TopicDescription


class TopicAdmin(AdminBase):
    """Topic calls: list_topics, describe_topics, create_topics, delete_topics,
    create_partitions."""

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

        return await self._per_item(
            "describe topic",
            topics,
            attempt,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_name,
        )

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

        async def send(broker: Broker, names: list[str]) -> Outcome[str]:
            req = CreateTopicsRequest(
                topics=[_creatable(specs[n]) for n in names],
                timeout_ms=api_timeout,
                validate_only=validate_only,
            )
            resp = await broker.request(req)
            out: Outcome[str] = {}
            for t in resp.topics:
                if t.error_code:
                    out[t.name] = broker_error(
                        t.error_code,
                        f"create topic {t.name!r} on {broker.describe()}",
                        t.error_message,
                    )
                else:
                    out[t.name] = None
            return out

        return await self._routed(
            "create topic", specs, _controller, send, timeout, topic_of=topic_of_name
        )

    async def delete_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete topics by name (per-topic results)."""
        api_timeout = int((self._timeout if timeout is None else timeout) * 1000)

        async def send(broker: Broker, names: list[str]) -> Outcome[str]:
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
                    broker_error(
                        r.error_code,
                        f"delete topic {r.name!r} on {broker.describe()}",
                        getattr(r, "error_message", None),
                    )
                    if r.error_code
                    else None
                )
                for r in resp.responses
            }

        return await self._routed(
            "delete topic",
            topics,
            _controller,
            send,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_name,
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

        async def send(broker: Broker, names: list[str]) -> Outcome[str]:
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
            resp = await broker.request(req)
            return {
                r.name: (
                    broker_error(r.error_code, f"create partitions of {r.name!r}", r.error_message)
                    if r.error_code
                    else None
                )
                for r in resp.results
            }

        return await self._routed(
            "create partitions",
            new_totals,
            _controller,
            send,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_name,
        )


def _controller(_item: object) -> Route:
    """Topic changes go to the controller (the request path's CONTROLLER route)."""
    return CONTROLLER


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
