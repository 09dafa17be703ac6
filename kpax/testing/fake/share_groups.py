"""Share groups (KIP-932): membership, ShareGroupHeartbeat (v1), ShareGroupDescribe (v1)
and the share-group start offsets (DescribeShareGroupOffsets v0-1,
AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0).

Role: who is in a share group and which partitions each member fetches. A
member joins with epoch 0 (naming its subscription) and leaves with -1; any
change (a member in or out, a subscription, the subscribed topics) bumps the
group epoch and reassigns at once -- share groups have no revocation step --
with the ``simple`` assignor: per topic, members sorted by id and partitions
dealt round robin until every member has a partition and every partition a
member (so members share a partition when there are more members than
partitions). A member not heard from for ``share.session.timeout.ms`` is
removed and what it held is released. UNKNOWN_MEMBER_ID for a member the
group does not have, FENCED_MEMBER_EPOCH for another epoch.

The records' delivery state lives in :mod:`kpax.testing.fake.share_fetch`;
the start offsets shown and altered here are its share partitions' start
offsets (the next record not yet accepted or archived).

Imports: kpax.testing.fake.{assignors,codes,context}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kpax.proto.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.assignors import Assignment
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import Ctx

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["HANDLERS", "ShareGroup", "ShareGroups", "simple_assign"]

SHR = ShareGroupHeartbeatResponse
SDR = ShareGroupDescribeResponse
GROUP = 0
Parts = dict[uuid.UUID, set[int]]


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    rack_id: str | None = None
    topics: list[str] = field(default_factory=list)
    epoch: int = 0
    deadline: int = 0
    last_sent: Parts | None = None


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: Assignment = field(default_factory=dict)
    metadata: dict[uuid.UUID, int] = field(default_factory=dict)

    @property
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"


def simple_assign(
    subscriptions: dict[str, set[uuid.UUID]], partitions: dict[uuid.UUID, int]
) -> Assignment:
    out: Assignment = {m: {} for m in subscriptions}
    for tid in sorted(partitions, key=str):
        members = sorted(m for m, subs in subscriptions.items() if tid in subs)
        n = partitions[tid]
        if not members or not n:
            continue
        for k in range(max(len(members), n)):
            out[members[k % len(members)]].setdefault(tid, set()).add(k % n)
    return out


class ShareGroups:
    """Every share group of the cluster."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.groups: dict[str, ShareGroup] = {}

    def config(self, group_id: str, name: str) -> int:
        return int(self.cluster.group_config(group_id, name))

    def _refresh(self, group: ShareGroup, bump: bool) -> None:
        state = self.cluster.state
        subs = {
            mid: {state.topics[t].topic_id for t in m.topics if t in state.topics}
            for mid, m in group.members.items()
        }
        metadata = {
            t: len(state.by_id[t].partitions) for s in subs.values() for t in s if t in state.by_id
        }
        if bump or metadata != group.metadata:
            group.metadata = metadata
            group.epoch += 1
            group.target = simple_assign(subs, metadata)
            for m in group.members.values():
                m.epoch = group.epoch
            for parts in group.target.values():
                for tid, ps in parts.items():
                    for p in ps:
                        self.cluster.share_partitions.ensure(
                            group.group_id, state.by_id[tid].name, p
                        )

    def heartbeat(self, ctx: Ctx, req: ShareGroupHeartbeatRequest) -> Any:
        gid, member_id, epoch = req.group_id, req.member_id, req.member_epoch
        if not gid or not member_id:
            raise ApiError(
                codes.INVALID_REQUEST, "a share group heartbeat names its group and member"
            )
        cluster = self.cluster
        if gid in cluster.consumer_groups.groups or (
            gid in cluster.groups.groups and cluster.groups.groups[gid].members
        ):
            raise ApiError(codes.GROUP_ID_NOT_FOUND, f"group {gid} is not a share group")
        group = self.groups.get(gid)
        if epoch < 0:
            if group is not None and member_id in group.members:
                self.remove(group, member_id)
            return SHR(member_id=member_id, member_epoch=epoch)
        bump = False
        if epoch == 0:
            if group is None:
                group = self.groups[gid] = ShareGroup(gid)
            m = group.members.get(member_id)
            if m is None:
                if req.subscribed_topic_names is None:
                    raise ApiError(codes.INVALID_REQUEST, "a join names its subscription")
                m = group.members[member_id] = ShareMember(member_id, ctx.client_id)
                bump = True
            m.last_sent = None
        else:
            m = group.members.get(member_id) if group is not None else None
            if group is None or m is None:
                raise ApiError(codes.UNKNOWN_MEMBER_ID, f"{member_id} is not a member of {gid}")
            if epoch != m.epoch:
                raise ApiError(
                    codes.FENCED_MEMBER_EPOCH, f"epoch {epoch}, the member's is {m.epoch}"
                )
        if req.subscribed_topic_names is not None and list(req.subscribed_topic_names) != m.topics:
            m.topics = list(req.subscribed_topic_names)
            bump = True
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        m.deadline = ctx.now_ms + self.config(gid, "share.session.timeout.ms")
        self._refresh(group, bump)
        assigned = group.target.get(member_id, {})
        assignment = None
        if m.last_sent != assigned:
            assignment = SHR.Assignment(
                topic_partitions=[
                    SHR.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in sorted(assigned.items(), key=lambda x: str(x[0]))
                ]
            )
            m.last_sent = {t: set(ps) for t, ps in assigned.items()}
        return SHR(
            member_id=member_id,
            member_epoch=m.epoch,
            heartbeat_interval_ms=self.config(gid, "share.heartbeat.interval.ms"),
            assignment=assignment,
        )

    def remove(self, group: ShareGroup, member_id: str) -> None:
        group.members.pop(member_id, None)
        self.cluster.share_partitions.release_member(group.group_id, member_id)
        self._refresh(group, bump=True)

    def tick(self, now: int) -> None:
        for group in self.groups.values():
            for m in [m for m in group.members.values() if m.deadline <= now]:
                self.remove(group, m.member_id)

    def next_deadline(self) -> int | None:
        times = [m.deadline for g in self.groups.values() for m in g.members.values()]
        return min(times) if times else None

    def delete(self, group_id: str) -> None:
        self.groups.pop(group_id, None)
        self.cluster.share_partitions.delete_group(group_id)


# ------------------------------------------------------------ handlers


def share_group_heartbeat(ctx: Ctx, req: ShareGroupHeartbeatRequest) -> Any:
    error = ctx.coordinator_error(GROUP, req.group_id)
    if error:
        return SHR(error_code=error)
    try:
        return ctx.cluster.share_groups.heartbeat(ctx, req)
    except ApiError as exc:
        return SHR(error_code=exc.code, error_message=exc.message)


def share_group_describe(ctx: Ctx, req: ShareGroupDescribeRequest) -> Any:
    state = ctx.cluster.state
    out = []
    for gid in req.group_ids:
        d = SDR.DescribedGroup(group_id=gid)
        group = ctx.cluster.share_groups.groups.get(gid)
        error = ctx.forced() or ctx.coordinator_error(GROUP, gid)
        if error:
            d.error_code = error
        elif group is None:
            d.error_code = codes.GROUP_ID_NOT_FOUND
            d.error_message = f"group {gid} is not a share group"
        else:
            d.group_state, d.group_epoch = group.state_name, group.epoch
            d.assignment_epoch, d.assignor_name = group.epoch, "simple"
            d.members = [
                SDR.Member(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.epoch,
                    client_id=m.client_id,
                    client_host="/127.0.0.1",
                    subscribed_topic_names=list(m.topics),
                    assignment=SDR.Assignment(
                        topic_partitions=[
                            SDR.TopicPartitions(
                                topic_id=t,
                                topic_name=state.by_id[t].name if t in state.by_id else "",
                                partitions=sorted(ps),
                            )
                            for t, ps in sorted(
                                group.target.get(m.member_id, {}).items(), key=lambda x: str(x[0])
                            )
                        ]
                    ),
                )
                for m in group.members.values()
            ]
        out.append(d)
    return SDR(groups=out)


def describe_share_group_offsets(ctx: Ctx, req: DescribeShareGroupOffsetsRequest) -> Any:
    R = DescribeShareGroupOffsetsResponse
    state = ctx.cluster.state
    sp = ctx.cluster.share_partitions
    groups = []
    for g in req.groups:
        error = ctx.forced() or ctx.coordinator_error(GROUP, g.group_id)
        if error:
            groups.append(
                R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, error_code=error)
            )
            continue
        known = sp.start_offsets(g.group_id)
        wanted: dict[str, list[int]] = {}
        if g.topics is None:
            for t, p in sorted(known):
                wanted.setdefault(t, []).append(p)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, parts in wanted.items():
            topic = state.topic(name)
            answers = []
            for p in parts:
                r = R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=-1, leader_epoch=-1
                )
                if topic is None or not 0 <= p < len(topic.partitions):
                    r.error_code = codes.UNKNOWN_TOPIC_OR_PARTITION
                elif known.get((name, p), -1) >= 0:
                    r.start_offset = known[(name, p)]
                    r.leader_epoch = topic.partitions[p].leader_epoch
                    r.lag = max(0, topic.partitions[p].log.high_watermark - r.start_offset)
                answers.append(r)
            topics.append(
                R.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=topic.topic_id if topic else uuid.UUID(int=0),
                    partitions=answers,
                )
            )
        groups.append(R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics))
    return R(groups=groups)


def _other_type(ctx: Ctx, group_id: str) -> bool:
    """Whether ``group_id`` is a group of another type (classic, with committed
    offsets only, or KIP-848)."""
    cluster = ctx.cluster
    return (
        group_id in cluster.groups.groups
        or group_id in cluster.consumer_groups.groups
        or cluster.offsets.has_group(group_id)
    )


def alter_share_group_offsets(ctx: Ctx, req: AlterShareGroupOffsetsRequest) -> Any:
    R = AlterShareGroupOffsetsResponse
    cluster = ctx.cluster
    error = ctx.coordinator_error(GROUP, req.group_id)
    group = cluster.share_groups.groups.get(req.group_id)
    if not error and group is not None and group.members:
        error = codes.NON_EMPTY_GROUP
    if not error and _other_type(ctx, req.group_id):
        return R(
            error_code=codes.GROUP_ID_NOT_FOUND,
            error_message=f"group {req.group_id} is not a share group",
        )
    if error:
        return R(error_code=error)
    if group is None:
        cluster.share_groups.groups[req.group_id] = ShareGroup(req.group_id)
    out = []
    for t in req.topics:
        topic = cluster.state.topic(t.topic_name)
        parts = []
        for p in t.partitions:
            r = R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                r.error_code = codes.UNKNOWN_TOPIC_OR_PARTITION
            else:
                cluster.share_partitions.set_start(
                    req.group_id, t.topic_name, p.partition_index, p.start_offset
                )
            parts.append(r)
        out.append(
            R.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name,
                topic_id=topic.topic_id if topic else uuid.UUID(int=0),
                partitions=parts,
            )
        )
    return R(responses=out)


def delete_share_group_offsets(ctx: Ctx, req: DeleteShareGroupOffsetsRequest) -> Any:
    R = DeleteShareGroupOffsetsResponse
    cluster = ctx.cluster
    error = ctx.coordinator_error(GROUP, req.group_id)
    group = cluster.share_groups.groups.get(req.group_id)
    if not error and group is None:
        error = codes.GROUP_ID_NOT_FOUND
    if not error and group is not None and group.members:
        error = codes.NON_EMPTY_GROUP
    if error:
        return R(error_code=error)
    out = []
    for t in req.topics:
        topic = cluster.state.topic(t.topic_name)
        r = R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic else uuid.UUID(int=0)
        )
        if topic is None:
            r.error_code = codes.UNKNOWN_TOPIC_OR_PARTITION
        else:
            cluster.share_partitions.delete_topic(req.group_id, t.topic_name)
        out.append(r)
    return R(responses=out)


HANDLERS = {
    ShareGroupHeartbeatRequest.API_KEY: (share_group_heartbeat, 1, 1, False),
    ShareGroupDescribeRequest.API_KEY: (share_group_describe, 1, 1, True),
    DescribeShareGroupOffsetsRequest.API_KEY: (describe_share_group_offsets, 0, 1, True),
    AlterShareGroupOffsetsRequest.API_KEY: (alter_share_group_offsets, 0, 0, False),
    DeleteShareGroupOffsetsRequest.API_KEY: (delete_share_group_offsets, 0, 0, False),
}
