"""Handlers: InitProducerId (v0-v6), AddPartitionsToTxn (v0-v5), AddOffsetsToTxn (v0-v4),
EndTxn (v0-v5), TxnOffsetCommit (v0-v6).

Role: decode, check the coordinator (NOT_COORDINATOR from a broker that does not
coordinate the transactional id, or the group for TxnOffsetCommit), call
:class:`~kpax.testing.fake.txn.Transactions`, encode. A fenced producer gets
PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH at the versions before KIP-588
(InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2,
TxnOffsetCommit v3).

Imports: kpax.testing.fake.{codes,commits,context}, kpax.proto.messages.
"""

from __future__ import annotations

from typing import Any

from kpax.proto.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.commits import MAX_METADATA, Committed, validate_commit
from kpax.testing.fake.context import Ctx

__all__ = ["HANDLERS"]

APR = AddPartitionsToTxnResponse
TOR = TxnOffsetCommitResponse
GROUP, TRANSACTION = 0, 1


def _fenced(version: int, since: int) -> int:
    return codes.PRODUCER_FENCED if version >= since else codes.INVALID_PRODUCER_EPOCH


def init_producer_id(ctx: Ctx, req: InitProducerIdRequest) -> Any:
    v = ctx.version
    txn_id = req.transactional_id
    if txn_id:
        error = ctx.coordinator_error(TRANSACTION, txn_id)
        if error:
            return InitProducerIdResponse(error_code=error)
    try:
        pid, epoch = ctx.cluster.txns.init_producer_id(
            txn_id,
            req.transaction_timeout_ms,
            producer_id=req.producer_id if v >= 3 else -1,
            epoch=req.producer_epoch if v >= 3 else -1,
            fenced=_fenced(v, 4),
            now=ctx.now_ms,
        )
    except ApiError as exc:
        return InitProducerIdResponse(error_code=exc.code)
    return InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)


def _add_one(
    ctx: Ctx, txn_id: str, pid: int, epoch: int, *, topics: list[Any], v: int
) -> list[Any]:
    tps = [(t.name, p) for t in topics for p in t.partitions]
    error = ctx.coordinator_error(TRANSACTION, txn_id)
    results: dict[tuple[str, int], int]
    if error:
        results = dict.fromkeys(tps, error)
    else:
        forced = {tp: ctx.forced(*tp) for tp in tps}
        if any(code is not None for code in forced.values()):
            results = {tp: forced[tp] or codes.OPERATION_NOT_ATTEMPTED for tp in tps}
        else:
            try:
                results = ctx.cluster.txns.add_partitions(
                    txn_id, pid, epoch, tps=tps, fenced=_fenced(v, 2), now=ctx.now_ms
                )
            except ApiError as exc:
                results = dict.fromkeys(tps, exc.code)
    return [
        APR.AddPartitionsToTxnTopicResult(
            name=t.name,
            results_by_partition=[
                APR.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=results[(t.name, p)]
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def add_partitions_to_txn(ctx: Ctx, req: AddPartitionsToTxnRequest) -> Any:
    v = ctx.version
    if v <= 3:
        return APR(
            results_by_topic_v3_and_below=_add_one(
                ctx,
                req.v3_and_below_transactional_id,
                req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch,
                topics=req.v3_and_below_topics,
                v=v,
            )
        )
    return APR(
        results_by_transaction=[
            APR.AddPartitionsToTxnResult(
                transactional_id=t.transactional_id,
                topic_results=_add_one(
                    ctx, t.transactional_id, t.producer_id, t.producer_epoch, topics=t.topics, v=v
                ),
            )
            for t in req.transactions
        ]
    )


def add_offsets_to_txn(ctx: Ctx, req: AddOffsetsToTxnRequest) -> Any:
    error = ctx.coordinator_error(TRANSACTION, req.transactional_id)
    if not error:
        try:
            ctx.cluster.txns.add_offsets(
                req.transactional_id,
                req.producer_id,
                req.producer_epoch,
                group=req.group_id,
                fenced=_fenced(ctx.version, 2),
                now=ctx.now_ms,
            )
        except ApiError as exc:
            error = exc.code
    return AddOffsetsToTxnResponse(error_code=error)


def end_txn(ctx: Ctx, req: EndTxnRequest) -> Any:
    v = ctx.version
    error = ctx.coordinator_error(TRANSACTION, req.transactional_id)
    if error:
        return EndTxnResponse(error_code=error)
    v2 = v >= 5 and ctx.cluster.txns.v2
    try:
        pid, epoch = ctx.cluster.txns.end_txn(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            commit=req.committed,
            v2=v2,
            fenced=_fenced(v, 2),
            now=ctx.now_ms,
        )
    except ApiError as exc:
        return EndTxnResponse(error_code=exc.code)
    if not v2:  # transactions v1: the epoch stays; the answer names none
        return EndTxnResponse()
    return EndTxnResponse(producer_id=pid, producer_epoch=epoch)


def txn_offset_commit(ctx: Ctx, req: TxnOffsetCommitRequest) -> Any:
    v = ctx.version
    state = ctx.cluster.state
    error = ctx.coordinator_error(GROUP, req.group_id)
    if not error:
        try:
            ctx.cluster.txns.check_offsets(
                req.transactional_id,
                req.producer_id,
                req.producer_epoch,
                group=req.group_id,
                v2=v >= 5 and ctx.cluster.txns.v2,
                fenced=_fenced(v, 3),
                now=ctx.now_ms,
            )
        except ApiError as exc:
            error = exc.code
    if not error and v >= 3 and (req.member_id or req.generation_id_or_member_epoch >= 0):
        error = validate_commit(
            ctx,
            req.group_id,
            req.member_id,
            req.generation_id_or_member_epoch,
            req.group_instance_id,
        )
    staged: dict[tuple[str, int], Committed] = {}
    topics = []
    for t in req.topics:
        topic = state.by_id.get(t.topic_id) if v >= 6 else state.topic(t.name)
        parts = []
        for p in t.partitions:
            code = (
                error
                or ctx.forced(topic.name if topic else t.name, p.partition_index)
                or codes.NONE
            )
            if not code and (topic is None or not 0 <= p.partition_index < len(topic.partitions)):
                code = codes.UNKNOWN_TOPIC_ID if v >= 6 else codes.UNKNOWN_TOPIC_OR_PARTITION
            if not code and len((p.committed_metadata or "").encode()) > MAX_METADATA:
                code = codes.OFFSET_METADATA_TOO_LARGE
            if not code and topic is not None:
                staged[(topic.name, p.partition_index)] = Committed(
                    p.committed_offset,
                    p.committed_leader_epoch if v >= 2 else -1,
                    p.committed_metadata,
                )
            parts.append(
                TOR.TxnOffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=code
                )
            )
        topics.append(
            TOR.TxnOffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=parts)
        )
    if staged:
        ctx.cluster.offsets.stage(req.group_id, req.producer_id, staged)
    return TOR(topics=topics)


HANDLERS = {
    InitProducerIdRequest.API_KEY: (init_producer_id, 0, 6, False),
    AddPartitionsToTxnRequest.API_KEY: (add_partitions_to_txn, 0, 5, True),
    AddOffsetsToTxnRequest.API_KEY: (add_offsets_to_txn, 0, 4, False),
    EndTxnRequest.API_KEY: (end_txn, 0, 5, False),
    TxnOffsetCommitRequest.API_KEY: (txn_offset_commit, 0, 6, True),
}
