"""Committed offsets: the store, and OffsetCommit (v2-v10), OffsetFetch (v1-v10), OffsetDelete.

Role: each group's committed offsets ((topic, partition) -> offset, leader
epoch, metadata) and the offsets a transaction has staged for it
(TxnOffsetCommit; applied on commit, dropped on abort, and UNSTABLE_OFFSET_COMMIT
for an OffsetFetch with ``require_stable`` meanwhile).

OffsetCommit checks the committer as Kafka does: a classic group's member id and
generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while
the group completes a rebalance, FENCED_INSTANCE_ID), a KIP-848 member's id and
epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); generation -1 with no member id
commits for a group without members (a "simple" consumer or an admin). Topics by
name, or by id from v10. OffsetFetch reads one group (v1-v7) or several (v8+),
all its partitions when no topic is named; a partition never committed has
offset -1.

Imports: kpax.testing.fake.{codes,context}, kpax.proto.messages and the standard library.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kpax.proto.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import Ctx

__all__ = ["HANDLERS", "Committed", "CommittedOffsets"]

OCR = OffsetCommitResponse
OFR = OffsetFetchResponse
GROUP = 0
#: offset.metadata.max.bytes
MAX_METADATA = 4096

TP = tuple[str, int]


@dataclass(frozen=True)
class Committed:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class CommittedOffsets:
    """group -> (topic, partition) -> Committed; and staged transactional offsets."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[TP, Committed]] = {}
        #: group -> producer id -> staged offsets
        self.staged: dict[str, dict[int, dict[TP, Committed]]] = {}

    def has_group(self, group_id: str) -> bool:
        return bool(self.groups.get(group_id))

    def group_ids(self) -> list[str]:
        return [g for g, offsets in self.groups.items() if offsets]

    def commit(self, group_id: str, offsets: dict[TP, Committed]) -> None:
        self.groups.setdefault(group_id, {}).update(offsets)

    def get(self, group_id: str) -> dict[TP, Committed]:
        return self.groups.get(group_id, {})

    def delete_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)
        self.staged.pop(group_id, None)

    def delete_topic(self, topic: str) -> None:
        for offsets in self.groups.values():
            for tp in [tp for tp in offsets if tp[0] == topic]:
                del offsets[tp]

    def stage(self, group_id: str, producer_id: int, offsets: dict[TP, Committed]) -> None:
        self.staged.setdefault(group_id, {}).setdefault(producer_id, {}).update(offsets)

    def end_txn(self, group_id: str, producer_id: int, commit: bool) -> None:
        staged = self.staged.get(group_id, {}).pop(producer_id, None)
        if commit and staged:
            self.commit(group_id, staged)

    def unstable(self, group_id: str, tp: TP) -> bool:
        return any(tp in offsets for offsets in self.staged.get(group_id, {}).values())


def validate_commit(
    ctx: Ctx, group_id: str, member_id: str, generation: int, instance_id: str | None
) -> int:
    """The error an offset commit by this member gets (NONE when it may commit)."""
    cluster = ctx.cluster
    modern = cluster.consumer_groups.groups.get(group_id)
    if modern is not None:
        return cluster.consumer_groups.validate_commit(modern, member_id, generation)
    group = cluster.groups.groups.get(group_id)
    if group is None or not group.members:
        if generation < 0 and not member_id:
            return codes.NONE
        return codes.UNKNOWN_MEMBER_ID
    if generation < 0 and not member_id and instance_id is None:
        return codes.UNKNOWN_MEMBER_ID
    try:
        cluster.groups.member(group_id, member_id, instance_id)
    except ApiError as exc:
        return exc.code
    if generation != group.generation:
        return codes.ILLEGAL_GENERATION
    if group.state == "CompletingRebalance":
        return codes.REBALANCE_IN_PROGRESS
    return codes.NONE


def _topic_name(ctx: Ctx, name: str, topic_id: uuid.UUID, by_id: bool) -> str | None:
    if by_id:
        t = ctx.cluster.state.by_id.get(topic_id)
        return t.name if t is not None else None
    return name if name in ctx.cluster.state.topics else None


def offset_commit(ctx: Ctx, req: OffsetCommitRequest) -> Any:
    v = ctx.version
    by_id = v >= 10
    error = ctx.coordinator_error(GROUP, req.group_id)
    if not error and not req.group_id:
        error = codes.INVALID_GROUP_ID
    if not error:
        error = validate_commit(
            ctx,
            req.group_id,
            req.member_id,
            req.generation_id_or_member_epoch,
            req.group_instance_id if v >= 7 else None,
        )
    commits: dict[TP, Committed] = {}
    topics = []
    for t in req.topics:
        name = _topic_name(ctx, t.name, t.topic_id, by_id)
        parts = []
        for p in t.partitions:
            code = error or ctx.forced(name or t.name, p.partition_index) or codes.NONE
            topic = ctx.cluster.state.topic(name)
            if not code and (topic is None or not 0 <= p.partition_index < len(topic.partitions)):
                code = codes.UNKNOWN_TOPIC_ID if by_id else codes.UNKNOWN_TOPIC_OR_PARTITION
            if not code and len((p.committed_metadata or "").encode()) > MAX_METADATA:
                code = codes.OFFSET_METADATA_TOO_LARGE
            if not code and name is not None:
                commits[(name, p.partition_index)] = Committed(
                    p.committed_offset,
                    p.committed_leader_epoch if v >= 6 else -1,
                    p.committed_metadata,
                )
            parts.append(
                OCR.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=code
                )
            )
        topics.append(
            OCR.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=parts)
        )
    if commits:
        ctx.cluster.offsets.commit(req.group_id, commits)
    return OCR(topics=topics)


def _fetch_group(
    ctx: Ctx, group_id: str, topics: list[Any] | None, require_stable: bool, by_id: bool
) -> tuple[int, list[tuple[str, uuid.UUID, list[Any]]]]:
    """(group error, [(topic name, topic id, partition answers)])."""
    offsets = ctx.cluster.offsets
    error = ctx.coordinator_error(GROUP, group_id) or ctx.forced(None) or codes.NONE
    if error:
        return error, []
    committed = offsets.get(group_id)
    wanted: list[tuple[str, uuid.UUID, list[int]]] = []
    state = ctx.cluster.state
    if topics is None:
        names: dict[str, list[int]] = {}
        for t, p in sorted(committed):
            names.setdefault(t, []).append(p)
        for name, parts in names.items():
            topic = state.topic(name)
            wanted.append((name, topic.topic_id if topic else uuid.UUID(int=0), parts))
    else:
        for t in topics:
            found = _topic_name(ctx, t.name, t.topic_id, by_id) if by_id else t.name
            wanted.append(
                (found or "", t.topic_id if by_id else uuid.UUID(int=0), list(t.partition_indexes))
            )
    out = []
    for name, tid, parts in wanted:
        answers = []
        for p in parts:
            c = committed.get((name, p))
            code = codes.NONE
            if require_stable and offsets.unstable(group_id, (name, p)):
                code = codes.UNSTABLE_OFFSET_COMMIT
            if by_id and not name:
                code = codes.UNKNOWN_TOPIC_ID
            answers.append(
                (
                    p,
                    c.offset if c else -1,
                    c.leader_epoch if c else -1,
                    c.metadata if c else "",
                    code,
                )
            )
        out.append((name, tid, answers))
    return error, out


def offset_fetch(ctx: Ctx, req: OffsetFetchRequest) -> Any:
    v = ctx.version
    if v < 8:
        error, topics = _fetch_group(
            ctx, req.group_id, req.topics, v >= 7 and req.require_stable, False
        )
        return OFR(
            error_code=error,
            topics=[
                OFR.OffsetFetchResponseTopic(
                    name=name,
                    partitions=[
                        OFR.OffsetFetchResponsePartition(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=e,
                            metadata=m,
                            error_code=c,
                        )
                        for p, o, e, m, c in parts
                    ],
                )
                for name, _tid, parts in topics
            ],
        )
    groups = []
    for g in req.groups:
        error, topics = _fetch_group(ctx, g.group_id, g.topics, req.require_stable, v >= 10)
        if not error and v >= 9 and g.member_id is not None:
            modern = ctx.cluster.consumer_groups.groups.get(g.group_id)
            if modern is not None:
                error = ctx.cluster.consumer_groups.validate_commit(
                    modern, g.member_id, g.member_epoch
                )
        groups.append(
            OFR.OffsetFetchResponseGroup(
                group_id=g.group_id,
                error_code=error,
                topics=[]
                if error
                else [
                    OFR.OffsetFetchResponseTopics(
                        name=name,
                        topic_id=tid,
                        partitions=[
                            OFR.OffsetFetchResponsePartitions(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=e,
                                metadata=m,
                                error_code=c,
                            )
                            for p, o, e, m, c in parts
                        ],
                    )
                    for name, tid, parts in topics
                ],
            )
        )
    return OFR(groups=groups)


def offset_delete(ctx: Ctx, req: OffsetDeleteRequest) -> Any:
    cluster = ctx.cluster
    error = ctx.coordinator_error(GROUP, req.group_id)
    if not error and not cluster.offsets.has_group(req.group_id):
        error = codes.GROUP_ID_NOT_FOUND
    if error:
        return OffsetDeleteResponse(error_code=error)
    committed = cluster.offsets.get(req.group_id)
    subscribed = cluster.consumer_groups.subscribed_topics(req.group_id)
    classic = cluster.groups.groups.get(req.group_id)
    busy = classic is not None and bool(classic.members)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = ctx.forced(t.name, p.partition_index) or codes.NONE
            if not code and (busy or t.name in subscribed):
                code = codes.GROUP_SUBSCRIBED_TO_TOPIC
            if not code:
                committed.pop((t.name, p.partition_index), None)
            parts.append(
                OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=code
                )
            )
        topics.append(OffsetDeleteResponse.OffsetDeleteResponseTopic(name=t.name, partitions=parts))
    return OffsetDeleteResponse(topics=topics)


HANDLERS = {
    OffsetCommitRequest.API_KEY: (offset_commit, 2, 10, True),
    OffsetFetchRequest.API_KEY: (offset_fetch, 1, 10, True),
    OffsetDeleteRequest.API_KEY: (offset_delete, 0, 0, True),
}
