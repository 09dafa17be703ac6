"""The one request path (kpax.cluster.request_path) on a real broker: keys
routed to leaders and coordinators, one request per broker per round, stale
routes forgotten and retried, final errors kept per key, one deadline."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kpax.broker.broker import Broker
from kpax.broker.options import ConnectionOptions
from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import (
    ANY_BROKER,
    Deadline,
    RequestPath,
    RetryPolicy,
    ToCoordinator,
    ToLeader,
)
from kpax.proto.error_codes import (
    GroupAuthorizationFailedError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from kpax.proto.error_families import LEADER_CHANGED_ERRORS
from kpax.proto.errors import KafkaError, KafkaTimeoutError, error_for_code
from kpax.proto.messages import ListOffsetsRequest, MetadataRequest, OffsetFetchRequest
from kpax.structs import TopicPartition

pytestmark = pytest.mark.integration


async def _cluster(bootstrap: str) -> Cluster:
    cluster = Cluster(
        bootstrap.split(","), ConnectionOptions(), retry_backoff_ms=20, retry_backoff_max_ms=100
    )
    await cluster.start()
    return cluster


async def _latest(broker: Broker, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
    req = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=tp.topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=tp.partition, timestamp=-1
                    )
                ],
            )
            for tp in tps
        ],
    )
    resp = await broker.request(req)
    out: dict[TopicPartition, Any] = {}
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            out[tp] = error_for_code(p.error_code)(str(tp)) if p.error_code else p.offset
    return out


async def test_fan_out_sends_one_request_per_broker_and_keeps_final_errors_per_key(
    kafka, topic
) -> None:
    t = topic(6)
    cluster = await _cluster(kafka.bootstrap)
    try:
        path = RequestPath(cluster)
        calls: list[list[TopicPartition]] = []

        async def send(broker: Broker, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            calls.append(tps)
            return await _latest(broker, tps)

        tps = [TopicPartition(t, p) for p in range(6)]
        result = await path.fan_out("latest", tps, lambda tp: ToLeader(*tp), send, timeout=20)
        assert result.ok and result.succeeded == dict.fromkeys(tps, 0)
        # one broker: one request per round (a just-created topic may need a second
        # round for partitions whose leader was not ready, and only for those)
        assert calls[0] == tps
        assert all(set(later) < set(tps) for later in calls[1:])

        # a partition that does not exist fails alone, at once (not retried to the deadline)
        started = time.monotonic()
        bad = TopicPartition(t, 6)
        result = await path.fan_out(
            "latest", [*tps, bad], lambda tp: ToLeader(*tp), send, timeout=20
        )
        assert time.monotonic() - started < 5
        assert set(result.succeeded) == set(tps)
        assert isinstance(result.errors[bad], UnknownTopicOrPartitionError)
        assert "has no partition 6" in str(result.errors[bad])
    finally:
        await cluster.close()


async def test_a_stale_leader_answer_is_forgotten_and_retried(kafka, topic) -> None:
    t = topic(2)
    cluster = await _cluster(kafka.bootstrap)
    try:
        path = RequestPath(cluster, RetryPolicy(10, 50))
        first = TopicPartition(t, 0)
        attempts: list[list[TopicPartition]] = []
        forgotten: list[tuple[str, int]] = []
        real = cluster.leader_is_down

        def forget(topic: str, part: int) -> None:
            forgotten.append((topic, part))
            real(topic, part)

        cluster.leader_is_down = forget  # type: ignore[method-assign]

        async def send(broker: Broker, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            attempts.append(tps)
            out = await _latest(broker, tps)
            if len(attempts) == 1:
                out[first] = NotLeaderOrFollowerError(f"{first} moved")
            return out

        tps = [first, TopicPartition(t, 1)]
        result = await path.fan_out("latest", tps, lambda tp: ToLeader(*tp), send, timeout=20)
        assert result.ok
        assert attempts == [tps, [first]]  # only the stale key went again
        assert forgotten == [(t, 0)]

        # always stale: the key's last error once the deadline passes, in bounded time
        async def never(broker: Broker, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
            return {tp: NotLeaderOrFollowerError(f"{tp} still moving") for tp in tps}

        started = time.monotonic()
        result = await path.fan_out("latest", [first], lambda tp: ToLeader(*tp), never, timeout=1.0)
        took = time.monotonic() - started
        assert 0.5 < took < 3.0
        # (the last attempt's error: the answer, or the leader lookup cut by the deadline)
        assert isinstance(result.errors[first], LEADER_CHANGED_ERRORS)
    finally:
        cluster.leader_is_down = real  # type: ignore[method-assign]
        await cluster.close()


async def test_call_routes_to_the_group_coordinator_and_stops_on_a_final_error(kafka) -> None:
    cluster = await _cluster(kafka.bootstrap)
    try:
        path = RequestPath(cluster)

        async def fetch_offsets(broker: Broker) -> Any:
            resp = await broker.request(
                OffsetFetchRequest(group_id="rp-group", topics=None), version=7
            )
            if resp.error_code:
                raise error_for_code(resp.error_code)("offset fetch")
            return resp

        resp = await path.call("offset fetch", ToCoordinator("rp-group"), fetch_offsets, timeout=20)
        assert resp.topics == []

        tries = 0

        async def refused(broker: Broker) -> Any:
            nonlocal tries
            tries += 1
            raise GroupAuthorizationFailedError("not allowed")

        with pytest.raises(GroupAuthorizationFailedError):
            await path.call("offset fetch", ToCoordinator("rp-group"), refused, timeout=20)
        assert tries == 1  # final: not retried

        async def slow(broker: Broker) -> Any:
            await broker.request(MetadataRequest(topics=[]))
            raise KafkaError("try again", retriable=True)

        started = time.monotonic()
        with pytest.raises(KafkaError, match="try again"):
            await path.call("metadata", ANY_BROKER, slow, timeout=1.0)
        assert time.monotonic() - started < 3.0
    finally:
        await cluster.close()


async def test_deadline_sleep_never_passes_the_deadline() -> None:
    d = Deadline(0.2)
    assert await d.sleep(0.05)
    assert not await d.sleep(1.0)  # would pass it: returns at once
    assert d.elapsed() < 0.15
    assert not d.expired
    assert 0 < d.left() <= 0.2


async def test_call_reports_the_deadline_when_a_send_outlives_it(kafka) -> None:
    cluster = await _cluster(kafka.bootstrap)
    try:
        path = RequestPath(cluster)

        async def hang(broker: Broker) -> Any:
            import asyncio

            await asyncio.sleep(30)

        with pytest.raises(KafkaTimeoutError, match=r"within 0\.5s"):
            await path.call("hang", ANY_BROKER, hang, timeout=0.5)
    finally:
        await cluster.close()
