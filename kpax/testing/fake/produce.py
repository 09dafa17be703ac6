"""Handler: Produce (v3-v13).

Role: route each partition's batches to its log. Per partition: an injected
error, an unknown topic (UNKNOWN_TOPIC_OR_PARTITION; UNKNOWN_TOPIC_ID for a
topic id, v13), this broker not the leader (NOT_LEADER_OR_FOLLOWER, with the
current leader from v10), ``acks=all`` with fewer live replicas than
``min.insync.replicas`` (NOT_ENOUGH_REPLICAS), a transactional batch outside
its transaction (the transaction coordinator decides:
:meth:`~kpax.testing.fake.txn.Transactions.check_produce`), then
:meth:`~kpax.testing.fake.log.PartitionLog.append` (CRC, size, idempotence).
``acks=0`` gets no response.

Imports: kpax.testing.fake.{codes,context,log,state}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import struct
from typing import Any

from kpax.proto.messages import ProduceRequest, ProduceResponse
from kpax.testing.fake import codes
from kpax.testing.fake.context import Ctx
from kpax.testing.fake.log import HEADER_SIZE, AppendResult

__all__ = ["HANDLERS"]

PR = ProduceResponse
_PID = struct.Struct(">qh")  # producer id, epoch at byte 43
_ATTR = struct.Struct(">h")
_TRANSACTIONAL = 0x10


def produce(ctx: Ctx, req: ProduceRequest) -> Any:
    cluster = ctx.cluster
    state = cluster.state
    v = ctx.version
    if req.acks not in (0, 1, -1):
        error: int | None = codes.INVALID_REQUIRED_ACKS
    else:
        error = None
    responses = []
    leaders: set[int] = set()
    for td in req.topic_data:
        topic = state.by_id.get(td.topic_id) if v >= 13 else state.topic(td.name)
        name = topic.name if topic is not None else td.name
        parts = []
        for pd in td.partition_data:
            r = PR.PartitionProduceResponse(index=pd.index, base_offset=-1)
            code = error if error is not None else ctx.forced(name, pd.index)
            p = (
                topic.partitions[pd.index]
                if topic and 0 <= pd.index < len(topic.partitions)
                else None
            )
            if code is None and p is None:
                unknown_id = v >= 13 and topic is None
                code = codes.UNKNOWN_TOPIC_ID if unknown_id else codes.UNKNOWN_TOPIC_OR_PARTITION
            if code is None and p is not None and p.leader != ctx.node_id:
                code = codes.NOT_LEADER_OR_FOLLOWER
                if v >= 10 and p.leader >= 0:
                    r.current_leader = PR.LeaderIdAndEpoch(
                        leader_id=p.leader, leader_epoch=p.leader_epoch
                    )
                    leaders.add(p.leader)
            if code is None and p is not None and req.acks == -1:
                live = sum(1 for n in p.replicas if state.is_alive(n))
                if live < int(topic.config("min.insync.replicas")):  # type: ignore[union-attr]
                    code = codes.NOT_ENOUGH_REPLICAS
            records = pd.records
            if (
                code is None
                and p is not None
                and records is not None
                and len(records) >= HEADER_SIZE
            ):
                pid, epoch = _PID.unpack_from(records, 43)
                (attributes,) = _ATTR.unpack_from(records, 21)
                if attributes & _TRANSACTIONAL or req.transactional_id is not None:
                    code = cluster.txns.check_produce(
                        req.transactional_id,
                        pid,
                        epoch,
                        topic=name,
                        partition=pd.index,
                        produce_version=v,
                        now=ctx.now_ms,
                    )
            if code is not None:
                r.error_code = code
            elif p is not None and topic is not None:
                result = _append(ctx, topic.config, p.log, records, p.leader_epoch)
                r.error_code = result.error
                r.error_message = result.message
                r.base_offset = result.base_offset
                r.log_append_time_ms = result.log_append_time
                r.log_start_offset = p.log.log_start_offset
            parts.append(r)
        responses.append(
            PR.TopicProduceResponse(name=name, topic_id=td.topic_id, partition_responses=parts)
        )
    if req.acks == 0:
        return None
    endpoints = []
    if v >= 10:
        for node in sorted(leaders):
            b = state.brokers[node]
            endpoints.append(PR.NodeEndpoint(node_id=node, host=b.host, port=b.port, rack=b.rack))
    return PR(responses=responses, node_endpoints=endpoints)


def _append(
    ctx: Ctx,
    config: Any,
    log: Any,
    records: bytes | bytearray | memoryview | None,
    leader_epoch: int,
) -> AppendResult:
    if records is None:
        return AppendResult(codes.CORRUPT_MESSAGE, message="no records")
    after = int(config("message.timestamp.after.max.ms"))
    result: AppendResult = log.append(
        records,
        leader_epoch=leader_epoch,
        now_ms=ctx.now_ms,
        max_message_bytes=int(config("max.message.bytes")),
        log_append_time=config("message.timestamp.type") == "LogAppendTime",
        timestamp_after_max_ms=after if after < 2**62 else None,
    )
    return result


HANDLERS = {ProduceRequest.API_KEY: (produce, 3, 13, True)}
