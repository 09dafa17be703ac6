"""Admin operations on groups (``GroupAdmin``): list, describe, delete; group offsets; share groups.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for groups: listing
asks every broker, the rest goes to each group's coordinator (forgotten when it
moves). Describing asks ConsumerGroupDescribe first (KIP-848 groups), then
DescribeGroups (classic groups, whose consumer-protocol subscriptions and
assignments are decoded here). A group's committed offsets are fetched,
altered (OffsetCommit from outside the group) and deleted here too. Share
groups (KIP-932) have their own APIs: ShareGroupDescribe, and
Describe/Alter/DeleteShareGroupOffsets for their start offsets; DeleteGroups
deletes them as any group.

Imports: kpax.admin.base, kpax.admin.types, kpax.broker, kpax.cluster, kpax.proto,
kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kpax.admin.base import NEW_TOPIC_GRACE, AdminBase, Outcome, broker_error
from kpax.admin.types import (
    CLASSIC,
    CONSUMER,
    GroupDescription,
    GroupListing,
    MemberDescription,
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffset,
)
from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP
from kpax.proto.error_codes import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from kpax.proto.error_families import COORDINATOR_ERRORS, UNKNOWN_TOPIC_ERRORS, code_in
from kpax.proto.errors import KafkaError, UnsupportedApiError
from kpax.proto.messages import (
    AlterShareGroupOffsetsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeGroupsRequest,
    DescribeShareGroupOffsetsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ShareGroupDescribeRequest,
)
from kpax.proto.offset_fetch import offset_fetch_answer, offset_fetch_request
from kpax.structs import BatchResult, OffsetAndMetadata, TopicPartition


class GroupAdmin(AdminBase):
    """Group calls: list_groups, describe_groups, delete_groups, list_group_offsets,
    alter_group_offsets, delete_group_offsets; for share groups (KIP-932)
    describe_share_groups, delete_share_groups, list_share_group_offsets,
    alter_share_group_offsets, delete_share_group_offsets."""

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

    async def _delete_groups(
        self, kind: str, group_ids: Iterable[str], timeout: float | None
    ) -> BatchResult[str, None]:
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
        return await self._per_item(
            "alter group offsets", wanted, attempt, timeout, unknown_topic_grace=NEW_TOPIC_GRACE
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

        return await self._per_item("delete group offsets", tps, attempt, timeout)

    # ------------------------------------------------------------ share groups (KIP-932)

    async def describe_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, ShareGroupDescription]:
        """State, epochs and members of each share group: each member's client,
        the topics it subscribed to and the partitions assigned to it
        (ShareGroupDescribe, to the group's coordinator).

        An unknown group fails with :class:`~kpax.errors.GroupIdNotFoundError`
        naming it; so does a group of another type, the broker saying it is
        "not a share group" (:meth:`describe_groups` describes those). A broker
        without share groups (before Kafka 4.1) fails with
        :class:`~kpax.errors.UnsupportedApiError` naming the API."""

        async def one(broker: Broker, group: str) -> ShareGroupDescription:
            what = f"describe share group {group!r}"
            resp = await _share_request(broker, ShareGroupDescribeRequest(group_ids=[group]), what)
            g = resp.groups[0]
            if g.error_code:
                raise broker_error(g.error_code, f"{what} on {broker.describe()}", g.error_message)
            names = await self._topic_names(
                t.topic_id
                for m in g.members
                for t in m.assignment.topic_partitions
                if not t.topic_name
            )
            return ShareGroupDescription(
                group_id=g.group_id,
                state=g.group_state,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                members=tuple(
                    ShareMemberDescription(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_epoch=m.member_epoch,
                        subscribed_topics=tuple(m.subscribed_topic_names),
                        assignment=tuple(
                            sorted(
                                TopicPartition(t.topic_name or names[t.topic_id], p)
                                for t in m.assignment.topic_partitions
                                if t.topic_name or t.topic_id in names
                                for p in t.partitions
                            )
                        ),
                        rack=m.rack_id,
                    )
                    for m in g.members
                ),
                assignor=g.assignor_name,
                coordinator=broker.node_id if broker.node_id is not None else -1,
            )

        return await self._coordinator_call("describe share group", group_ids, one, timeout)

    async def _topic_names(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of topics known by id only, from the cluster metadata
        (refreshed once when it lacks one; a topic deleted since is left out)."""
        wanted = set(topic_ids)
        if any(self.cluster.snapshot.topic_name(i) is None for i in wanted):
            await self.cluster.refresh(all_topics=True)
        found = {i: self.cluster.snapshot.topic_name(i) for i in wanted}
        return {i: name for i, name in found.items() if name is not None}

    async def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete empty share groups and their state (DeleteGroups, which deletes a
        group of any type): a group with members fails with NonEmptyGroupError,
        an unknown one with GroupIdNotFoundError, each naming the group."""
        return await self._delete_groups("share group", group_ids, timeout)

    async def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset | None]:
        """The share group's start offset (and lag) on each partition it has
        state for, or on ``partitions``: None for a partition where it has none
        yet (no member has read it since the group began or its offsets were
        deleted). An unknown group has no state: ``{}``, or None for each
        partition asked for; a partition that does not exist fails with
        :class:`~kpax.errors.UnknownTopicOrPartitionError` naming it."""
        tps = sorted({TopicPartition(*tp) for tp in partitions}) if partitions is not None else None
        what = f"describe offsets of share group {group_id!r}"

        async def one(
            broker: Broker, group: str
        ) -> dict[TopicPartition, SharePartitionOffset | None]:
            topics = None
            if tps is not None:
                # (checked first: a Kafka 4.3 coordinator never answers for a
                # partition the topic does not have)
                await self._check_partitions(tps, what)
                topics = [
                    DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic(
                        topic_name=t, partitions=[tp.partition for tp in tps if tp.topic == t]
                    )
                    for t in dict.fromkeys(tp.topic for tp in tps)
                ]
            req = DescribeShareGroupOffsetsRequest(
                groups=[
                    DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                        group_id=group, topics=topics
                    )
                ]
            )
            resp = await _share_request(broker, req, what)
            g = resp.groups[0]
            if g.error_code:
                raise broker_error(g.error_code, f"{what} on {broker.describe()}", g.error_message)
            out: dict[TopicPartition, SharePartitionOffset | None] = {}
            for t in g.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    if p.error_code:
                        raise broker_error(p.error_code, f"{what} for {tp}", p.error_message)
                    out[tp] = (
                        SharePartitionOffset(
                            p.start_offset,
                            p.leader_epoch if p.leader_epoch >= 0 else None,
                            p.lag if p.lag >= 0 else None,  # (-1: unknown, or before v1)
                        )
                        if p.start_offset >= 0
                        else None
                    )
            return out

        result = await self._coordinator_call(what, [group_id], one, timeout)
        return result[group_id]  # type: ignore[no-any-return]

    async def _check_partitions(self, tps: Iterable[TopicPartition], what: str) -> None:
        """UnknownTopicOrPartitionError, naming it, for the first of ``tps`` the
        cluster does not have (a topic created a moment ago is waited for briefly)."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in tps:
            by_topic[tp.topic].append(tp.partition)
        for topic, wanted in by_topic.items():
            try:
                info = await self.cluster.topic(topic, timeout=NEW_TOPIC_GRACE)
            except UNKNOWN_TOPIC_ERRORS:
                raise UnknownTopicOrPartitionError(
                    f"{what}: topic {topic!r} does not exist", retriable=False
                ) from None
            for partition in wanted:
                if partition not in info.partitions:
                    raise UnknownTopicOrPartitionError(
                        f"{what}: topic {topic!r} has no partition {partition} "
                        f"(it has {len(info.partitions)})",
                        retriable=False,
                    )

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Set the share group's start offsets: its members go on reading each
        partition from there. The group must have no members (else each
        partition fails with NonEmptyGroupError saying so); a group that does
        not exist yet is created, as a share group."""
        wanted = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        what = f"alter offsets of share group {group_id!r}"

        async def attempt(items: list[TopicPartition]) -> Outcome[TopicPartition]:
            req = AlterShareGroupOffsetsRequest(
                group_id=group_id,
                topics=[
                    AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(
                        topic_name=t,
                        partitions=[
                            AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(
                                partition_index=tp.partition, start_offset=wanted[tp]
                            )
                            for tp in items
                            if tp.topic == t
                        ],
                    )
                    for t in dict.fromkeys(tp.topic for tp in items)
                ],
            )
            broker, resp = await self._share_group_request(group_id, req, what)
            if resp.error_code:
                return dict.fromkeys(items, _share_group_error(resp, what, broker))
            out: Outcome[TopicPartition] = {}
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    out[tp] = (
                        broker_error(p.error_code, f"{what} for {tp}", p.error_message)
                        if p.error_code
                        else None
                    )
            return out

        # (a topic created a moment ago may not be known to the coordinator yet)
        return await self._per_item(
            what, wanted, attempt, timeout, unknown_topic_grace=NEW_TOPIC_GRACE
        )

    async def delete_share_group_offsets(
        self,
        group_id: str,
        topics: Iterable[str],
        *,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Forget the share group's state on every partition of ``topics``: the
        next member to read one starts as a new group would
        (``share.auto.offset.reset``). The group must have no members."""
        names = list(dict.fromkeys(topics))
        what = f"delete offsets of share group {group_id!r}"

        async def attempt(items: list[str]) -> Outcome[str]:
            req = DeleteShareGroupOffsetsRequest(
                group_id=group_id,
                topics=[
                    DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                    for t in items
                ],
            )
            broker, resp = await self._share_group_request(group_id, req, what)
            if resp.error_code:
                return dict.fromkeys(items, _share_group_error(resp, what, broker))
            return {
                t.topic_name: (
                    broker_error(
                        t.error_code, f"{what} for topic {t.topic_name!r}", t.error_message
                    )
                    if t.error_code
                    else None
                )
                for t in resp.responses
            }

        return await self._per_item(
            what, names, attempt, timeout, unknown_topic_grace=NEW_TOPIC_GRACE
        )

    async def _share_group_request(
        self, group_id: str, request: Any, what: str
    ) -> tuple[Broker, Any]:
        """``request`` to the group's coordinator: the broker and its answer (a
        coordinator that moved or failed is forgotten, for the retry to find)."""
        try:
            broker = await self.cluster.coordinator(group_id, GROUP)
            resp = await _share_request(broker, request, what)
        except KafkaError as exc:
            if isinstance(exc, COORDINATOR_ERRORS) or not exc.code:
                self.cluster.coordinator_is_down(group_id, GROUP)
            raise
        if code_in(resp.error_code, COORDINATOR_ERRORS):
            self.cluster.coordinator_is_down(group_id, GROUP)
        return broker, resp


async def _share_request(broker: Broker, request: Any, what: str) -> Any:
    """``request`` (one of the KIP-932 admin APIs) to ``broker``: a broker
    without that API fails with UnsupportedApiError naming the call and the API."""
    try:
        return await broker.request(request)
    except UnsupportedApiError as exc:
        raise UnsupportedApiError(
            f"{what}: {exc.message}; share groups (KIP-932) need Kafka 4.1 or later, "
            "retrying cannot help",
            retriable=False,
        ) from None


def _share_group_error(resp: Any, what: str, broker: Broker) -> KafkaError:
    """The error of a share-group offsets answer's top-level error code."""
    context = f"{what} on {broker.describe()}"
    if code_in(resp.error_code, NonEmptyGroupError):
        context += ": the group has members; its offsets can be changed only while it is empty"
    return broker_error(resp.error_code, context, resp.error_message)


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
