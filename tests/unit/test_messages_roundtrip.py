"""Every message, every valid version: decode(encode(x)) == x, plus the error cases.

Strategies come from the generated schema table (see test_messages_schema.py).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.proto.api import Message
from kpax.proto.errors import InvalidMessageError, ProtocolError
from kpax.proto.messages import (
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from tests.unit.test_messages_schema import all_messages, strategy, versions

ALL = all_messages()


def _flexible(cls: type[Message], v: int) -> bool:
    return cls.is_flexible(v)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_roundtrip_every_version(cls: type[Message]) -> None:
    vs = versions(cls)
    pairs = st.sampled_from(vs).flatmap(
        lambda v: st.tuples(st.just(v), strategy(cls.__name__, v, _flexible(cls, v)))
    )

    @settings(
        max_examples=min(60, 8 + 3 * len(vs)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(pairs)
    def check(pair: tuple[int, Message]) -> None:
        v, obj = pair
        data = obj.encode(v)
        back = type(obj).decode(data, v)
        assert back == obj
        assert back.encode(v) == data
        # decode accepts memoryview and bytearray too
        assert type(obj).decode(memoryview(bytearray(data)), v) == obj

    # every version at least once with defaults
    for v in vs:
        obj = cls()
        assert cls.decode(obj.encode(v), v) == obj
    check()


def test_unknown_tags_survive_decode_encode() -> None:
    top_tags = {7: b"\x01\x02", 100: b""}
    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t", unknown_tags={3: b"xyz"})],
        unknown_tags=top_tags,
    )
    data = req.encode(12)
    back = MetadataRequest.decode(data, 12)
    assert back.unknown_tags == top_tags
    assert back.topics[0].unknown_tags == {3: b"xyz"}
    assert back.encode(12) == data
    # unknown tags mixed with known ones (FetchResponse.PartitionData has tags 0, 1, 2)
    part = FetchResponse.PartitionData(
        partition_index=1,
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=4),
        unknown_tags={1000: b"z", 5: b"five"},
        records=b"abc",
    )
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[part])])
    data = resp.encode(16)
    back2 = FetchResponse.decode(data, 16)
    assert back2 == resp
    assert back2.encode(16) == data


def test_unsupported_version_names_api_and_range() -> None:
    with pytest.raises(InvalidMessageError, match=r"ProduceRequest has no version 2: .*3-13"):
        ProduceRequest().encode(2)
    with pytest.raises(InvalidMessageError, match=r"MetadataResponse has no version 99"):
        MetadataResponse.decode(b"", 99)


def test_field_absent_in_version_with_non_default_value() -> None:
    req = JoinGroupRequest(group_id="g", group_instance_id="static-1")
    with pytest.raises(InvalidMessageError, match=r"group_instance_id.*versions 5\+.*") as ei:
        req.encode(4)
    assert "JoinGroupRequest v4" in str(ei.value)
    # same field at its default encodes fine
    JoinGroupRequest(group_id="g").encode(4)
    # nested struct field: FetchRequest.FetchTopic.topic_id appears in v13 (ignorable: dropped)
    FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", topic_id=uuid.uuid4())]).encode(12)
    # a non-ignorable nested field: FetchPartition.current_leader_epoch exists from v9
    bad = FetchRequest(
        topics=[
            FetchRequest.FetchTopic(partitions=[FetchRequest.FetchPartition(last_fetched_epoch=3)])
        ]
    )
    with pytest.raises(InvalidMessageError, match="last_fetched_epoch"):
        bad.encode(11)


def test_null_in_non_nullable_version_is_an_encode_error() -> None:
    with pytest.raises(InvalidMessageError, match="cannot encode MetadataRequest v0"):
        MetadataRequest(topics=None).encode(0)
    MetadataRequest(topics=None).encode(1)  # nullable from v1: all topics


def test_records_decode_as_zero_copy_views() -> None:
    payload = bytes(range(256)) * 10
    resp = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=[FetchResponse.PartitionData(partition_index=0, records=payload)],
            )
        ]
    )
    data = bytearray(resp.encode(17))
    back = FetchResponse.decode(data, 17)
    rec = back.responses[0].partitions[0].records
    assert isinstance(rec, memoryview)
    assert rec == payload
    assert rec.obj is data  # a slice of the input, not a copy


def test_api_versions_response_v0_layout() -> None:
    r = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=13)],
    )
    assert r.encode(0) == bytes.fromhex("00000000000100000003000d")


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x00\x00", b"\xff" * 7, b"\x00\x00\x00\x00\x7f\xff\xff\xff"],
)
def test_garbage_raises_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError, match="MetadataResponse v12"):
        MetadataResponse.decode(data, 12)


def test_trailing_bytes_rejected() -> None:
    data = MetadataResponse().encode(12) + b"\x00"
    with pytest.raises(ProtocolError, match="1 unexpected bytes"):
        MetadataResponse.decode(data, 12)


def test_map_key_views() -> None:
    resp = MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=2, host="b", port=1),
            MetadataResponse.MetadataResponseBroker(node_id=1, host="a", port=1),
        ],
        topics=[MetadataResponse.MetadataResponseTopic(name="orders")],
    )
    assert resp.brokers_by_node_id()[1].host == "a"
    assert resp.topics_by_name()["orders"] is resp.topics[0]
