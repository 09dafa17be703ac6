"""Handlers: ListOffsets (v1-v11), OffsetForLeaderEpoch (v2-v4), DeleteRecords (v0-v2).

Role: a partition's offsets, answered by its leader (NOT_LEADER_OR_FOLLOWER
elsewhere; FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current leader epoch
older / newer than the partition's). ListOffsets: -1 the latest offset (the
high watermark, or the last stable offset for ``read_committed``), -2 the
earliest (log start), -3 the record with the largest timestamp (v7+), -4 the
earliest local offset (v8+, the log start here: no tiered storage), -5 the
latest tiered offset (v9+: -1, none); a timestamp: the first record at or after
it below the high watermark (or last stable offset), else -1.
OffsetForLeaderEpoch: the end offset of an epoch from the log's epoch cache.
DeleteRecords: moves the log start offset (-1: to the high watermark).

Imports: kpax.testing.fake.{codes,context,state}, kpax.proto.messages.
"""

from __future__ import annotations

from typing import Any

from kpax.proto.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.context import Ctx
from kpax.testing.fake.state import Partition, leader_check

__all__ = ["HANDLERS"]

LOR = ListOffsetsResponse
OER = OffsetForLeaderEpochResponse
DRR = DeleteRecordsResponse
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def list_offsets(ctx: Ctx, req: ListOffsetsRequest) -> Any:
    state = ctx.cluster.state
    read_committed = ctx.version >= 2 and req.isolation_level == 1
    topics = []
    for t in req.topics:
        topic = state.topic(t.name)
        parts = []
        for rp in t.partitions:
            r = LOR.ListOffsetsPartitionResponse(partition_index=rp.partition_index)
            forced = ctx.forced(t.name, rp.partition_index)
            if forced is not None:
                r.error_code = forced
                parts.append(r)
                continue
            p, error = leader_check(
                state, ctx.node_id, topic, rp.partition_index, rp.current_leader_epoch
            )
            if error or p is None:
                r.error_code = error
            else:
                _lookup(r, p, rp.timestamp, read_committed, ctx.version)
            parts.append(r)
        topics.append(LOR.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return LOR(topics=topics)


def _lookup(r: Any, p: Partition, ts: int, read_committed: bool, version: int) -> None:
    log = p.log
    upper = log.last_stable_offset if read_committed else log.high_watermark
    if ts == LATEST:
        r.offset, r.timestamp, r.leader_epoch = upper, -1, p.leader_epoch
    elif ts == EARLIEST or (ts == EARLIEST_LOCAL and version >= 8):
        start = log.log_start_offset
        r.offset, r.timestamp, r.leader_epoch = start, -1, log.epoch_at(start)
    elif ts == MAX_TIMESTAMP and version >= 7:
        r.offset, r.timestamp, r.leader_epoch = log.max_timestamp_offset()
    elif ts < 0:
        r.offset, r.timestamp, r.leader_epoch = -1, -1, -1
    else:
        offset, found, epoch = log.offset_for_timestamp(ts)
        if offset < 0 or offset >= upper:
            r.offset, r.timestamp, r.leader_epoch = -1, -1, -1
        else:
            r.offset, r.timestamp, r.leader_epoch = offset, found, epoch


def offset_for_leader_epoch(ctx: Ctx, req: OffsetForLeaderEpochRequest) -> Any:
    state = ctx.cluster.state
    topics = []
    for t in req.topics:
        topic = state.topic(t.topic)
        parts = []
        for rp in t.partitions:
            r = OER.EpochEndOffset(partition=rp.partition)
            forced = ctx.forced(t.topic, rp.partition)
            p, error = leader_check(
                state, ctx.node_id, topic, rp.partition, rp.current_leader_epoch
            )
            if forced is not None:
                r.error_code = forced
            elif error or p is None:
                r.error_code = error
            else:
                r.leader_epoch, r.end_offset = p.log.end_offset_for_epoch(
                    rp.leader_epoch, p.leader_epoch
                )
            parts.append(r)
        topics.append(OER.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OER(topics=topics)


def delete_records(ctx: Ctx, req: DeleteRecordsRequest) -> Any:
    state = ctx.cluster.state
    topics = []
    for t in req.topics:
        topic = state.topic(t.name)
        parts = []
        for rp in t.partitions:
            r = DRR.DeleteRecordsPartitionResult(partition_index=rp.partition_index)
            r.low_watermark = -1
            forced = ctx.forced(t.name, rp.partition_index)
            p, error = leader_check(state, ctx.node_id, topic, rp.partition_index)
            if forced is not None:
                r.error_code = forced
            elif error or p is None:
                r.error_code = error
            else:
                log = p.log
                offset = log.high_watermark if rp.offset == -1 else rp.offset
                if offset < 0 or offset > log.high_watermark:
                    r.error_code = codes.OFFSET_OUT_OF_RANGE
                else:
                    log.delete_before(offset)
                    r.low_watermark = log.log_start_offset
            parts.append(r)
        topics.append(DRR.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DRR(topics=topics)


HANDLERS = {
    ListOffsetsRequest.API_KEY: (list_offsets, 1, 11, True),
    OffsetForLeaderEpochRequest.API_KEY: (offset_for_leader_epoch, 2, 4, True),
    DeleteRecordsRequest.API_KEY: (delete_records, 0, 2, True),
}
