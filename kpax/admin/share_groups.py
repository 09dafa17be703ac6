"""Admin operations on share groups (``ShareGroupAdmin``, KIP-932): describe, delete; offsets.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for share groups,
whose calls go to each group's coordinator (forgotten when it moves). Share
groups have their own APIs: ShareGroupDescribe (topics known by id only are
named from the cluster metadata), and Describe/Alter/DeleteShareGroupOffsets
for their start offsets; DeleteGroups deletes them as any group
(``AdminBase._delete_groups``, kpax.admin.base). A broker without those APIs
(before Kafka 4.1) fails with UnsupportedApiError naming the call and the API.

Imports: kpax.admin.base, kpax.admin.types, kpax.broker, kpax.cluster, kpax.proto,
kpax.structs, the standard library.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kpax.admin.base import (
    NEW_TOPIC_GRACE,
    AdminBase,
    Outcome,
    broker_error,
    topic_of_name,
    topic_of_partition,
)
from kpax.admin.types import ShareGroupDescription, ShareMemberDescription, SharePartitionOffset
from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP
from kpax.cluster.request_path import ToCoordinator
from kpax.proto.error_codes import NonEmptyGroupError, UnknownTopicOrPartitionError
from kpax.proto.error_families import UNKNOWN_TOPIC_ERRORS, code_in
from kpax.proto.errors import KafkaError, UnsupportedApiError
from kpax.proto.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)
from kpax.structs import BatchResult, TopicPartition


class ShareGroupAdmin(AdminBase):
    """Share-group calls (KIP-932): describe_share_groups, delete_share_groups,
    list_share_group_offsets, alter_share_group_offsets, delete_share_group_offsets."""

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

        async def send(broker: Broker, items: list[TopicPartition]) -> Outcome[TopicPartition]:
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
            resp = await _share_request(broker, req, what)
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
        return await self._routed(
            what,
            wanted,
            lambda _: ToCoordinator(group_id, GROUP),
            send,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_partition,
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

        async def send(broker: Broker, items: list[str]) -> Outcome[str]:
            req = DeleteShareGroupOffsetsRequest(
                group_id=group_id,
                topics=[
                    DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                    for t in items
                ],
            )
            resp = await _share_request(broker, req, what)
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

        return await self._routed(
            what,
            names,
            lambda _: ToCoordinator(group_id, GROUP),
            send,
            timeout,
            unknown_topic_grace=NEW_TOPIC_GRACE,
            topic_of=topic_of_name,
        )


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
