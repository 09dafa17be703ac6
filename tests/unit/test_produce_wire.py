"""kpax.proto.produce_wire against the generated ProduceRequest/ProduceResponse:
the same bytes out, the same fields in, for every version and random content;
corrupt frames give ProtocolError, never anything else."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.proto.accel import speedups
from kpax.proto.errors import InvalidMessageError, KafkaError, ProtocolError
from kpax.proto.header import decode_response, encode_request
from kpax.proto.messages import ProduceRequest, ProduceResponse
from kpax.proto.produce_wire import (
    MAX_VERSION,
    MIN_VERSION,
    decode_produce_response,
    encode_produce,
    py_decode_produce_response,
    py_encode_produce,
)
from tests.unit.test_messages_schema import strategy

VERSIONS = list(range(MIN_VERSION, MAX_VERSION + 1))
_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


def _requests() -> st.SearchStrategy[tuple[int, Any]]:
    return st.sampled_from(VERSIONS).flatmap(
        lambda v: st.tuples(st.just(v), strategy("ProduceRequest", v, v >= 9))
    )


def _responses() -> st.SearchStrategy[tuple[int, Any]]:
    return st.sampled_from(VERSIONS).flatmap(
        lambda v: st.tuples(st.just(v), strategy("ProduceResponse", v, v >= 9))
    )


def _frame(resp: Any, version: int, correlation_id: int = 7) -> bytes:
    head = struct.pack(">i", correlation_id) + (b"\x00" if version >= 9 else b"")
    return head + bytes(resp.encode(version))


def _expected(resp: Any, version: int) -> list[tuple[Any, ...]]:
    out = []
    for t in resp.responses:
        topic = t.topic_id.bytes if version >= 13 else (t.name or "")
        for p in t.partition_responses:
            message = p.error_message if version >= 8 else None
            if message is None and version >= 8 and p.record_errors:
                message = "; ".join(
                    f"record {e.batch_index}: {e.batch_index_error_message or 'no message'}"
                    for e in p.record_errors
                )
            out.append((topic, p.index, p.error_code, p.base_offset, p.log_append_time_ms, message))
    return out


@given(
    _requests(),
    st.integers(0, 2**31 - 1),
    st.one_of(st.none(), st.text(max_size=20)),
)
@_SETTINGS
def test_request_bytes_equal_the_generated_encoder(
    pair: tuple[int, Any], correlation_id: int, client_id: str | None
) -> None:
    version, req = pair
    topics = [
        (
            t.topic_id if version >= 13 else t.name,
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data],
        )
        for t in req.topic_data
    ]
    clean = ProduceRequest(  # the strategy may add unknown tagged fields: kpax sends none
        transactional_id=req.transactional_id,
        acks=req.acks,
        timeout_ms=req.timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=t.name,
                topic_id=t.topic_id,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=p.index, records=p.records)
                    for p in t.partition_data
                ],
            )
            for t in req.topic_data
        ],
    )
    want = encode_request(clean, version, correlation_id, client_id)
    got = encode_produce(
        version, correlation_id, client_id, req.transactional_id, req.acks, req.timeout_ms, topics
    )
    assert got == want
    # the C path (where built) and the Python reference: the same bytes
    args = (version, correlation_id, client_id, req.transactional_id, req.acks, req.timeout_ms)
    assert py_encode_produce(*args, topics) == want


@given(_responses())
@_SETTINGS
def test_response_fields_equal_the_generated_decoder(pair: tuple[int, Any]) -> None:
    version, resp = pair
    frame = _frame(resp, version)
    throttle, results = decode_produce_response(frame, version)
    _, generic = decode_response(frame, 0, version)
    assert throttle == generic.throttle_time_ms
    assert results == _expected(generic, version)
    assert py_decode_produce_response(frame, version) == (throttle, results)
    # memoryview and bytearray frames read the same
    assert decode_produce_response(memoryview(bytearray(frame)), version) == (throttle, results)


@given(_responses(), st.data())
@_SETTINGS
def test_corrupt_frames_raise_protocol_error_only(
    pair: tuple[int, Any], data: st.DataObject
) -> None:
    version, resp = pair
    frame = bytearray(_frame(resp, version))
    cut = data.draw(st.integers(4, max(4, len(frame) - 1)))
    for bad in (bytes(frame[:cut]), bytes(frame) + b"\x00"):
        with pytest.raises(ProtocolError):
            decode_produce_response(bad, version)
        with pytest.raises(ProtocolError):
            py_decode_produce_response(bad, version)
    # flipped bytes: an error is a ProtocolError; a success agrees with the generic decoder
    for _ in range(3):
        i = data.draw(st.integers(4, len(frame) - 1))
        mutated = bytearray(frame)
        mutated[i] ^= data.draw(st.integers(1, 255))
        try:
            got = decode_produce_response(bytes(mutated), version)
        except ProtocolError:
            with pytest.raises(ProtocolError):  # C and Python agree
                py_decode_produce_response(bytes(mutated), version)
            continue
        assert py_decode_produce_response(bytes(mutated), version) == got
        try:
            _, generic = decode_response(bytes(mutated), 0, version)
        except KafkaError:
            continue  # a tagged field's content only the generic decoder reads
        assert got == (generic.throttle_time_ms, _expected(generic, version))


def test_versions_and_topic_keys_are_checked() -> None:
    with pytest.raises(InvalidMessageError):
        encode_produce(14, 1, "c", None, 1, 1000, [])
    with pytest.raises(InvalidMessageError, match="by id"):
        encode_produce(13, 1, "c", None, 1, 1000, [("t", [(0, b"")])])
    with pytest.raises(InvalidMessageError, match="by name"):
        encode_produce(12, 1, "c", None, 1, 1000, [(uuid.uuid4(), [(0, b"")])])


def test_a_typical_request_is_one_copy_of_the_records() -> None:
    records = bytes(range(256)) * 64
    frame = encode_produce(9, 5, "kpax", None, -1, 30000, [("topic", [(0, records)])])
    req = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="topic",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    assert frame == encode_request(req, 9, 5, "kpax")
    assert len(frame) - len(records) < 64
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="topic",
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(index=0, base_offset=42)
                ],
            )
        ]
    )
    assert decode_produce_response(_frame(resp, 9), 9) == (0, [("topic", 0, 0, 42, -1, None)])


@pytest.mark.skipif(speedups is None, reason="the C accelerator is not built")
def test_the_c_codec_takes_the_producers_requests_and_answers() -> None:
    """What the sender sends and reads goes through C, not the reference; the
    rare and the malformed are declined (NotImplemented) to the reference."""
    tid = uuid.uuid4()
    topics = [(tid, [(0, b"r" * 100), (4, b"s")])]
    frame = speedups.encode_produce(13, 9, "kpax-producer-1", None, -1, 30000, topics)
    assert frame == py_encode_produce(13, 9, "kpax-producer-1", None, -1, 30000, topics)
    answer = (
        struct.pack(">i", 9)
        + b"\x00\x02"
        + tid.bytes
        + b"\x02"
        + struct.pack(">ihqqq", 0, 0, 100, -1, 0)
        + b"\x01\x00\x00\x00"
        + struct.pack(">i", 0)
        + b"\x00"
    )
    assert speedups.decode_produce_response(answer, 13) == (0, [(tid.bytes, 0, 0, 100, -1, None)])
    assert speedups.decode_produce_response(answer[:-1], 13) is NotImplemented
    assert speedups.encode_produce(14, 1, "c", None, 1, 1000, []) is NotImplemented
    assert speedups.encode_produce(13, 1, "c", None, 1, 1000, [("t", [(0, b"")])]) is NotImplemented
    assert speedups.encode_produce(9, 1, "c", None, 1, 1000, [("t", [(2**31, b"")])]) is (
        NotImplemented
    )
