"""Request/response framing: header versions, size prefix, correlation ids."""

from __future__ import annotations

import struct

import pytest

from kpax.proto.errors import InvalidMessageError, ProtocolError
from kpax.proto.header import (
    decode_response,
    encode_request,
    peek_correlation_id,
    request_header_version,
    response_header_version,
)
from kpax.proto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    RequestHeader,
    ResponseHeader,
)


def test_header_versions() -> None:
    assert request_header_version(3, 8) == 1
    assert request_header_version(3, 9) == 2
    assert response_header_version(3, 8) == 0
    assert response_header_version(3, 9) == 1
    # ApiVersions: flexible from v3, but its response header is always v0
    assert request_header_version(18, 3) == 2
    assert response_header_version(18, 3) == 0
    assert response_header_version(18, 0) == 0
    with pytest.raises(InvalidMessageError, match="unknown api key 9999"):
        request_header_version(9999, 0)


def test_encode_request_frame_v1_header() -> None:
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    frame = encode_request(req, 8, correlation_id=7, client_id="kpax")
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    assert frame[4:12] == struct.pack(">hhi", 3, 8, 7)
    assert frame[12:18] == b"\x00\x04kpax"
    assert frame[18:] == req.encode(8)
    # the generated RequestHeader agrees
    head = RequestHeader(
        request_api_key=3, request_api_version=8, correlation_id=7, client_id="kpax"
    )
    assert frame[4:18] == head.encode(1)


def test_encode_request_frame_v2_header_keeps_classic_client_id() -> None:
    req = ApiVersionsRequest(client_software_name="kpax", client_software_version="0.1.0")
    frame = encode_request(req, 3, correlation_id=1, client_id=None)
    head = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=1, client_id=None
    )
    assert frame[4 : 4 + 11] == head.encode(2)  # int16 -1 client id, then empty tag section
    assert frame[12:14] == b"\xff\xff"
    assert frame[14] == 0
    assert frame[15:] == req.encode(3)


def test_encode_request_bad_version_names_api() -> None:
    with pytest.raises(InvalidMessageError, match=r"ProduceRequest has no version 1"):
        encode_request(ProduceRequest(), 1, 1, "c")


def test_decode_response_flexible_and_not() -> None:
    resp = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)]
    )
    v12 = struct.pack(">i", 99) + b"\x00" + resp.encode(12)
    corr, back = decode_response(v12, 3, 12)
    assert corr == 99
    assert back == resp
    assert peek_correlation_id(v12) == 99
    v8 = struct.pack(">i", 5) + resp.encode(8)
    corr, back = decode_response(memoryview(v8), 3, 8)
    assert (corr, back) == (5, resp)
    # header tagged fields are skipped
    head = ResponseHeader(correlation_id=6, unknown_tags={1: b"x"}).encode(1)
    corr, back = decode_response(head + resp.encode(12), 3, 12)
    assert (corr, back) == (6, resp)


def test_decode_api_versions_response_uses_header_v0() -> None:
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    frame = struct.pack(">i", 1) + resp.encode(3)  # no header tag byte
    corr, back = decode_response(frame, 18, 3)
    assert (corr, back) == (1, resp)


def test_decode_response_errors() -> None:
    with pytest.raises(ProtocolError, match="too short for a correlation id"):
        decode_response(b"\x00\x01", 3, 12)
    with pytest.raises(ProtocolError, match="MetadataResponse v12"):
        decode_response(b"\x00\x00\x00\x01\x00\x01", 3, 12)
    frame = struct.pack(">i", 5) + MetadataResponse().encode(8) + b"zz"
    with pytest.raises(ProtocolError, match=r"correlation id 5.*2 unexpected bytes"):
        decode_response(frame, 3, 8)
