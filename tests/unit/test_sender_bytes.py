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
from kpax.proto.messages import (
    InitProducerIdRequest,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)
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
        {
            ProduceRequest.API_KEY: (3, 11),
            MetadataRequest.API_KEY: (0, 12),
            InitProducerIdRequest.API_KEY: (0, 4),
        },
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


class SequencedLog:
    """One partition of a broker that checks an idempotent producer's batches
    as Kafka does: timestamps first (a record stamped before ``min_timestamp``
    fails its whole batch with INVALID_TIMESTAMP), then the producer epoch and
    sequence (a newer epoch must start at 0, the same one continue at the last
    sequence + 1, else OUT_OF_ORDER_SEQUENCE_NUMBER). Keeps the values written."""

    def __init__(self, min_timestamp: int) -> None:
        self.min_timestamp = min_timestamp
        self.epoch = -1
        self.next_sequence = 0
        self.values: list[bytes | None] = []
        self.init_calls = 0

    def produce(self, request: Any, version: int) -> Any:
        from kpax.proto.error_codes import (
            InvalidProducerEpochError,
            InvalidTimestampError,
            OutOfOrderSequenceNumberError,
        )
        from kpax.proto.records import decode_batches

        records = bytes(request.topic_data[0].partition_data[0].records)
        _, epoch, base_sequence, count = struct.unpack_from(">qhii", records, 43)
        (batch,) = decode_batches(records)
        code, offset = 0, -1
        if any(r.timestamp < self.min_timestamp for r in batch):
            code = InvalidTimestampError.code
        elif epoch < self.epoch:
            code = InvalidProducerEpochError.code
        elif base_sequence != (0 if epoch > self.epoch else self.next_sequence):
            code = OutOfOrderSequenceNumberError.code
        else:
            self.epoch, self.next_sequence = epoch, base_sequence + count
            offset = len(self.values)
            self.values.extend(r.value for r in batch)
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

    def init_producer_id(self, request: Any, version: int) -> Any:
        from kpax.proto.messages import InitProducerIdResponse

        self.init_calls += 1  # (a bump asks with the current id and epoch: one more)
        return InitProducerIdResponse(producer_id=7, producer_epoch=self.init_calls - 1)


async def test_a_batch_refused_with_invalid_timestamp_gives_its_sequences_back() -> None:
    """INVALID_TIMESTAMP fails the batch (its records) but writes nothing: its
    sequence numbers go back to the partition -- the batches after it, in
    flight and waiting, are renumbered -- so they are written once and in
    order with the same producer id and epoch: no epoch bump (which would
    restart every partition's sequences), as Java's producer does."""
    from kpax.proto.error_codes import InvalidTimestampError

    log = SequencedLog(min_timestamp=1_000_000)
    p, broker = await _producer(
        Partition(lambda records: 0),
        enable_idempotence=True,
        acks="all",
        max_in_flight_requests_per_connection=5,
    )
    broker.handlers[ProduceRequest.API_KEY] = log.produce
    broker.handlers[InitProducerIdRequest.API_KEY] = log.init_producer_id
    p.sender.pipeline_min_batch_bytes = 0  # (these tiny batches pipelined: four in flight)

    try:
        first = await p.send(TOPIC, b"first")
        await serve([broker], first.done)

        async def batch(*values: bytes, timestamp: int | None = None) -> list[Any]:
            # one batch: sent in one go, then the sender's round writes it
            sent = [p.send(TOPIC, v, timestamp=timestamp) for v in values]
            futs = [await s for s in sent]
            for _ in range(5):
                await asyncio.sleep(0)
            return futs

        bad = await batch(b"bad", b"same batch", timestamp=1)
        later = await batch(b"c1", b"c2") + await batch(b"d") + await batch(b"e")
        assert len(p.accumulator.queues[TOPIC][0].in_flight) == 4  # nothing answered yet
        await serve([broker], lambda: all(f.done() for f in bad + later))
        for f in bad:
            with pytest.raises(InvalidTimestampError, match=f"{TOPIC}-0"):
                await f
        assert [(await f).offset for f in [first, *later]] == [0, 1, 2, 3, 4]
        assert log.values == [b"first", b"c1", b"c2", b"d", b"e"]  # once each, in order
        assert log.init_calls == 1 and p.identity is not None
        assert (p.identity.producer_id, p.identity.producer_epoch, p.identity.bumps) == (7, 0, 0)
        assert log.next_sequence == 5
        # and the partition goes on
        more = await p.send(TOPIC, b"more")
        await serve([broker], more.done)
        assert (await more).offset == 5 and log.next_sequence == 6
    finally:
        await _stop(p)
