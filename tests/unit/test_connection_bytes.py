"""The broker connection driven with plain bytes, in milliseconds: the test
plays the broker's side of the byte stream (reads the request frames the
connection writes, answers with response frames), so the send queue, the
in-flight limit, cancellation, write pauses and timeouts are checked without
a socket. What a real broker does with the requests is
tests/integration/test_connection*.py's job."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from kpax.broker.connection import BrokerConnection
from kpax.broker.options import ConnectionOptions
from kpax.proto.errors import KafkaConnectionError, KafkaTimeoutError, ProtocolError
from kpax.proto.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from kpax.proto.produce_wire import decode_produce_response, encode_produce
from tests.unit.bytewire import Wire, connection


def _connection(**options: Any) -> tuple[BrokerConnection, Wire]:
    return connection(
        ConnectionOptions(**options),
        {
            MetadataRequest.API_KEY: (0, 12),
            ProduceRequest.API_KEY: (3, 13),
            ApiVersionsRequest.API_KEY: (0, 4),
        },
    )


def _answer(conn: BrokerConnection, correlation_id: int, body: bytes, flexible: bool) -> None:
    """Feed the connection one response frame, one byte at a time."""
    frame = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"") + body
    data = struct.pack(">i", len(frame)) + frame
    for i in range(len(data)):
        buf = conn.get_buffer(1)
        buf[0] = data[i]
        del buf
        conn.buffer_updated(1)


def _metadata(version: int = 12) -> bytes:
    return bytes(MetadataResponse(cluster_id="c").encode(version))


async def test_requests_go_out_in_call_order_within_the_in_flight_limit() -> None:
    conn, wire = _connection(max_in_flight=2)
    futures = [conn.submit(MetadataRequest(topics=[]), version=12) for _ in range(5)]
    assert len(wire.written) == 2  # the limit: the others wait in the queue
    ids = [c for _, _, c in wire.requests()]
    for n in range(5):
        _answer(conn, ids[n], _metadata(), flexible=True)
        ids = [c for _, _, c in wire.requests()]
        assert len(wire.written) == min(n + 3, 5)  # each answer frees one slot
    assert ids == sorted(ids) and len(set(ids)) == 5
    for f in futures:
        assert (await f).cluster_id == "c"
    assert conn.in_flight == 0


async def test_a_request_cancelled_before_it_is_written_is_withdrawn() -> None:
    conn, wire = _connection(max_in_flight=1)
    first = conn.submit(MetadataRequest(topics=[]), version=12)
    second = conn.submit(MetadataRequest(topics=[]), version=12)
    third = conn.submit(MetadataRequest(topics=[]), version=12)
    second.cancel()
    ((_, _, c1),) = wire.requests()
    _answer(conn, c1, _metadata(), flexible=True)
    assert (await first).cluster_id == "c"
    # the cancelled one never reached the wire: the third went next
    assert len(wire.written) == 2
    _answer(conn, wire.requests()[1][2], _metadata(), flexible=True)
    assert (await third).cluster_id == "c"


async def test_an_answer_to_a_cancelled_request_is_dropped_and_the_next_matched() -> None:
    conn, wire = _connection()
    a = conn.submit(MetadataRequest(topics=[]), version=12)
    b = conn.submit(MetadataRequest(topics=[]), version=12)
    a.cancel()  # after it was written
    (_, _, ca), (_, _, cb) = wire.requests()
    _answer(conn, ca, _metadata(), flexible=True)
    _answer(conn, cb, _metadata(), flexible=True)
    assert (await b).cluster_id == "c"
    assert not wire.closed


async def test_a_full_write_buffer_holds_requests_back_in_order() -> None:
    conn, wire = _connection()
    conn.pause_writing()
    futures = [conn.submit(MetadataRequest(topics=[]), version=12) for _ in range(3)]
    assert wire.written == []
    conn.resume_writing()
    ids = [c for _, _, c in wire.requests()]
    assert len(ids) == 3 and ids == sorted(ids)
    for c in ids:
        _answer(conn, c, _metadata(), flexible=True)
    assert [(await f).cluster_id for f in futures] == ["c"] * 3


async def test_an_unanswered_request_times_out_and_closes_the_connection() -> None:
    conn, wire = _connection(request_timeout_ms=50)
    late = conn.submit(MetadataRequest(topics=[]), version=12)
    queued_later = conn.submit(MetadataRequest(topics=[]), version=12, timeout=10.0)
    with pytest.raises(KafkaTimeoutError, match="Metadata request to broker 1"):
        await asyncio.wait_for(late, 2.0)
    assert wire.closed and conn.closed
    with pytest.raises(KafkaConnectionError):
        await queued_later  # failed with the connection, not left pending
    with pytest.raises(KafkaConnectionError):
        conn.submit(MetadataRequest(topics=[]), version=12)


async def test_a_response_out_of_order_closes_the_connection_naming_both_ids() -> None:
    conn, wire = _connection()
    f = conn.submit(MetadataRequest(topics=[]), version=12)
    ((_, _, corr),) = wire.requests()
    _answer(conn, corr + 7, _metadata(), flexible=True)
    with pytest.raises(ProtocolError, match=f"correlation id {corr + 7} .*correlation id {corr}"):
        await f  # the request in flight fails with the protocol error itself
    assert wire.closed


async def test_the_producers_path_raw_frames_in_flat_tuples_out() -> None:
    """What the sender does: its own frame encoder and response decoder."""
    conn, wire = _connection()
    records = b"\x00" * 100
    future = conn.submit(
        None,
        request_cls=ProduceRequest,
        version=9,
        encode=lambda c: encode_produce(9, c, "kpax", None, 1, 1000, [("t", [(0, records)])]),
        decode=lambda frame: decode_produce_response(frame, 9),
    )
    ((key, version, corr),) = wire.requests()
    assert (key, version) == (ProduceRequest.API_KEY, 9)
    assert wire.written[0].endswith(records + b"\x00\x00\x00")  # partition, topic, request tags
    # a ProduceResponse v9: one topic "t", partition 0 at offset 42, no error
    body = (
        b"\x02"
        + b"\x02t"
        + b"\x02"
        + struct.pack(">ihqqq", 0, 0, 42, -1, 0)
        + b"\x01"
        + b"\x00"
        + b"\x00"  # record_errors, error_message, partition tags
        + b"\x00"  # topic tags
        + struct.pack(">i", 0)
        + b"\x00"  # throttle, response tags
    )
    _answer(conn, corr, body, flexible=True)
    assert await future == (0, [("t", 0, 0, 42, -1, None)])


async def test_acks_0_is_written_and_done() -> None:
    conn, wire = _connection()
    future = conn.submit(
        None,
        request_cls=ProduceRequest,
        version=9,
        encode=lambda c: encode_produce(9, c, "kpax", None, 0, 1000, [("t", [(0, b"x")])]),
        expect_response=False,
    )
    assert future.done() and future.result() is None
    assert len(wire.written) == 1 and conn.in_flight == 0
