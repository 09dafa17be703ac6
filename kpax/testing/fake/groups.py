"""Classic consumer groups: the group coordinator's state machine.

Role: JoinGroup / SyncGroup / Heartbeat / LeaveGroup semantics, as Kafka's
classic group coordinator has them, with time as an input. States:
``Empty -> PreparingRebalance -> CompletingRebalance -> Stable`` (and back to
``PreparingRebalance`` on a join with new metadata, a leader's rejoin, a leave
or a session timeout; to ``Empty`` when the last member goes).

- A first join without a member id (v4+) gets MEMBER_ID_REQUIRED and a member id
  to join with; the id waits a session timeout for that join.
- The join phase ends when every member has rejoined (or at the rebalance
  timeout, the largest of the members', dropping those that did not): the
  generation goes up, the protocol is the one every member supports that most
  members prefer, the leader (kept if still a member) gets every member's
  metadata, the others none.
- The leader's SyncGroup hands out the assignments (Stable); the others' wait for it.
- Heartbeats answer REBALANCE_IN_PROGRESS while a join phase is open,
  ILLEGAL_GENERATION for another generation, UNKNOWN_MEMBER_ID for a member the
  group does not have; a member not heard from for its session timeout is
  removed (not while it waits in a join or a sync).
- Static members (``group.instance.id``): a rejoin without a member id gets a
  new id in place of the old one, which is fenced (FENCED_INSTANCE_ID); a
  Stable group with unchanged protocols does not rebalance for it.

Imports: kpax.testing.fake.{codes,context}, kpax.proto.messages and the standard library.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kpax.proto.messages import REQUESTS, JoinGroupResponse, SyncGroupResponse
from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import Deferred

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["ClassicGroup", "ClassicGroups", "JoinRequest", "Member"]

JGR = JoinGroupResponse
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
)


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    session_timeout: int
    rebalance_timeout: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_host: str = "/127.0.0.1"
    assignment: bytes = b""
    join: Deferred | None = None
    sync: Deferred | None = None
    deadline: int = 0

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass(frozen=True)
class JoinRequest:
    """What a JoinGroup asks."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    session_timeout: int
    rebalance_timeout: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


@dataclass
class ClassicGroup:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: member ids handed out with MEMBER_ID_REQUIRED -> when they lapse
    pending: dict[str, int] = field(default_factory=dict)
    #: group.instance.id -> member id
    static: dict[str, str] = field(default_factory=dict)
    rebalance_deadline: int | None = None


def _same_protocols(a: list[tuple[str, bytes]], b: list[tuple[str, bytes]]) -> bool:
    return [(n, bytes(m)) for n, m in a] == [(n, bytes(m)) for n, m in b]


class ClassicGroups:
    """Every classic group of the cluster."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.groups: dict[str, ClassicGroup] = {}

    # ------------------------------------------------------------ join

    def join(self, j: JoinRequest, *, defer: Callable[[], Deferred], version: int, now: int) -> Any:
        """JoinGroup: a response now, or the Deferred that will carry it."""
        state = self.cluster.state
        if not j.group_id:
            raise ApiError(codes.INVALID_GROUP_ID, "an empty group id")
        lo = state.conf_int("group.min.session.timeout.ms")
        hi = state.conf_int("group.max.session.timeout.ms")
        if not lo <= j.session_timeout <= hi:
            raise ApiError(codes.INVALID_SESSION_TIMEOUT, f"session timeout not in [{lo}, {hi}]")
        if not j.protocols or not j.protocol_type:
            raise ApiError(codes.INCONSISTENT_GROUP_PROTOCOL, "no protocol")
        group = self.groups.get(j.group_id)
        if group is None:
            group = self.groups[j.group_id] = ClassicGroup(j.group_id)
        if group.members and (group.protocol_type != j.protocol_type or not self._common(group, j)):
            raise ApiError(codes.INCONSISTENT_GROUP_PROTOCOL, "no protocol in common")
        member_id = j.member_id
        full = len(group.members) >= state.conf_int("group.max.size")
        if full and member_id not in group.members:
            raise ApiError(codes.GROUP_MAX_SIZE_REACHED)
        if not member_id:
            old = group.static.get(j.instance_id) if j.instance_id is not None else None
            new_id = self.cluster.new_member_id(j.client_id)
            if old is not None and old in group.members:
                return self._static_rejoin(
                    group, old, new_id, j, defer=defer, version=version, now=now
                )
            if j.instance_id is None and version >= 4:
                group.pending[new_id] = now + j.session_timeout
                return JGR(error_code=codes.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        elif member_id in group.pending:
            del group.pending[member_id]
        elif member_id not in group.members:
            if j.instance_id is not None and j.instance_id in group.static:
                raise ApiError(codes.FENCED_INSTANCE_ID)
            raise ApiError(codes.UNKNOWN_MEMBER_ID, f"{member_id} is not a member of {j.group_id}")
        member = group.members.get(member_id)
        if member is None:
            member = Member(
                member_id,
                j.instance_id,
                j.client_id,
                j.session_timeout,
                j.rebalance_timeout,
                j.protocol_type,
                list(j.protocols),
            )
            group.members[member_id] = member
            if j.instance_id is not None:
                group.static[j.instance_id] = member_id
        else:
            if j.instance_id is not None and group.static.get(j.instance_id) != member_id:
                raise ApiError(codes.FENCED_INSTANCE_ID)
            changed = self._update(member, j)
            if not changed and group.state == COMPLETING:
                return self._join_response(group, member, version)
            if not changed and group.state == STABLE and group.leader != member_id:
                return self._join_response(group, member, version)
        if group.protocol_type is None:
            group.protocol_type = j.protocol_type
        member.deadline = now + j.session_timeout
        return self._await_join(group, member, defer, now)

    @staticmethod
    def _update(member: Member, j: JoinRequest) -> bool:
        """Take the join's protocols and timeouts; whether the protocols changed."""
        changed = not _same_protocols(member.protocols, j.protocols)
        member.protocols = list(j.protocols)
        member.session_timeout, member.rebalance_timeout = j.session_timeout, j.rebalance_timeout
        return changed

    def _await_join(
        self, group: ClassicGroup, member: Member, defer: Callable[[], Deferred], now: int
    ) -> Deferred:
        d = defer()
        member.join = d
        if group.state != PREPARING:
            self._prepare(group, now)
        self._maybe_complete_join(group, now)
        return d

    def _static_rejoin(
        self,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        j: JoinRequest,
        *,
        defer: Callable[[], Deferred],
        version: int,
        now: int,
    ) -> Any:
        member = group.members.pop(old_id)
        for d in (member.join, member.sync):
            if d is not None:
                d.resolve(_error_for(d, codes.FENCED_INSTANCE_ID))
        member.join = member.sync = None
        member.member_id = new_id
        group.members[new_id] = member
        assert member.instance_id is not None
        group.static[member.instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        changed = self._update(member, j)
        member.deadline = now + j.session_timeout
        if group.state == STABLE and not changed:
            return self._join_response(group, member, version)
        return self._await_join(group, member, defer, now)

    def _common(self, group: ClassicGroup, j: JoinRequest) -> bool:
        names = {n for n, _ in j.protocols}
        for m in group.members.values():
            if m.member_id != j.member_id:
                names &= {n for n, _ in m.protocols}
        return bool(names)

    def _prepare(self, group: ClassicGroup, now: int) -> None:
        if group.state == COMPLETING:
            for m in group.members.values():
                if m.sync is not None:
                    m.sync.resolve(SyncGroupResponse(error_code=codes.REBALANCE_IN_PROGRESS))
                    m.sync = None
        group.state = PREPARING
        timeout = max((m.rebalance_timeout for m in group.members.values()), default=0)
        delay = self.cluster.state.conf_int("group.initial.rebalance.delay.ms")
        group.rebalance_deadline = now + max(timeout, delay)

    def _maybe_complete_join(
        self, group: ClassicGroup, now: int, *, timed_out: bool = False
    ) -> None:
        if group.state != PREPARING:
            return
        waiting = [m for m in group.members.values() if m.join is None]
        if (waiting or group.pending) and not timed_out:
            return
        for m in waiting:
            self._remove(group, m)
        group.pending.clear()
        group.generation += 1
        group.rebalance_deadline = None
        if not group.members:
            group.state, group.protocol, group.leader, group.protocol_type = EMPTY, None, None, None
            return
        group.protocol = self._vote(group)
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = COMPLETING
        for m in group.members.values():
            m.deadline = now + m.session_timeout
            m.assignment = b""
            d = m.join
            m.join = None
            if d is not None:
                d.resolve(self._join_response(group, m, d.version))

    def _vote(self, group: ClassicGroup) -> str:
        members = list(group.members.values())
        common = {n for n, _ in members[0].protocols}
        for m in members[1:]:
            common &= {n for n, _ in m.protocols}
        votes: Counter[str] = Counter()
        for m in members:
            votes[next(n for n, _ in m.protocols if n in common)] += 1
        order = [n for n, _ in members[0].protocols if n in common]
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def _join_response(self, group: ClassicGroup, m: Member, version: int) -> Any:
        leader = m.member_id == group.leader
        members = []
        if leader:
            members = [
                JGR.JoinGroupResponseMember(
                    member_id=o.member_id,
                    group_instance_id=o.instance_id,
                    metadata=o.metadata_for(group.protocol),
                )
                for o in group.members.values()
            ]
        return JGR(
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol,
            leader=group.leader or "",
            member_id=m.member_id,
            members=members,
        )

    # ------------------------------------------------------------ sync, heartbeat, leave

    def member(self, group_id: str, member_id: str, instance_id: str | None) -> Member:
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            raise ApiError(codes.UNKNOWN_MEMBER_ID, f"no group {group_id}")
        if instance_id is not None:
            known = group.static.get(instance_id)
            if known is not None and known != member_id:
                raise ApiError(codes.FENCED_INSTANCE_ID)
        m = group.members.get(member_id)
        if m is None:
            raise ApiError(codes.UNKNOWN_MEMBER_ID, f"{member_id} is not a member of {group_id}")
        return m

    def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        *,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        defer: Callable[[], Deferred],
        now: int,
    ) -> Any:
        m = self.member(group_id, member_id, instance_id)
        group = self.groups[group_id]
        if generation != group.generation:
            raise ApiError(codes.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol
        ):
            raise ApiError(codes.INCONSISTENT_GROUP_PROTOCOL)
        m.deadline = now + m.session_timeout
        if group.state == PREPARING:
            raise ApiError(codes.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            return self._sync_response(group, m)
        d = defer()
        m.sync = d
        if member_id == group.leader:
            for other in group.members.values():
                other.assignment = bytes(assignments.get(other.member_id, b""))
            group.state = STABLE
            for other in group.members.values():
                if other.sync is not None:
                    other.sync.resolve(self._sync_response(group, other))
                    other.sync = None
        return d

    def _sync_response(self, group: ClassicGroup, m: Member) -> Any:
        return SyncGroupResponse(
            protocol_type=group.protocol_type, protocol_name=group.protocol, assignment=m.assignment
        )

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, *, generation: int, now: int
    ) -> int:
        m = self.member(group_id, member_id, instance_id)
        group = self.groups[group_id]
        if generation != group.generation:
            return codes.ILLEGAL_GENERATION
        m.deadline = now + m.session_timeout
        if group.state == PREPARING:
            return codes.REBALANCE_IN_PROGRESS
        return codes.NONE

    def leave(self, group_id: str, member_id: str, instance_id: str | None, now: int) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return codes.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            known = group.static.get(instance_id)
            if known is None:
                return codes.UNKNOWN_MEMBER_ID
            if member_id and known != member_id:
                return codes.FENCED_INSTANCE_ID
            member_id = known
        m = group.members.get(member_id)
        if m is None:
            return codes.UNKNOWN_MEMBER_ID
        self._remove(group, m)
        self._rebalance(group, now)
        return codes.NONE

    def _remove(self, group: ClassicGroup, m: Member) -> None:
        group.members.pop(m.member_id, None)
        if m.instance_id is not None and group.static.get(m.instance_id) == m.member_id:
            del group.static[m.instance_id]
        for d in (m.join, m.sync):
            if d is not None and not d.done:
                d.resolve(_error_for(d, codes.UNKNOWN_MEMBER_ID))
        if group.leader == m.member_id:
            group.leader = None

    def _rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.state in (STABLE, COMPLETING, EMPTY):
            self._prepare(group, now)
        self._maybe_complete_join(group, now)

    # ------------------------------------------------------------ time and moves

    def tick(self, now: int) -> None:
        for group in list(self.groups.values()):
            for mid, deadline in list(group.pending.items()):
                if deadline <= now:
                    del group.pending[mid]
            expired = [
                m
                for m in group.members.values()
                if m.join is None and m.sync is None and m.deadline <= now
            ]
            for m in expired:
                self._remove(group, m)
            if expired:
                self._rebalance(group, now)
            elif group.state == PREPARING:
                late = group.rebalance_deadline is not None and group.rebalance_deadline <= now
                self._maybe_complete_join(group, now, timed_out=late)

    def next_deadline(self) -> int | None:
        times: list[int] = []
        for group in self.groups.values():
            times.extend(group.pending.values())
            times.extend(
                m.deadline for m in group.members.values() if m.join is None and m.sync is None
            )
            if group.state == PREPARING and group.rebalance_deadline is not None:
                times.append(group.rebalance_deadline)
        return min(times) if times else None

    def coordinator_moved(self, group_id: str) -> None:
        """The group's coordinator moved: what waits on the old one gets NOT_COORDINATOR."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for m in group.members.values():
            for d in (m.join, m.sync):
                if d is not None and not d.done:
                    d.resolve(_error_for(d, codes.NOT_COORDINATOR))
            m.join = m.sync = None

    def delete(self, group_id: str) -> None:
        self.groups.pop(group_id, None)


def _error_for(d: Deferred, code: int) -> Any:
    response: Any = REQUESTS[d.header.api_key].RESPONSE()
    response.error_code = code
    return response
