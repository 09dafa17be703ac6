"""The consumer's fetcher driven with plain bytes, in milliseconds: the test
answers ListOffsets, Fetch and Metadata on the connections' byte streams (the
pipelined one and the long-poll fetch one), so the position reset, the
records handed to ``poll`` and the reaction to a moved leader are checked
request by request. What a real broker does is tests/integration/test_consumer*.py's job."""

from __future__ import annotations

import asyncio
from typing import Any

from kpax.cluster.metadata import snapshot_from_response
from kpax.consumer.client import AsyncConsumer
from kpax.proto.error_codes import NotLeaderOrFollowerError
from kpax.proto.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
)
from kpax.proto.records import encode_columns
from kpax.structs import TopicPartition
from tests.unit.bytewire import Handler, ScriptedBroker, attach, metadata_response

TOPIC = "orders"
VERSIONS = {
    FetchRequest.API_KEY: (4, 12),  # topics by name
    ListOffsetsRequest.API_KEY: (1, 5),
    MetadataRequest.API_KEY: (0, 12),
}


def _batch(first: int, n: int) -> bytes:
    return encode_columns(
        [1_700_000_000_000 + i for i in range(n)],
        [None] * n,
        [b"r%d" % (first + i) for i in range(n)],
        base_offset=first,
    )


def _list_offsets(request: Any, version: int) -> Any:
    R = ListOffsetsResponse
    return R(
        topics=[
            R.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    R.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=0)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


class Log:
    """The records the fake partition holds, served from any offset."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.not_leader_once = False
        self.fetch_offsets: list[int] = []

    def fetch(self, request: Any, version: int) -> Any:
        R = FetchResponse
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                self.fetch_offsets.append(p.fetch_offset)
                if self.not_leader_once:
                    self.not_leader_once = False
                    parts.append(
                        R.PartitionData(
                            partition_index=p.partition, error_code=NotLeaderOrFollowerError.code
                        )
                    )
                    continue
                start = p.fetch_offset
                records = _batch(start, self.n - start) if start < self.n else b""
                parts.append(
                    R.PartitionData(
                        partition_index=p.partition,
                        high_watermark=self.n,
                        last_stable_offset=self.n,
                        log_start_offset=0,
                        records=records,
                    )
                )
            topics.append(R.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return R(responses=topics)


async def _consumer(log: Log) -> tuple[AsyncConsumer, list[ScriptedBroker]]:
    c = AsyncConsumer(
        "127.0.0.1:9",
        auto_offset_reset="earliest",
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        fetch_max_wait_ms=10,
        default_api_timeout_ms=2000,
    )
    cluster = c.cluster
    cluster._adopt(snapshot_from_response(metadata_response(TOPIC), None, [TOPIC]))
    cluster._started = True
    cluster._interest.add(TOPIC)
    handlers: dict[int, Handler] = {
        FetchRequest.API_KEY: log.fetch,
        ListOffsetsRequest.API_KEY: _list_offsets,
        MetadataRequest.API_KEY: lambda request, version: metadata_response(TOPIC),
    }
    brokers = []
    for handle in (cluster.broker(1), cluster.fetch_broker(1)):
        conn, wire = attach(handle, cluster.options, VERSIONS)
        brokers.append(ScriptedBroker(wire, conn, handlers))
    await c.start()
    return c, brokers


async def _poll_until(c: AsyncConsumer, brokers: list[ScriptedBroker], want: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(3000):
        for b in brokers:
            b.pump()
        got += await c.poll(0)
        if len(got) >= want:
            return got
        await asyncio.sleep(0.001)
    raise AssertionError(f"{len(got)} records; brokers saw {[b.log for b in brokers]}")


async def test_reset_then_fetch_hands_every_record_to_poll_in_order() -> None:
    log = Log(50)
    c, brokers = await _consumer(log)
    try:
        tp = TopicPartition(TOPIC, 0)
        await c.assign([tp])
        records = await _poll_until(c, brokers, 50)
        assert [r.offset for r in records] == list(range(50))
        assert [r.value for r in records] == [b"r%d" % i for i in range(50)]
        pipelined, fetching = brokers
        assert "ListOffsets" in pipelined.log  # earliest: the position reset
        assert "Fetch" in fetching.log and "Fetch" not in pipelined.log  # own connection
        assert await c.position(tp) == 50
    finally:
        await c.close(0)


async def test_a_moved_leader_refreshes_metadata_and_fetches_again_from_the_same_offset() -> None:
    log = Log(20)
    c, brokers = await _consumer(log)
    try:
        tp = TopicPartition(TOPIC, 0)
        await c.assign([tp])
        first = await _poll_until(c, brokers, 20)
        log.n = 30
        log.not_leader_once = True
        more = await _poll_until(c, brokers, 10)
        assert [r.offset for r in first + more] == list(range(30))  # no gap, no repeat
        assert log.fetch_offsets.count(20) >= 2  # the failed fetch was repeated at 20
        assert "Metadata" in brokers[0].log  # the leader was looked up again
    finally:
        await c.close(0)
