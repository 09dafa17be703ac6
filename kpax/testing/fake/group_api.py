"""Handlers: the classic group APIs and the group listing and deletion.

Role: JoinGroup (v0-v9), SyncGroup (v0-v5), Heartbeat (v0-v4), LeaveGroup
(v0-v5), DescribeGroups (v0-v6), ListGroups (v0-v5), DeleteGroups (v0-v2) over
:class:`~kpax.testing.fake.groups.ClassicGroups` (the state machine) and the
KIP-848 groups of :mod:`kpax.testing.fake.consumer_groups` and the share
groups of :mod:`kpax.testing.fake.share_groups` (listed, deleted). A group
request to a broker that does not coordinate the group gets NOT_COORDINATOR; a
classic join to a KIP-848 group with members, or to a share group,
INCONSISTENT_GROUP_PROTOCOL.

Imports: kpax.testing.fake.{codes,context,groups}, kpax.proto.messages.
"""

from __future__ import annotations

from typing import Any

from kpax.proto.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import DEFERRED, Ctx, Deferred
from kpax.testing.fake.groups import EMPTY, JoinRequest

__all__ = ["HANDLERS"]

DGR = DescribeGroupsResponse
LGR = ListGroupsResponse
GROUP = 0


def join_group(ctx: Ctx, req: JoinGroupRequest) -> Any:
    v = ctx.version
    error = ctx.coordinator_error(GROUP, req.group_id)
    modern = ctx.cluster.consumer_groups.groups.get(req.group_id)
    if not error and req.group_id in ctx.cluster.share_groups.groups:
        error = codes.INCONSISTENT_GROUP_PROTOCOL
    if not error and modern is not None:
        if modern.members:
            error = codes.INCONSISTENT_GROUP_PROTOCOL
        else:  # an empty KIP-848 group becomes a classic one, as on Kafka
            ctx.cluster.consumer_groups.delete(req.group_id)
    if error:
        return JoinGroupResponse(error_code=error, member_id=req.member_id)
    try:
        j = JoinRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            instance_id=req.group_instance_id if v >= 5 else None,
            client_id=ctx.client_id,
            session_timeout=req.session_timeout_ms,
            rebalance_timeout=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        )
        result = ctx.cluster.groups.join(j, defer=ctx.defer, version=v, now=ctx.now_ms)
    except ApiError as exc:
        return JoinGroupResponse(error_code=exc.code, member_id=req.member_id)
    return DEFERRED if isinstance(result, Deferred) else result


def sync_group(ctx: Ctx, req: SyncGroupRequest) -> Any:
    v = ctx.version
    error = ctx.coordinator_error(GROUP, req.group_id)
    if error:
        return SyncGroupResponse(error_code=error)
    try:
        result = ctx.cluster.groups.sync(
            req.group_id,
            req.member_id,
            req.group_instance_id if v >= 3 else None,
            generation=req.generation_id,
            protocol_type=req.protocol_type if v >= 5 else None,
            protocol_name=req.protocol_name if v >= 5 else None,
            assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
            defer=ctx.defer,
            now=ctx.now_ms,
        )
    except ApiError as exc:
        return SyncGroupResponse(error_code=exc.code)
    return DEFERRED if isinstance(result, Deferred) else result


def heartbeat(ctx: Ctx, req: HeartbeatRequest) -> Any:
    error = ctx.coordinator_error(GROUP, req.group_id)
    if not error:
        try:
            error = ctx.cluster.groups.heartbeat(
                req.group_id,
                req.member_id,
                req.group_instance_id if ctx.version >= 3 else None,
                generation=req.generation_id,
                now=ctx.now_ms,
            )
        except ApiError as exc:
            error = exc.code
    return HeartbeatResponse(error_code=error)


def leave_group(ctx: Ctx, req: LeaveGroupRequest) -> Any:
    groups = ctx.cluster.groups
    error = ctx.coordinator_error(GROUP, req.group_id)
    if error:
        return LeaveGroupResponse(error_code=error)
    if ctx.version < 3:
        return LeaveGroupResponse(
            error_code=groups.leave(req.group_id, req.member_id, None, ctx.now_ms)
        )
    members = []
    for m in req.members:
        code = groups.leave(req.group_id, m.member_id, m.group_instance_id, ctx.now_ms)
        members.append(
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
            )
        )
    return LeaveGroupResponse(members=members)


def describe_groups(ctx: Ctx, req: DescribeGroupsRequest) -> Any:
    cluster = ctx.cluster
    out = []
    for group_id in req.groups:
        d = DGR.DescribedGroup(group_id=group_id, group_state="Dead")
        error = ctx.forced() or ctx.coordinator_error(GROUP, group_id)
        group = cluster.groups.groups.get(group_id)
        if error:
            d.error_code = error
        elif group is not None:
            d.group_state = group.state
            d.protocol_type = group.protocol_type or ""
            d.protocol_data = group.protocol or ""
            d.members = [
                DGR.DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata_for(group.protocol),
                    member_assignment=m.assignment,
                )
                for m in group.members.values()
            ]
        elif group_id in cluster.consumer_groups.groups:
            if ctx.version >= 6:
                d.error_code = codes.GROUP_ID_NOT_FOUND
                d.error_message = f"group {group_id} is not a classic group"
        elif cluster.offsets.has_group(group_id):
            d.group_state = EMPTY
            d.protocol_type = "consumer"
        elif ctx.version >= 6:
            d.error_code = codes.GROUP_ID_NOT_FOUND
            d.error_message = f"group {group_id} not found"
        out.append(d)
    return DGR(groups=out)


def list_groups(ctx: Ctx, req: ListGroupsRequest) -> Any:
    cluster = ctx.cluster
    v = ctx.version
    states = {s.lower() for s in req.states_filter} if v >= 4 else set()
    types = {t.lower() for t in req.types_filter} if v >= 5 else set()
    listed: dict[str, Any] = {}
    for gid, g in cluster.groups.groups.items():
        if g.state != "Dead":
            listed[gid] = LGR.ListedGroup(
                group_id=gid,
                protocol_type=g.protocol_type or "consumer",
                group_state=g.state,
                group_type="classic",
            )
    for gid, cg in cluster.consumer_groups.groups.items():
        listed[gid] = LGR.ListedGroup(
            group_id=gid, protocol_type="consumer", group_state=cg.state_name, group_type="consumer"
        )
    for gid, sg in cluster.share_groups.groups.items():
        listed[gid] = LGR.ListedGroup(
            group_id=gid, protocol_type="share", group_state=sg.state_name, group_type="share"
        )
    for gid in cluster.offsets.group_ids():
        if gid not in listed:
            listed[gid] = LGR.ListedGroup(
                group_id=gid, protocol_type="consumer", group_state=EMPTY, group_type="classic"
            )
    groups = [
        g
        for gid, g in sorted(listed.items())
        if ctx.cluster.state.coordinator(GROUP, gid) == ctx.node_id
        and (not states or g.group_state.lower() in states)
        and (not types or g.group_type.lower() in types)
    ]
    return LGR(error_code=ctx.forced() or codes.NONE, groups=groups)


def delete_groups(ctx: Ctx, req: DeleteGroupsRequest) -> Any:
    cluster = ctx.cluster
    results = []
    for gid in req.groups_names:
        error = ctx.forced() or ctx.coordinator_error(GROUP, gid)
        found = [
            g
            for g in (
                cluster.groups.groups.get(gid),
                cluster.consumer_groups.groups.get(gid),
                cluster.share_groups.groups.get(gid),
            )
            if g is not None
        ]
        if error:
            pass
        elif any(g.members for g in found):
            error = codes.NON_EMPTY_GROUP
        elif not found and not cluster.offsets.has_group(gid):
            error = codes.GROUP_ID_NOT_FOUND
        else:
            cluster.groups.delete(gid)
            cluster.consumer_groups.delete(gid)
            cluster.share_groups.delete(gid)
            cluster.offsets.delete_group(gid)
        results.append(DeleteGroupsResponse.DeletableGroupResult(group_id=gid, error_code=error))
    return DeleteGroupsResponse(results=results)


HANDLERS = {
    JoinGroupRequest.API_KEY: (join_group, 0, 9, False),
    SyncGroupRequest.API_KEY: (sync_group, 0, 5, False),
    HeartbeatRequest.API_KEY: (heartbeat, 0, 4, False),
    LeaveGroupRequest.API_KEY: (leave_group, 0, 5, False),
    DescribeGroupsRequest.API_KEY: (describe_groups, 0, 6, True),
    ListGroupsRequest.API_KEY: (list_groups, 0, 5, True),
    DeleteGroupsRequest.API_KEY: (delete_groups, 0, 2, True),
}
