"""Share groups' records: share partitions, share sessions, ShareFetch and ShareAcknowledge (v1-v2).

Role: the delivery state of KIP-932. A share partition (group, topic,
partition) starts at ``share.auto.offset.reset`` (``latest`` by default, or an
offset set with AlterShareGroupOffsets) and tracks each in-flight record:
AVAILABLE, ACQUIRED (by a member, until its lock ends), ACKNOWLEDGED or
ARCHIVED, with its delivery count. A ShareFetch acquires AVAILABLE records in
offset order (at most ``max_records``, and no more than
``group.share.partition.max.record.locks`` held at a time in a partition), for
``share.record.lock.duration.ms``;
the answer carries the whole stored batches that hold them and the acquired
ranges with their delivery counts. Acknowledgements (in a ShareFetch or a
ShareAcknowledge): ACCEPT, RELEASE (available again; archived once the
delivery count reaches ``share.delivery.count.limit``), REJECT, GAP (archived)
and RENEW (v2: the lock starts again); one not held by the member is
INVALID_RECORD_STATE. A lock that ends releases the record as RELEASE does.
The start offset moves past acknowledged and archived records. Control records
are archived; ``share.isolation.level=read_committed`` stops at the last stable
offset and archives aborted records.

Share sessions, per broker and member: epoch 0 opens one (no acknowledgements
in it), then 1, 2, ... (the request's partitions added, forgotten ones
removed); -1 closes it, after its acknowledgements, releasing what the member
holds on that broker's partitions. SHARE_SESSION_NOT_FOUND and
INVALID_SHARE_SESSION_EPOCH as Kafka. A ShareFetch that acquires nothing waits
up to ``max_wait_ms`` (a long poll) for records or released locks.

Imports: kpax.testing.fake.{codes,context,log,state}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kpax.proto.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.context import DEFERRED, Ctx, Waiter
from kpax.testing.fake.log import PartitionLog
from kpax.testing.fake.state import leader_check

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["HANDLERS", "SharePartition", "SharePartitions"]

SFR = ShareFetchResponse
SAR = ShareAcknowledgeResponse
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "available", "acquired", "acknowledged", "archived"
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_INT32_MAX = 2**31 - 1
SPKey = tuple[str, str, int]  # group, topic, partition


@dataclass
class InFlight:
    state: str
    delivery: int = 0
    owner: str | None = None
    deadline: int = 0


@dataclass
class SharePartition:
    #: the first offset not yet acknowledged or archived
    start: int
    #: offsets at and after it were never acquired
    end: int
    inflight: dict[int, InFlight] = field(default_factory=dict)

    def advance(self) -> None:
        while self.start < self.end:
            rec = self.inflight.get(self.start)
            if rec is not None and rec.state not in (ACKNOWLEDGED, ARCHIVED):
                return
            self.inflight.pop(self.start, None)
            self.start += 1


class SharePartitions:
    """Every share partition of the cluster, and the share sessions."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.parts: dict[SPKey, SharePartition] = {}
        #: (node id, group, member) -> [next epoch, {(topic id, partition)}]
        self.sessions: dict[
            tuple[int, str, str], tuple[int, dict[tuple[uuid.UUID, int], None]]
        ] = {}

    def _conf(self, group: str, name: str) -> str:
        return self.cluster.group_config(group, name)

    def ensure(self, group: str, topic: str, partition: int) -> None:
        """The group is assigned the partition: it has share state, not yet a start
        offset (-1) until a member reads it."""
        self.parts.setdefault((group, topic, partition), SharePartition(-1, -1))

    def get(self, group: str, topic: str, partition: int, log: PartitionLog) -> SharePartition:
        sp = self.parts.get((group, topic, partition))
        if sp is None or sp.start < 0:
            earliest = self._conf(group, "share.auto.offset.reset") == "earliest"
            first = log.log_start_offset if earliest else log.high_watermark
            sp = self.parts[(group, topic, partition)] = SharePartition(first, first)
        if sp.start < log.log_start_offset:
            for off in range(sp.start, min(sp.end, log.log_start_offset)):
                sp.inflight.pop(off, None)
            sp.start = log.log_start_offset
            sp.end = max(sp.end, sp.start)
        return sp

    def acquire(
        self,
        group: str,
        member: str,
        topic: str,
        partition: int,
        log: PartitionLog,
        *,
        max_records: int,
        now: int,
    ) -> tuple[list[tuple[int, int, int]], list[bytes]]:
        """Acquire up to ``max_records``: (acquired (first, last, delivery) ranges,
        the stored batches holding them)."""
        sp = self.get(group, topic, partition, log)
        lock = int(self._conf(group, "share.record.lock.duration.ms"))
        committed = self._conf(group, "share.isolation.level") == "read_committed"
        upper = log.last_stable_offset if committed else log.high_watermark
        locks = self.cluster.state.conf_int("group.share.partition.max.record.locks")
        held = sum(1 for r in sp.inflight.values() if r.state == ACQUIRED)
        max_records = min(max_records, max(0, locks - held))
        got: list[int] = []
        for off in range(sp.start, min(sp.end, upper)):
            if len(got) >= max_records:
                break
            rec = sp.inflight.get(off)
            if rec is not None and rec.state == AVAILABLE:
                got.append(off)
        i = log.index_of(sp.end)
        while len(got) < max_records and i < len(log.batches) and sp.end < upper:
            b = log.batches[i]
            aborted = (
                committed
                and b.transactional
                and any(
                    pid == b.producer_id and first <= b.base_offset <= last
                    for pid, first, last in log.aborted
                )
            )
            for off in range(max(b.base_offset, sp.end), b.last_offset + 1):
                if b.control or aborted:
                    sp.inflight[off] = InFlight(ARCHIVED)
                elif len(got) < max_records:
                    sp.inflight[off] = InFlight(AVAILABLE)
                    got.append(off)
                else:
                    break
                sp.end = off + 1
            i += 1
        ranges: list[tuple[int, int, int]] = []
        for off in got:
            rec = sp.inflight[off]
            rec.state, rec.owner, rec.deadline = ACQUIRED, member, now + lock
            rec.delivery += 1
            if ranges and ranges[-1][1] == off - 1 and ranges[-1][2] == rec.delivery:
                ranges[-1] = (ranges[-1][0], off, rec.delivery)
            else:
                ranges.append((off, off, rec.delivery))
        sp.advance()
        batches: list[bytes] = []
        seen: set[int] = set()
        for off in got:
            j = log.index_of(off)
            if j not in seen:
                seen.add(j)
                batches.append(log.batches[j].data)
        return ranges, batches

    def acknowledge(
        self,
        group: str,
        member: str,
        topic: str,
        partition: int,
        log: PartitionLog,
        *,
        batches: list[Any],
        now: int,
    ) -> int:
        """Apply acknowledgement batches; the partition's acknowledge error code."""
        sp = self.get(group, topic, partition, log)
        limit = int(self._conf(group, "share.delivery.count.limit"))
        lock = int(self._conf(group, "share.record.lock.duration.ms"))
        error = codes.NONE
        for b in batches:
            types = list(b.acknowledge_types)
            count = b.last_offset - b.first_offset + 1
            if count <= 0 or len(types) not in (1, count):
                error = codes.INVALID_REQUEST
                continue
            for k, off in enumerate(range(b.first_offset, b.last_offset + 1)):
                kind = types[0] if len(types) == 1 else types[k]
                rec = sp.inflight.get(off)
                if rec is None or rec.state != ACQUIRED or rec.owner != member:
                    error = codes.INVALID_RECORD_STATE
                    continue
                if kind == ACCEPT:
                    rec.state, rec.owner = ACKNOWLEDGED, None
                elif kind == RELEASE:
                    rec.state = ARCHIVED if rec.delivery >= limit else AVAILABLE
                    rec.owner = None
                elif kind in (REJECT, GAP):
                    rec.state, rec.owner = ARCHIVED, None
                elif kind == RENEW:
                    rec.deadline = now + lock
                else:
                    error = codes.INVALID_REQUEST
        sp.advance()
        return error

    def _release(self, sp: SharePartition, limit: int, owner: str | None, now: int | None) -> None:
        for rec in sp.inflight.values():
            if rec.state != ACQUIRED:
                continue
            if (owner is not None and rec.owner == owner) or (
                now is not None and rec.deadline <= now
            ):
                rec.state = ARCHIVED if rec.delivery >= limit else AVAILABLE
                rec.owner = None
        sp.advance()

    def release_member(self, group: str, member: str, node_id: int | None = None) -> None:
        """Release what ``member`` holds (on the partitions ``node_id`` leads)."""
        limit = int(self._conf(group, "share.delivery.count.limit"))
        for (g, topic, p), sp in self.parts.items():
            if g != group:
                continue
            if node_id is not None:
                part = self.cluster.state.partition(topic, p)
                if part is None or part.leader != node_id:
                    continue
            self._release(sp, limit, member, None)

    def tick(self, now: int) -> None:
        for (g, _t, _p), sp in self.parts.items():
            self._release(sp, int(self._conf(g, "share.delivery.count.limit")), None, now)

    def next_deadline(self) -> int | None:
        times = [
            r.deadline
            for sp in self.parts.values()
            for r in sp.inflight.values()
            if r.state == ACQUIRED
        ]
        return min(times) if times else None

    def start_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> start offset (-1: assigned, not read yet)."""
        return {(t, p): sp.start for (g, t, p), sp in self.parts.items() if g == group}

    def set_start(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.parts[(group, topic, partition)] = SharePartition(offset, offset)

    def delete_topic(self, group: str, topic: str) -> None:
        for key in [k for k in self.parts if k[0] == group and k[1] == topic]:
            del self.parts[key]

    def delete_group(self, group: str) -> None:
        for key in [k for k in self.parts if k[0] == group]:
            del self.parts[key]


# ------------------------------------------------------------ handlers


def _session(
    ctx: Ctx, group: str, member: str, epoch: int, *, topics: list[Any], forgotten: list[Any]
) -> tuple[int, dict[tuple[uuid.UUID, int], None] | None]:
    """(error, the session's partitions) after this request's epoch rules."""
    sessions = ctx.cluster.share_partitions.sessions
    key = (ctx.node_id, group, member)
    named = {(t.topic_id, p.partition_index): None for t in topics for p in t.partitions}
    if epoch == 0:
        sessions[key] = (1, dict(named))
        return codes.NONE, sessions[key][1]
    entry = sessions.get(key)
    if entry is None:
        return codes.SHARE_SESSION_NOT_FOUND, None
    expected, parts = entry
    if epoch == -1:
        del sessions[key]
        return codes.NONE, parts
    if epoch != expected:
        return codes.INVALID_SHARE_SESSION_EPOCH, None
    for f in forgotten:
        for p in f.partitions:
            parts.pop((f.topic_id, p), None)
    parts.update(named)
    sessions[key] = (epoch + 1 if epoch < _INT32_MAX else 1, parts)
    return codes.NONE, parts


def _acks(ctx: Ctx, group: str, member: str, topics: list[Any]) -> dict[tuple[uuid.UUID, int], int]:
    state = ctx.cluster.state
    out = {}
    for t in topics:
        topic = state.by_id.get(t.topic_id)
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            part, error = leader_check(state, ctx.node_id, topic, p.partition_index)
            if not error and part is not None and topic is not None:
                error = ctx.cluster.share_partitions.acknowledge(
                    group,
                    member,
                    topic.name,
                    p.partition_index,
                    part.log,
                    batches=list(p.acknowledgement_batches),
                    now=ctx.now_ms,
                )
            out[(t.topic_id, p.partition_index)] = error
    return out


def share_fetch(ctx: Ctx, req: ShareFetchRequest) -> Any:
    cluster = ctx.cluster
    group, member, epoch = req.group_id or "", req.member_id or "", req.share_session_epoch
    if not group or not member:
        return SFR(error_code=codes.INVALID_REQUEST, error_message="no group or member id")
    if epoch == 0 and any(p.acknowledgement_batches for t in req.topics for p in t.partitions):
        return SFR(error_code=codes.INVALID_REQUEST, error_message="acknowledgements at epoch 0")
    error, parts = _session(
        ctx, group, member, epoch, topics=req.topics, forgotten=req.forgotten_topics_data
    )
    if error or parts is None:
        return SFR(error_code=error)
    acks = _acks(ctx, group, member, req.topics)
    lock = int(cluster.group_config(group, "share.record.lock.duration.ms"))
    if epoch == -1:
        cluster.share_partitions.release_member(group, member, ctx.node_id)
        return _answer(ctx, {}, acks, {}, lock)
    plan = list(parts)
    max_records = req.max_records if req.max_records > 0 else _INT32_MAX

    def build(final: bool) -> Any:
        got: dict[tuple[uuid.UUID, int], tuple[list[tuple[int, int, int]], list[bytes]]] = {}
        errors: dict[tuple[uuid.UUID, int], int] = {}
        budget = max_records
        state = cluster.state
        for tid, p in plan:
            topic = state.by_id.get(tid)
            part, err = leader_check(state, ctx.node_id, topic, p)
            forced = ctx.forced(topic.name if topic else None, p)
            if topic is None:
                err = codes.UNKNOWN_TOPIC_ID
            if forced is not None or err:
                errors[(tid, p)] = forced if forced is not None else err
                continue
            if budget <= 0 or part is None or topic is None:
                continue
            ranges, batches = cluster.share_partitions.acquire(
                group, member, topic.name, p, part.log, max_records=budget, now=cluster.now_ms
            )
            if ranges:
                got[(tid, p)] = (ranges, batches)
                budget -= sum(last - first + 1 for first, last, _d in ranges)
        if not got and not errors and not final:
            return None
        return _answer(ctx, got, acks, errors, lock)

    if req.max_wait_ms <= 0:
        return build(True)
    first = build(False)
    if first is not None:
        return first
    deferred = ctx.defer()
    cluster.add_waiter(
        Waiter(deferred, ctx.conn_id, ctx.now_ms + req.max_wait_ms, lambda now, final: build(final))
    )
    return DEFERRED


def _answer(
    ctx: Ctx,
    got: dict[tuple[uuid.UUID, int], tuple[list[tuple[int, int, int]], list[bytes]]],
    acks: dict[tuple[uuid.UUID, int], int],
    errors: dict[tuple[uuid.UUID, int], int],
    lock: int,
) -> Any:
    state = ctx.cluster.state
    topics: dict[uuid.UUID, Any] = {}
    for key in sorted(set(got) | set(acks) | set(errors), key=lambda k: (str(k[0]), k[1])):
        tid, p = key
        r = SFR.PartitionData(partition_index=p, records=b"")
        part = state.partition(state.by_id[tid].name, p) if tid in state.by_id else None
        if part is not None:
            r.current_leader = SFR.LeaderIdAndEpoch(
                leader_id=part.leader, leader_epoch=part.leader_epoch
            )
        r.error_code = errors.get(key, codes.NONE)
        r.acknowledge_error_code = acks.get(key, codes.NONE)
        if key in got:
            ranges, batches = got[key]
            r.records = b"".join(batches)
            r.acquired_records = [
                SFR.AcquiredRecords(first_offset=f, last_offset=last, delivery_count=d)
                for f, last, d in ranges
            ]
        entry = topics.setdefault(tid, SFR.ShareFetchableTopicResponse(topic_id=tid, partitions=[]))
        entry.partitions.append(r)
    return SFR(acquisition_lock_timeout_ms=lock, responses=list(topics.values()))


def share_acknowledge(ctx: Ctx, req: ShareAcknowledgeRequest) -> Any:
    cluster = ctx.cluster
    group, member, epoch = req.group_id or "", req.member_id or "", req.share_session_epoch
    if not group or not member:
        return SAR(error_code=codes.INVALID_REQUEST, error_message="no group or member id")
    if epoch == 0:
        return SAR(error_code=codes.INVALID_SHARE_SESSION_EPOCH)
    error, _parts = _session(ctx, group, member, epoch, topics=[], forgotten=[])
    if error:
        return SAR(error_code=error)
    acks = _acks(ctx, group, member, req.topics)
    if epoch == -1:
        cluster.share_partitions.release_member(group, member, ctx.node_id)
    state = cluster.state
    topics: dict[uuid.UUID, Any] = {}
    for (tid, p), code in acks.items():
        r = SAR.PartitionData(partition_index=p, error_code=code)
        part = state.partition(state.by_id[tid].name, p) if tid in state.by_id else None
        if part is not None:
            r.current_leader = SAR.LeaderIdAndEpoch(
                leader_id=part.leader, leader_epoch=part.leader_epoch
            )
        topics.setdefault(tid, SAR.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=[]))
        topics[tid].partitions.append(r)
    lock = int(cluster.group_config(group, "share.record.lock.duration.ms"))
    return SAR(acquisition_lock_timeout_ms=lock, responses=list(topics.values()))


HANDLERS = {
    ShareFetchRequest.API_KEY: (share_fetch, 1, 2, True),
    ShareAcknowledgeRequest.API_KEY: (share_acknowledge, 1, 2, False),
}
