"""The producer's sender driven with plain bytes, in milliseconds: the test
plays the broker on the connection's byte stream (Produce and Metadata
requests in, response frames out), so retries, errors and delivery timeouts
are checked request by request without a socket. The real broker's side is
tests/integration/test_producer*.py's job."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

import pytest

from kpax.cluster.metadata import snapshot_from_response
from kpax.producer.client import AsyncProducer
from kpax.proto.error_codes import NotLeaderOrFollowerError, TopicAuthorizationFailedError
from kpax.proto.errors import KafkaTimeoutError
from kpax.proto.messages import MetadataRequest, ProduceRequest, ProduceResponse
from tests.unit.bytewire import ScriptedBroker, attach, metadata_response, serve

TOPIC = "orders"


def _metadata_response() -> Any:
    return metadata_response(TOPIC)


class Partition:
    """The one partition's log: answers each Produce with ``answer(records)``
    (an error code, or None: no answer) and keeps what it was sent."""

    def __init__(self, answer: Callable[[bytes], int | None]) -> None:
        self.answer = answer
        self.batches: list[bytes] = []
        self.next_offset = 0

    def produce(self, request: Any, version: int) -> Any:
        records = bytes(request.topic_data[0].partition_data[0].records)
        self.batches.append(records)
        code = self.answer(records)
        if code is None:
            return None
        offset = -1
        if code == 0:
            offset = self.next_offset
            self.next_offset += struct.unpack_from(">i", records, 57)[0]  # record count
        R = ProduceResponse
        return R(
            responses=[
                R.TopicProduceResponse(
                    name=TOPIC,
                    partition_responses=[
                        R.PartitionProduceResponse(index=0, error_code=code, base_offset=offset)
                    ],
                )
            ]
        )


async def _producer(partition: Partition, **config: Any) -> tuple[AsyncProducer, ScriptedBroker]:
    """An AsyncProducer whose one broker is the test: its connection writes into
    a Wire, its metadata comes from a Metadata response. (127.0.0.1:9 refuses
    at once should the producer try a real connection: after a timeout.)"""
    options: dict[str, Any] = {
        "enable_idempotence": False,
        "acks": 1,
        "linger_ms": 0,
        "retry_backoff_ms": 1,
        "retry_backoff_max_ms": 5,
        "max_in_flight_requests_per_connection": 1,
    }
    p = AsyncProducer("127.0.0.1:9", **(options | config))
    cluster = p.cluster
    cluster._adopt(snapshot_from_response(_metadata_response(), None, [TOPIC]))
    cluster._started = True
    conn, wire = attach(
        cluster.broker(1),
        cluster.options,
        {ProduceRequest.API_KEY: (3, 11), MetadataRequest.API_KEY: (0, 12)},
    )
    p.num_partitions[TOPIC] = 1
    # start the sender without bootstrapping (the cluster is already known)
    p._loop = asyncio.get_running_loop()
    p._memory_event = asyncio.Event()
    p._started = True
    p._task = asyncio.ensure_future(p.sender.run())
    handlers = {
        ProduceRequest.API_KEY: partition.produce,
        MetadataRequest.API_KEY: lambda request, version: _metadata_response(),
    }
    return p, ScriptedBroker(wire, conn, handlers)


async def _stop(p: AsyncProducer) -> None:
    p.sender.stopped = True
    p.sender.wake()
    assert p._task is not None
    p._task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await p._task


async def test_not_leader_refreshes_metadata_and_resends_the_same_bytes() -> None:
    answers = iter([NotLeaderOrFollowerError.code, 0])
    partition = Partition(lambda records: next(answers))
    p, broker = await _producer(partition, linger_ms=200)  # the three in one batch
    try:
        futures = [await p.send(TOPIC, b"v%d" % i) for i in range(3)]
        await serve([broker], lambda: all(f.done() for f in futures))
        offsets = [(await f).offset for f in futures]
        assert offsets == [0, 1, 2]
        assert broker.log == ["Produce", "Metadata", "Produce"]  # refreshed before the retry
        assert partition.batches[0] == partition.batches[1]  # the very same batch bytes
        assert p.sender.retried_batches == 1
    finally:
        await _stop(p)


async def test_a_final_error_fails_the_batch_naming_the_partition() -> None:
    p, broker = await _producer(Partition(lambda records: TopicAuthorizationFailedError.code))
    try:
        future = await p.send(TOPIC, b"secret")
        await serve([broker], future.done)
        with pytest.raises(TopicAuthorizationFailedError, match=f"{TOPIC}-0"):
            await future
        assert broker.log == ["Produce"]  # not retried
    finally:
        await _stop(p)


async def test_no_answer_ends_in_a_delivery_timeout_in_bounded_time() -> None:
    p, broker = await _producer(
        Partition(lambda records: None), request_timeout_ms=100, delivery_timeout_ms=300
    )
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        future = await p.send(TOPIC, b"lost")
        await serve([broker], future.done)
        with pytest.raises(KafkaTimeoutError, match=f"{TOPIC}-0"):
            await future
        assert loop.time() - started < 1.5
    finally:
        await _stop(p)
