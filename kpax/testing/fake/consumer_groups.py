"""KIP-848 consumer groups: ConsumerGroupHeartbeat (v0-v1) and ConsumerGroupDescribe.

Role: the broker side of ``group.protocol=consumer``, with time as an input.
A group has an epoch, bumped when a member joins or leaves, a subscription
changes, or the subscribed topics change (created, deleted, more partitions);
its target assignment is computed by a server-side assignor
(:mod:`kpax.testing.fake.assignors`: ``uniform``, the default, or ``range``)
whenever the group epoch is ahead of the assignment epoch.

Each member reconciles towards its target as Kafka's coordinator has it:
partitions it must give up are revoked first (its epoch stays until a heartbeat
reports it no longer owns them); then it gets the partitions of its target that
no other member still owns or revokes, and the assignment epoch. A partition
another member still holds comes in a later heartbeat, once released.
Errors: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH (an epoch ahead of the member's,
or behind it other than its previous epoch with partitions it does not own),
UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, INVALID_REQUEST (a join
without a subscription, v1 without a member id). A member not heard from for
``group.consumer.session.timeout.ms``, or that does not revoke within its
rebalance timeout, is removed. Epoch -1 leaves; -2 (a static member's leave)
leaves too (the fake keeps no partitions for a static member).

Imports: kpax.testing.fake.{assignors,codes,context}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kpax.proto.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.assignors import ASSIGNORS, Assignment
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import Ctx

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["HANDLERS", "ConsumerGroup", "ConsumerGroups"]

CHR = ConsumerGroupHeartbeatResponse
CDR = ConsumerGroupDescribeResponse
GROUP = 0
Parts = dict[uuid.UUID, set[int]]


@dataclass
class CMember:
    member_id: str
    client_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout: int = 300000
    topics: list[str] | None = None
    regex: str | None = None
    assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    assigned: Parts = field(default_factory=dict)
    revoking: Parts = field(default_factory=dict)
    last_sent: Parts | None = None
    deadline: int = 0
    revoke_deadline: int | None = None


@dataclass
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, CMember] = field(default_factory=dict)
    target: Assignment = field(default_factory=dict)
    #: topic id -> partition count of the subscribed topics, as last seen
    metadata: dict[uuid.UUID, int] = field(default_factory=dict)
    assignor: str = "uniform"

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.epoch != self.assignment_epoch or m.revoking:
                return "Reconciling"
        return "Stable"


def _count(p: Parts) -> set[tuple[uuid.UUID, int]]:
    return {(t, i) for t, ps in p.items() for i in ps}


def _parts(pairs: set[tuple[uuid.UUID, int]]) -> Parts:
    out: Parts = {}
    for t, i in pairs:
        out.setdefault(t, set()).add(i)
    return out


class ConsumerGroups:
    """Every KIP-848 group of the cluster."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.groups: dict[str, ConsumerGroup] = {}

    # ------------------------------------------------------------ subscriptions

    def _resolve(self, m: CMember) -> set[uuid.UUID]:
        state = self.cluster.state
        out: set[uuid.UUID] = set()
        if m.topics is not None:
            for name in m.topics:
                t = state.topic(name)
                if t is not None:
                    out.add(t.topic_id)
        if m.regex is not None:
            pattern = re.compile(m.regex)
            out.update(t.topic_id for t in state.topics.values() if pattern.fullmatch(t.name))
        return out

    def subscribed_topics(self, group_id: str) -> set[str]:
        group = self.groups.get(group_id)
        if group is None:
            return set()
        state = self.cluster.state
        ids = set().union(*(self._resolve(m) for m in group.members.values()))
        return {state.by_id[t].name for t in ids if t in state.by_id}

    def _refresh(self, group: ConsumerGroup, bump: bool = False) -> None:
        """Bump the group epoch (once) when asked or when the subscribed topics
        changed; recompute the target when the group epoch is ahead of it."""
        state = self.cluster.state
        subs = {mid: self._resolve(m) for mid, m in group.members.items()}
        metadata = {
            t: len(state.by_id[t].partitions) for s in subs.values() for t in s if t in state.by_id
        }
        if metadata != group.metadata:
            group.metadata = metadata
            bump = True
        if bump:
            group.epoch += 1
        if group.epoch > group.assignment_epoch:
            assign = ASSIGNORS.get(group.assignor, ASSIGNORS["uniform"])
            group.target = assign(subs, metadata, group.target)
            group.assignment_epoch = group.epoch

    # ------------------------------------------------------------ heartbeat

    def heartbeat(self, ctx: Ctx, req: ConsumerGroupHeartbeatRequest) -> Any:
        now = ctx.now_ms
        gid = req.group_id
        if not gid:
            raise ApiError(codes.INVALID_REQUEST, "an empty group id")
        classic = self.cluster.groups.groups.get(gid)
        if (classic is not None and classic.members) or gid in self.cluster.share_groups.groups:
            raise ApiError(codes.GROUP_ID_NOT_FOUND, f"group {gid} is not a consumer group")
        if classic is not None:  # an empty classic group becomes a KIP-848 one, as on Kafka
            self.cluster.groups.delete(gid)
        group = self.groups.get(gid)
        epoch = req.member_epoch
        if epoch < 0:
            if group is not None and req.member_id in group.members:
                self._remove(group, req.member_id)
            return CHR(member_id=req.member_id, member_epoch=epoch)
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            raise ApiError(codes.UNSUPPORTED_ASSIGNOR, f"no assignor {req.server_assignor!r}")
        regex = req.subscribed_topic_regex if ctx.version >= 1 else None
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ApiError(codes.INVALID_REGULAR_EXPRESSION, str(exc)) from None
        member_id = req.member_id
        joined = False
        if epoch == 0:
            if not member_id:
                if ctx.version >= 1:
                    raise ApiError(
                        codes.INVALID_REQUEST, "ConsumerGroupHeartbeat v1 needs a member id"
                    )
                member_id = self.cluster.new_member_id(ctx.client_id)
            if group is None:
                group = self.groups[gid] = ConsumerGroup(gid)
            m = group.members.get(member_id)
            if m is None:
                if req.subscribed_topic_names is None and regex is None:
                    raise ApiError(codes.INVALID_REQUEST, "a join names its subscription")
                m = group.members[member_id] = CMember(member_id, ctx.client_id)
                joined = True
            m.last_sent = None
        else:
            m = group.members.get(member_id) if group is not None else None
            if group is None or m is None:
                raise ApiError(codes.UNKNOWN_MEMBER_ID, f"{member_id} is not a member of {gid}")
            owned = _pairs(req.topic_partitions)
            if epoch > m.epoch or (
                epoch < m.epoch
                and (
                    epoch != m.previous_epoch
                    or (owned is not None and not owned <= _count(m.assigned))
                )
            ):
                raise ApiError(
                    codes.FENCED_MEMBER_EPOCH, f"epoch {epoch}, the member's is {m.epoch}"
                )
        changed = self._update(group, m, req, regex)
        m.deadline = now + self.cluster.state.conf_int("group.consumer.session.timeout.ms")
        owned = _pairs(req.topic_partitions)
        if owned is not None:
            m.revoking = _parts(_count(m.revoking) & owned)
        self._refresh(group, bump=joined or changed)
        before = (m.epoch, _count(m.assigned))
        self._reconcile(group, m, now)
        full = epoch == 0 or req.topic_partitions is not None or m.last_sent is None
        changed = before != (m.epoch, _count(m.assigned)) or m.last_sent != m.assigned
        assignment = None
        if full or changed:
            assignment = CHR.Assignment(
                topic_partitions=[
                    CHR.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in sorted(m.assigned.items(), key=lambda x: str(x[0]))
                    if ps
                ]
            )
            m.last_sent = {t: set(ps) for t, ps in m.assigned.items()}
        return CHR(
            member_id=member_id,
            member_epoch=m.epoch,
            heartbeat_interval_ms=self.cluster.state.conf_int(
                "group.consumer.heartbeat.interval.ms"
            ),
            assignment=assignment,
        )

    def _update(
        self,
        group: ConsumerGroup,
        m: CMember,
        req: ConsumerGroupHeartbeatRequest,
        regex: str | None,
    ) -> bool:
        """Take the heartbeat's fields; whether the subscription changed."""
        changed = False
        if req.rebalance_timeout_ms > 0:
            m.rebalance_timeout = req.rebalance_timeout_ms
        if req.instance_id is not None:
            m.instance_id = req.instance_id
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.server_assignor is not None:
            m.assignor = req.server_assignor
            group.assignor = req.server_assignor
        if req.subscribed_topic_names is not None and req.subscribed_topic_names != m.topics:
            m.topics = list(req.subscribed_topic_names)
            if regex is None:
                m.regex = None
            changed = True
        if regex is not None and regex != m.regex:
            m.regex = regex
            if req.subscribed_topic_names is None:
                m.topics = None
            changed = True
        return changed

    def _reconcile(self, group: ConsumerGroup, m: CMember, now: int) -> None:
        target = _count(group.target.get(m.member_id, {}))
        current = _count(m.assigned)
        revoke = current - target
        if revoke:
            m.assigned = _parts(current - revoke)
            m.revoking = _parts(_count(m.revoking) | revoke)
            if m.revoke_deadline is None:
                m.revoke_deadline = now + m.rebalance_timeout
            return
        if m.revoking:
            return
        m.revoke_deadline = None
        taken: set[tuple[uuid.UUID, int]] = set()
        for other in group.members.values():
            if other is not m:
                taken |= _count(other.assigned) | _count(other.revoking)
        m.assigned = _parts(current | (target - taken))
        if m.epoch != group.assignment_epoch:
            m.previous_epoch, m.epoch = m.epoch, group.assignment_epoch

    def _remove(self, group: ConsumerGroup, member_id: str) -> None:
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        group.epoch += 1

    # ------------------------------------------------------------ commits, time

    def validate_commit(self, group: ConsumerGroup, member_id: str, epoch: int) -> int:
        if not member_id and epoch < 0:
            return codes.UNKNOWN_MEMBER_ID if group.members else codes.NONE
        m = group.members.get(member_id)
        if m is None:
            return codes.UNKNOWN_MEMBER_ID
        if epoch != m.epoch:
            return codes.STALE_MEMBER_EPOCH
        return codes.NONE

    def tick(self, now: int) -> None:
        for group in self.groups.values():
            for m in list(group.members.values()):
                late = m.revoke_deadline is not None and m.revoke_deadline <= now
                if m.deadline <= now or late:
                    self._remove(group, m.member_id)

    def next_deadline(self) -> int | None:
        times = []
        for group in self.groups.values():
            for m in group.members.values():
                times.append(m.deadline)
                if m.revoke_deadline is not None:
                    times.append(m.revoke_deadline)
        return min(times) if times else None

    def delete(self, group_id: str) -> None:
        self.groups.pop(group_id, None)


def _pairs(tps: list[Any] | None) -> set[tuple[uuid.UUID, int]] | None:
    if tps is None:
        return None
    return {(t.topic_id, p) for t in tps for p in t.partitions}


def consumer_group_heartbeat(ctx: Ctx, req: ConsumerGroupHeartbeatRequest) -> Any:
    error = ctx.coordinator_error(GROUP, req.group_id)
    if error:
        return CHR(error_code=error)
    try:
        return ctx.cluster.consumer_groups.heartbeat(ctx, req)
    except ApiError as exc:
        return CHR(error_code=exc.code, error_message=exc.message)


def consumer_group_describe(ctx: Ctx, req: ConsumerGroupDescribeRequest) -> Any:
    cgs = ctx.cluster.consumer_groups
    state = ctx.cluster.state
    out = []

    def assignment(p: Parts) -> Any:
        return CDR.Assignment(
            topic_partitions=[
                CDR.TopicPartitions(
                    topic_id=t,
                    topic_name=state.by_id[t].name if t in state.by_id else "",
                    partitions=sorted(ps),
                )
                for t, ps in sorted(p.items(), key=lambda x: str(x[0]))
                if ps
            ]
        )

    for gid in req.group_ids:
        d = CDR.DescribedGroup(group_id=gid)
        error = ctx.forced() or ctx.coordinator_error(GROUP, gid)
        group = cgs.groups.get(gid)
        if error:
            d.error_code = error
        elif group is None:
            d.error_code = codes.GROUP_ID_NOT_FOUND
            d.error_message = f"group {gid} is not a consumer group"
        else:
            d.group_state = group.state_name
            d.group_epoch = group.epoch
            d.assignment_epoch = group.assignment_epoch
            d.assignor_name = group.assignor
            d.members = [
                CDR.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.epoch,
                    client_id=m.client_id,
                    client_host="/127.0.0.1",
                    subscribed_topic_names=list(m.topics or []),
                    subscribed_topic_regex=m.regex,
                    assignment=assignment(m.assigned),
                    target_assignment=assignment(group.target.get(m.member_id, {})),
                    member_type=1,
                )
                for m in group.members.values()
            ]
        out.append(d)
    return CDR(groups=out)


HANDLERS = {
    ConsumerGroupHeartbeatRequest.API_KEY: (consumer_group_heartbeat, 0, 1, False),
    ConsumerGroupDescribeRequest.API_KEY: (consumer_group_describe, 0, 1, True),
}
