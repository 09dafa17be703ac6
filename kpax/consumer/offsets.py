"""Offset lookups a consumer needs from partition leaders.

Role: ``list_offsets`` (ListOffsets: earliest / latest / by timestamp) and
``end_offsets_for_epochs`` (OffsetForLeaderEpoch, KIP-320 truncation
detection), each routed to the partitions' leaders through the one request
path (:meth:`kpax.cluster.request_path.RequestPath.fan_out`), retried on
leader changes with backoff until the timeout.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.structs, kpax.consumer.state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kpax.broker.broker import Broker
from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import RequestPath, RetryPolicy, ToLeader
from kpax.proto.error_families import STALE_METADATA_ERRORS
from kpax.proto.errors import BrokerResponseError, KafkaError, KafkaTimeoutError, error_for_code
from kpax.proto.messages import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kpax.structs import TopicPartition

__all__ = ["EARLIEST", "LATEST", "end_offsets_for_epochs", "list_offsets"]

EARLIEST = -2
LATEST = -1

_MAX_TIMESTAMP = 2**63 - 1
#: The lowest special ListOffsets timestamp (-5: latest tiered offset, KIP-1005).
_MIN_SPEC = -5


def _leader_epoch(cluster: Cluster, tp: TopicPartition) -> int:
    info = cluster.snapshot.topics.get(tp.topic)
    p = info.partitions.get(tp.partition) if info is not None else None
    return p.leader_epoch if p is not None else -1


def _transient(error: KafkaError) -> bool:
    """Retry a partition whose leader moved or is not ready (the stale-metadata
    family) or whose broker could not be reached; any other answer is final."""
    if not error.retriable:
        return False
    return isinstance(error, STALE_METADATA_ERRORS) or not isinstance(error, BrokerResponseError)


async def _by_leader(  # noqa: PLR0917
    cluster: Cluster,
    tps: list[TopicPartition],
    timeout: float,
    retry_backoff: tuple[int, int],
    send: Callable[[Broker, list[TopicPartition]], Awaitable[dict[TopicPartition, Any]]],
    what: str,
) -> dict[TopicPartition, Any]:
    """Run ``send(broker, tps) -> {tp: result | error_code}`` on each leader, through
    the one request path, until every partition has its result; raise the first
    final error, or a KafkaTimeoutError naming what is left when time runs out."""

    async def on_leader(broker: Broker, parts: list[TopicPartition]) -> dict[TopicPartition, Any]:
        answers = await send(broker, parts)
        return {
            tp: error_for_code(r)(f"{what} for {tp} on {broker.describe()}")
            if isinstance(r, int)
            else r
            for tp, r in answers.items()
        }

    path = RequestPath(cluster, RetryPolicy(*retry_backoff))
    result = await path.fan_out(
        what,
        tps,
        lambda tp: ToLeader(tp.topic, tp.partition),
        on_leader,
        timeout=timeout,
        retry=lambda error, _deadline: _transient(error),
        resolve_timeout=None,
    )
    if result.errors:
        for err in result.errors.values():
            if not _transient(err):
                raise err
        left = list(result.errors)
        last = result.errors[left[-1]].message
        raise KafkaTimeoutError(f"{what} for {', '.join(map(str, left))} timed out: {last}")
    return dict(result.succeeded)


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

    return await _by_leader(cluster, list(specs), timeout, retry_backoff, send, "listing offsets")


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

    return await _by_leader(
        cluster, list(epochs), timeout, retry_backoff, send, "OffsetForLeaderEpoch"
    )
