"""Handler: Fetch (v4-v18) with fetch sessions (KIP-227) and long polls.

Role: read stored batches for consumers. Each partition is answered by its
leader (NOT_LEADER_OR_FOLLOWER elsewhere, FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH for a stale / future ``current_leader_epoch``, v9+),
OFFSET_OUT_OF_RANGE outside [log start, high watermark]; topics by name, or by
id from v13 (UNKNOWN_TOPIC_ID). Reads stop at the high watermark, or the last
stable offset for ``read_committed`` (with the aborted transactions in range).
Byte limits: ``partition_max_bytes`` per partition and ``max_bytes`` per
response, whole batches only, the first batch of the response always (KIP-74).

Fetch sessions (per broker, ids from the seeded random): epoch 0 opens one (a
full fetch), -1 fetches without one (and closes the one named), an epoch > 0 is
an incremental fetch of the session's partitions -- updated by the request's
partitions, less its forgotten topics -- whose response holds only the
partitions with news (records, an error, or a changed high watermark, last
stable offset or log start offset). An unknown session id gets
FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH.

Long poll: when fewer than ``min_bytes`` are ready and no partition has an
error, the answer waits (a :class:`~kpax.testing.fake.context.Waiter`) until
enough bytes arrive, a partition's state changes to an error, or
``max_wait_ms`` passes.

Imports: kpax.testing.fake.{codes,context,state}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kpax.proto.messages import FetchRequest, FetchResponse
from kpax.testing.fake import codes
from kpax.testing.fake.context import DEFERRED, Ctx, Waiter
from kpax.testing.fake.state import Topic, leader_check

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["HANDLERS", "FetchSession", "FetchSessions"]

FR = FetchResponse
_INT32_MAX = 2**31 - 1


@dataclass
class Wanted:
    """A partition a fetch reads, and what the session last sent of it."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_epoch: int
    sent_hw: int = -2
    sent_lso: int = -2
    sent_start: int = -2


Key = tuple[object, int]


@dataclass
class FetchSession:
    session_id: int
    node_id: int
    epoch: int
    partitions: dict[Key, Wanted]


class FetchSessions:
    """The fetch session cache of every broker."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.sessions: dict[tuple[int, int], FetchSession] = {}

    def new(self, node_id: int, partitions: dict[Key, Wanted]) -> FetchSession | None:
        slots = self.cluster.state.conf_int("max.incremental.fetch.session.cache.slots")
        if sum(1 for n, _ in self.sessions if n == node_id) >= slots:
            return None
        while True:
            sid = self.cluster.rng.randint(1, _INT32_MAX)
            if (node_id, sid) not in self.sessions:
                break
        session = FetchSession(sid, node_id, 1, partitions)
        self.sessions[(node_id, sid)] = session
        return session

    def forget_broker(self, node_id: int) -> None:
        for key in [k for k in self.sessions if k[0] == node_id]:
            del self.sessions[key]


def _key(v: int, topic: str, topic_id: uuid.UUID, partition: int) -> Key:
    return (topic_id if v >= 13 else topic, partition)


def _wanted_from(ctx: Ctx, req: FetchRequest) -> dict[Key, Wanted]:
    v = ctx.version
    out: dict[Key, Wanted] = {}
    for t in req.topics:
        name = t.topic
        if v >= 13:
            topic = ctx.cluster.state.by_id.get(t.topic_id)
            name = topic.name if topic is not None else ""
        for rp in t.partitions:
            w = Wanted(
                name,
                t.topic_id if v >= 13 else uuid.UUID(int=0),
                rp.partition,
                rp.fetch_offset,
                rp.partition_max_bytes,
                rp.current_leader_epoch if v >= 9 else -1,
            )
            out[_key(v, name, t.topic_id, rp.partition)] = w
    return out


def fetch(ctx: Ctx, req: FetchRequest) -> Any:
    v = ctx.version
    sessions = ctx.cluster.fetch_sessions
    sid, sepoch = (req.session_id, req.session_epoch) if v >= 7 else (0, -1)
    incremental = False
    session: FetchSession | None = None
    if sepoch in (-1, 0):
        if sid:
            sessions.sessions.pop((ctx.node_id, sid), None)
        wanted = _wanted_from(ctx, req)
        if sepoch == 0:
            session = sessions.new(ctx.node_id, wanted)
    else:
        session = sessions.sessions.get((ctx.node_id, sid))
        if session is None:
            return FR(error_code=codes.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
        if session.epoch != sepoch:
            return FR(error_code=codes.INVALID_FETCH_SESSION_EPOCH, session_id=0)
        session.epoch = sepoch + 1 if sepoch < _INT32_MAX else 1
        for f in req.forgotten_topics_data:
            for p in f.partitions:
                session.partitions.pop(_key(v, f.topic, f.topic_id, p), None)
        for key, w in _wanted_from(ctx, req).items():
            old = session.partitions.get(key)
            if old is not None:
                old.fetch_offset, old.max_bytes = w.fetch_offset, w.max_bytes
                old.current_epoch = w.current_epoch
            else:
                session.partitions[key] = w
        wanted = session.partitions
        incremental = True
    plan = list(wanted.values())
    read_committed = req.isolation_level == 1
    session_id = session.session_id if session is not None else 0

    def build(final: bool) -> Any:
        response, size, urgent = _read(ctx, plan, req.max_bytes, read_committed, incremental)
        if not final and not urgent and size < req.min_bytes:
            return None
        for w in plan:  # what the session has now sent
            p = _partition_of(ctx, w)
            if p is not None:
                w.sent_hw, w.sent_lso = p.log.high_watermark, p.log.last_stable_offset
                w.sent_start = p.log.log_start_offset
        response.session_id = session_id
        return response

    if req.max_wait_ms <= 0 or req.min_bytes <= 0:
        return build(True)
    first = build(False)
    if first is not None:
        return first
    deferred = ctx.defer()
    ctx.cluster.add_waiter(
        Waiter(
            deferred,
            ctx.conn_id,
            ctx.now_ms + req.max_wait_ms,
            lambda now, final: build(final),
        )
    )
    return DEFERRED


def _partition_of(ctx: Ctx, w: Wanted) -> Any:
    topic = _topic_of(ctx, w)
    if topic is None or not 0 <= w.partition < len(topic.partitions):
        return None
    return topic.partitions[w.partition]


def _topic_of(ctx: Ctx, w: Wanted) -> Topic | None:
    state = ctx.cluster.state
    if ctx.version >= 13:
        return state.by_id.get(w.topic_id)
    return state.topic(w.topic)


def _read(
    ctx: Ctx, plan: list[Wanted], max_bytes: int, read_committed: bool, incremental: bool
) -> tuple[Any, int, bool]:
    """(the response, its record bytes, whether it must go now: an error)."""
    state = ctx.cluster.state
    v = ctx.version
    budget = max_bytes if v >= 3 else _INT32_MAX
    size = 0
    urgent = False
    topics: dict[object, Any] = {}
    for w in plan:
        r = FR.PartitionData(partition_index=w.partition, aborted_transactions=None)
        topic = _topic_of(ctx, w)
        forced = ctx.forced(w.topic, w.partition)
        p, error = leader_check(state, ctx.node_id, topic, w.partition, w.current_epoch)
        if topic is None and v >= 13:
            error = codes.UNKNOWN_TOPIC_ID
        if forced is not None:
            error = forced
        if p is not None:
            log = p.log
            r.high_watermark = log.high_watermark
            r.last_stable_offset = log.last_stable_offset
            r.log_start_offset = log.log_start_offset
        if not error and p is not None:
            log = p.log
            if not log.log_start_offset <= w.fetch_offset <= log.high_watermark:
                error = codes.OFFSET_OUT_OF_RANGE
            else:
                upper = log.last_stable_offset if read_committed else log.high_watermark
                data, n = log.read(
                    w.fetch_offset, min(w.max_bytes, budget), upper, at_least_one=size == 0
                )
                if data:
                    r.records = b"".join(data)
                    size += n
                    budget = max(0, budget - n)
                    if read_committed:
                        end = w.fetch_offset + 1
                        last = log.batches[log.index_of(w.fetch_offset) + len(data) - 1]
                        end = max(end, last.last_offset + 1)
                        r.aborted_transactions = [
                            FR.AbortedTransaction(producer_id=pid, first_offset=first)
                            for pid, first in log.aborted_in(w.fetch_offset, end)
                        ]
        if error:
            urgent = True
            r.error_code = error
            if p is not None and p.leader >= 0 and v >= 12:
                r.current_leader = FR.LeaderIdAndEpoch(
                    leader_id=p.leader, leader_epoch=p.leader_epoch
                )
        if r.records is None and read_committed and r.aborted_transactions is None:
            r.aborted_transactions = []
        if incremental and not error and r.records is None and p is not None:
            log = p.log
            if (w.sent_hw, w.sent_lso, w.sent_start) == (
                log.high_watermark,
                log.last_stable_offset,
                log.log_start_offset,
            ):
                continue
        if r.records is None:
            r.records = b""
        key = w.topic_id if v >= 13 else w.topic
        entry = topics.get(key)
        if entry is None:
            entry = topics[key] = FR.FetchableTopicResponse(
                topic=w.topic, topic_id=w.topic_id, partitions=[]
            )
        entry.partitions.append(r)
    return FR(responses=list(topics.values())), size, urgent


HANDLERS = {FetchRequest.API_KEY: (fetch, 4, 18, True)}
