"""Admin operations on groups (``GroupAdmin``): list, describe, delete; group offsets.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for groups: listing
asks every broker, the rest goes to each group's coordinator (forgotten when it
moves). Describing asks ConsumerGroupDescribe first (KIP-848 groups), then
DescribeGroups (classic groups, whose consumer-protocol subscriptions and
assignments are decoded here). A group's committed offsets are fetched,
altered (OffsetCommit from outside the group) and deleted here too. Share
groups (KIP-932) have their own module, kpax.admin.share_groups.

Imports: kpax.admin.base, kpax.admin.types, kpax.broker, kpax.cluster, kpax.proto,
kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kpax.admin.base import (
    NEW_TOPIC_GRACE,
    AdminBase,
    Outcome,
    broker_error,
    topic_of_partition,
)
from kpax.admin.types import CLASSIC, CONSUMER, GroupDescription, GroupListing, MemberDescription
from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP
from kpax.cluster.request_path import ToCoordinator
from kpax.proto.error_codes import (
    GroupIdNotFoundError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from kpax.proto.errors import KafkaError, UnsupportedApiError
from kpax.proto.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from kpax.proto.offset_fetch import offset_fetch_answer, offset_fetch_request
from kpax.structs import BatchResult, OffsetAndMetadata, TopicPartition


class GroupAdmin(AdminBase):
    """Group calls: list_groups, describe_groups, delete_groups, list_group_offsets,
    alter_group_offsets, delete_group_offsets (share groups: kpax.admin.share_groups)."""

    async def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> list[GroupListing]:
        """Every group on every broker (optionally filtered by state and type:
        ``types=["share"]`` lists the share groups, ``"consumer"``, ``"classic"``
        and ``"streams"`` the others; a type filter needs Kafka 3.8+)."""
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
                    raise broker_error(resp.error_code, f"list groups on {broker.describe()}")
                for g in resp.groups:
                    found[g.group_id] = GroupListing(
                        g.group_id,
                        g.protocol_type,
                        getattr(g, "group_state", ""),
                        getattr(g, "group_type", ""),
                    )
            return sorted(found.values(), key=lambda g: g.group_id)

        return await self._once("list groups", call, timeout)

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
        and the coordinator, with the broker's answers to both requests
        (:meth:`describe_share_groups` describes share groups)."""

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
            raise broker_error(
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
            raise broker_error(
                g.error_code,
                f"describe group {group!r} on {broker.describe()}",
                getattr(g, "error_message", None),
            )
        if g.group_state == "Dead" and not g.members and not g.protocol_type:
            # Before DescribeGroups v6 (Kafka 4.0) an unknown group is described as an
            # empty group in state Dead, not with GROUP_ID_NOT_FOUND.
            raise GroupIdNotFoundError(
                f"describe group {group!r} on {broker.describe()}: group not found "
                "(described as an empty group in state Dead)"
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
        return await self._delete_groups("group", group_ids, timeout)

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
            req = offset_fetch_request(version, group, topics, require_stable=require_stable)
            resp = await broker.request(req, version=version)
            code, topics_out = offset_fetch_answer(resp, version)
            if code:
                raise broker_error(code, f"fetch offsets of group {group!r} on {broker.describe()}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in topics_out:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        raise broker_error(
                            p.error_code, f"fetch offset of group {group!r} for {tp}"
                        )
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

        async def send(broker: Broker, items: list[TopicPartition]) -> Outcome[TopicPartition]:
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
            out: Outcome[TopicPartition] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if not p.error_code:
                        out[tp] = None
                        continue
                    err = broker_error(
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

        # (a topic created a moment ago may not be known to the coordinator yet)
        return await self._routed(
            "alter group offsets",
            wanted,
            lambda _: ToCoordinator(group_id, GROUP),
            send,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_partition,
        )

    async def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Forget the group's committed offsets of ``partitions`` (not subscribed ones)."""
        tps = [TopicPartition(*tp) for tp in partitions]

        async def send(broker: Broker, items: list[TopicPartition]) -> Outcome[TopicPartition]:
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
                err = broker_error(resp.error_code, f"delete offsets of group {group_id!r}")
                return dict.fromkeys(items, err)
            out: Outcome[TopicPartition] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (
                        broker_error(p.error_code, f"delete offset of group {group_id!r} for {tp}")
                        if p.error_code
                        else None
                    )
            return out

        return await self._routed(
            "delete group offsets",
            tps,
            lambda _: ToCoordinator(group_id, GROUP),
            send,
            timeout,
            topic_of=topic_of_partition,
        )


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
