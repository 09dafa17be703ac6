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

from kpax.broker.connection import BrokerConnection
from kpax.cluster.metadata import snapshot_from_response
from kpax.producer.client import AsyncProducer
from kpax.proto.error_codes import NotLeaderOrFollowerError, TopicAuthorizationFailedError
from kpax.proto.errors import KafkaTimeoutError
from kpax.proto.messages import MetadataRequest, MetadataResponse, ProduceRequest
from tests.unit.test_connection_bytes import Wire

TOPIC = "orders"
MR = MetadataResponse


def _metadata_response() -> Any:
    return MR(
        brokers=[MR.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9)],
        cluster_id="c",
        controller_id=1,
        topics=[
            MR.MetadataResponseTopic(
                name=TOPIC,
                partitions=[
                    MR.MetadataResponsePartition(
                        partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
        ],
    )


class FakeBroker:
    """The broker's side of one connection: parses what the producer writes and
    answers with ``on_produce(records) -> error code`` (None: no answer)."""

    def __init__(self, wire: Wire, conn: BrokerConnection) -> None:
        self.wire = wire
        self.conn = conn
        self.seen = 0
        self.log: list[tuple[str, bytes]] = []  # ("produce", records) / ("metadata", b"")
        self.next_offset = 0

    def pump(self, on_produce: Callable[[bytes], int | None]) -> None:
        while self.seen < len(self.wire.written):
            frame = self.wire.written[self.seen]
            self.seen += 1
            _, key, version, corr = struct.unpack_from(">ihhi", frame)
            if key == ProduceRequest.API_KEY:
                records = _produce_records(frame, version)
                self.log.append(("produce", records))
                code = on_produce(records)
                if code is None:
                    continue
                offset = self.next_offset if code == 0 else -1
                if code == 0:
                    self.next_offset += struct.unpack_from(">i", records, 57)[0]
                self._answer(corr, _produce_response(code, offset), flexible=version >= 9)
            elif key == MetadataRequest.API_KEY:
                self.log.append(("metadata", b""))
                body = bytes(_metadata_response().encode(version))
                self._answer(corr, body, flexible=version >= 9)

    def _answer(self, corr: int, body: bytes, flexible: bool) -> None:
        frame = struct.pack(">i", corr) + (b"\x00" if flexible else b"") + body
        data = struct.pack(">i", len(frame)) + frame
        buf = self.conn.get_buffer(len(data))
        buf[: len(data)] = data
        del buf
        self.conn.buffer_updated(len(data))


def _produce_records(frame: bytes, version: int) -> bytes:
    """The one batch of a one-partition Produce request (decoded generically)."""
    from kpax.proto.messages import REQUESTS

    cls = REQUESTS[ProduceRequest.API_KEY]
    header = 4 + 2 + 2 + 4
    (clen,) = struct.unpack_from(">h", frame, header)
    pos = header + 2 + max(clen, 0) + (1 if version >= 9 else 0)
    req = cls.decode(memoryview(frame)[pos:], version)
    return bytes(req.topic_data[0].partition_data[0].records)


def _produce_response(code: int, offset: int) -> bytes:
    # ProduceResponse v9+ (flexible): one topic, one partition
    return (
        b"\x02"
        + bytes([len(TOPIC) + 1])
        + TOPIC.encode()
        + b"\x02"
        + struct.pack(">ihqqq", 0, code, offset, -1, 0)
        + b"\x01\x00\x00"  # record_errors, error_message, partition tags
        + b"\x00"  # topic tags
        + struct.pack(">i", 0)
        + b"\x00"
    )


async def _producer(**config: Any) -> tuple[AsyncProducer, FakeBroker]:
    """An AsyncProducer whose one broker is the test: its connection writes into
    a Wire, its metadata comes from a Metadata response. (127.0.0.1:9 refuses
    at once should the producer try a real connection: after a timeout.)"""
    p = AsyncProducer(
        "127.0.0.1:9",
        enable_idempotence=False,
        acks=1,
        linger_ms=0,
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        max_in_flight_requests_per_connection=1,
        **config,
    )
    cluster = p.cluster
    cluster._adopt(snapshot_from_response(_metadata_response(), None, [TOPIC]))
    cluster._started = True
    conn = BrokerConnection("127.0.0.1", 9, cluster.options, node_id=1)
    wire = Wire()
    conn.connection_made(wire)
    conn.api_versions = {ProduceRequest.API_KEY: (3, 11), MetadataRequest.API_KEY: (0, 12)}
    cluster.broker(1)._conn = conn
    p.num_partitions[TOPIC] = 1
    # start the sender without bootstrapping (the cluster is already known)
    p._loop = asyncio.get_running_loop()
    p._memory_event = asyncio.Event()
    p._started = True
    p._task = asyncio.ensure_future(p.sender.run())
    return p, FakeBroker(wire, conn)


async def _run_until(
    broker: FakeBroker, on_produce: Callable[[bytes], int | None], done: Any
) -> None:
    for _ in range(2000):
        broker.pump(on_produce)
        if done():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"not done; broker saw {[k for k, _ in broker.log]}")


async def _stop(p: AsyncProducer) -> None:
    p.sender.stopped = True
    p.sender.wake()
    assert p._task is not None
    p._task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await p._task


async def test_not_leader_refreshes_metadata_and_resends_the_same_bytes() -> None:
    p, broker = await _producer()
    try:
        futures = [await p.send(TOPIC, b"v%d" % i) for i in range(3)]
        answers = iter([NotLeaderOrFollowerError.code, 0])
        await _run_until(
            broker, lambda records: next(answers), lambda: all(f.done() for f in futures)
        )
        offsets = [(await f).offset for f in futures]
        assert offsets == [0, 1, 2]
        kinds = [k for k, _ in broker.log]
        assert kinds == ["produce", "metadata", "produce"]  # refreshed before the retry
        assert broker.log[0][1] == broker.log[2][1]  # the very same batch bytes
        assert p.sender.retried_batches == 1
    finally:
        await _stop(p)


async def test_a_final_error_fails_the_batch_naming_the_partition() -> None:
    p, broker = await _producer()
    try:
        future = await p.send(TOPIC, b"secret")
        await _run_until(broker, lambda records: TopicAuthorizationFailedError.code, future.done)
        with pytest.raises(TopicAuthorizationFailedError, match=f"{TOPIC}-0"):
            await future
        assert [k for k, _ in broker.log] == ["produce"]  # not retried
    finally:
        await _stop(p)


async def test_no_answer_ends_in_a_delivery_timeout_in_bounded_time() -> None:
    p, broker = await _producer(request_timeout_ms=100, delivery_timeout_ms=300)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        future = await p.send(TOPIC, b"lost")
        await _run_until(broker, lambda records: None, future.done)
        with pytest.raises(KafkaTimeoutError, match=f"{TOPIC}-0"):
            await future
        assert loop.time() - started < 1.5
    finally:
        await _stop(p)


def test_the_produce_request_decoder_reads_what_the_sender_writes() -> None:
    """The helper above reads the batch out of a Produce request: check it on the
    generated encoder's frames."""
    from kpax.proto.header import encode_request

    req = ProduceRequest(
        acks=1,
        timeout_ms=1,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"xyz")],
            )
        ],
    )
    for version in (3, 8, 9, 11):
        assert _produce_records(encode_request(req, version, 5, "kpax"), version) == b"xyz"
