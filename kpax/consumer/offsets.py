"""Offset lookups a consumer needs from partition leaders.

Role: ``list_offsets`` (ListOffsets: earliest / latest / by timestamp) and
``end_offsets_for_epochs`` (OffsetForLeaderEpoch, KIP-320 truncation
detection), each routed to the partitions' leaders, retried on leader
changes with backoff until the timeout.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.structs, kpax.consumer.state.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from kpax.broker.backoff import Backoff
from kpax.cluster.cluster import Cluster
from kpax.proto.error_codes import UnknownTopicOrPartitionError
from kpax.proto.error_families import STALE_METADATA_ERRORS
from kpax.proto.errors import KafkaError, KafkaTimeoutError, error_for_code
from kpax.proto.messages import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kpax.structs import TopicPartition

__all__ = ["EARLIEST", "LATEST", "end_offsets_for_epochs", "list_offsets"]

EARLIEST = -2
LATEST = -1

_MAX_TIMESTAMP = 2**63 - 1
#: The lowest special ListOffsets timestamp (-5: latest tiered offset, KIP-1005).
_MIN_SPEC = -5


async def _by_leader(
    cluster: Cluster, tps: list[TopicPartition], timeout: float
) -> dict[int, list[TopicPartition]]:
    out: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in tps:
        broker, _ = await cluster.leader(tp.topic, tp.partition, timeout=timeout)
        assert broker.node_id is not None
        out[broker.node_id].append(tp)
    return out


def _leader_epoch(cluster: Cluster, tp: TopicPartition) -> int:
    info = cluster.snapshot.topics.get(tp.topic)
    p = info.partitions.get(tp.partition) if info is not None else None
    return p.leader_epoch if p is not None else -1


async def _retrying(  # noqa: PLR0917
    cluster: Cluster,
    tps: list[TopicPartition],
    timeout: float,
    retry_backoff: tuple[int, int],
    send: Any,
    what: str,
) -> dict[TopicPartition, Any]:
    """Run ``send(broker, tps) -> {tp: result | error_code}`` per leader until all succeed."""
    deadline = time.monotonic() + timeout
    backoff = Backoff(*retry_backoff)
    todo = list(dict.fromkeys(tps))
    done: dict[TopicPartition, Any] = {}
    last = ""
    while todo:
        left = deadline - time.monotonic()
        if left <= 0:
            raise KafkaTimeoutError(f"{what} for {', '.join(map(str, todo))} timed out: {last}")
        groups = await _by_leader(cluster, todo, left)
        results = await asyncio.gather(
            *(send(cluster.broker(node), parts) for node, parts in groups.items()),
            return_exceptions=True,
        )
        retry: list[TopicPartition] = []
        for (node, parts), res in zip(groups.items(), results, strict=True):
            if isinstance(res, BaseException):
                if isinstance(res, KafkaError) and res.retriable:
                    last = res.message
                    retry.extend(parts)
                    for tp in parts:
                        cluster.leader_is_down(tp.topic, tp.partition)
                    continue
                raise res
            for tp in parts:
                r = res.get(tp)
                if r is None or isinstance(r, int):
                    # A partition missing from the answer: the broker does not host it.
                    err = UnknownTopicOrPartitionError if r is None else error_for_code(r)
                    if issubclass(err, STALE_METADATA_ERRORS):
                        cluster.leader_is_down(tp.topic, tp.partition)
                        retry.append(tp)
                        last = f"{tp}: {err.__name__}"
                        continue
                    raise err(f"{what} for {tp} on broker {node}")
                done[tp] = r
        todo = retry
        if todo:
            await asyncio.sleep(min(backoff.next_delay(), max(deadline - time.monotonic(), 0)))
            await cluster.refresh({tp.topic for tp in todo})
    return done


async def list_offsets(
    cluster: Cluster,
    specs: Mapping[TopicPartition, int],
    *,
    isolation_level: int,
    timeout: float,
    retry_backoff: tuple[int, int] = (100, 1000),
) -> dict[TopicPartition, tuple[int, int, int]]:
    """``{tp: timestamp | EARLIEST | LATEST}`` -> ``{tp: (offset, timestamp, leader_epoch)}``.

    A timestamp with no record at or after it gives offset -1. A timestamp
    outside Kafka's int64 (or below the special values, -5) is a ValueError
    naming the partition, before anything is sent: such a request cannot be
    encoded, and retrying it as if a leader had moved would only time out.
    """
    for tp, ts in specs.items():
        if not _MIN_SPEC <= ts <= _MAX_TIMESTAMP:
            raise ValueError(
                f"listing offsets for {tp}: timestamp {ts} out of range (milliseconds "
                f"since the epoch, 0 to 2**63-1, or {EARLIEST} earliest / {LATEST} latest)"
            )

    async def send(broker: Any, parts: list[TopicPartition]) -> dict[TopicPartition, Any]:
        topics: dict[str, list[Any]] = defaultdict(list)
        for tp in parts:
            topics[tp.topic].append(
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=_leader_epoch(cluster, tp),
                    timestamp=specs[tp],
                )
            )
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        resp = await broker.request(req)
        out: dict[TopicPartition, Any] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                out[tp] = p.error_code or (p.offset, p.timestamp, p.leader_epoch)
        return out

    return await _retrying(cluster, list(specs), timeout, retry_backoff, send, "listing offsets")


async def end_offsets_for_epochs(
    cluster: Cluster,
    epochs: Mapping[TopicPartition, int],
    *,
    timeout: float,
    retry_backoff: tuple[int, int] = (100, 1000),
) -> dict[TopicPartition, tuple[int, int]]:
    """``{tp: leader_epoch}`` -> ``{tp: (leader_epoch, end_offset)}`` (OffsetForLeaderEpoch):
    the end of the largest epoch <= the one asked, on the current leader."""

    async def send(broker: Any, parts: list[TopicPartition]) -> dict[TopicPartition, Any]:
        topics: dict[str, list[Any]] = defaultdict(list)
        for tp in parts:
            topics[tp.topic].append(
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=tp.partition,
                    current_leader_epoch=_leader_epoch(cluster, tp),
                    leader_epoch=epochs[tp],
                )
            )
        req = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        resp = await broker.request(req)
        out: dict[TopicPartition, Any] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[TopicPartition(t.topic, p.partition)] = p.error_code or (
                    p.leader_epoch,
                    p.end_offset,
                )
        return out

    return await _retrying(
        cluster, list(epochs), timeout, retry_backoff, send, "OffsetForLeaderEpoch"
    )
