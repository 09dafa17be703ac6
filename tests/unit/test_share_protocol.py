"""The share consumer's sans-I/O parts: acknowledgement batches, share session
epochs, and a ShareFetch partition's bytes turned into the acquired records
(property tests and fuzzing on real RecordBatch bytes)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.consumer.share.acks import GAP, AcknowledgeType, ack_batches, parse_ack_type
from kpax.consumer.share.decode import Acquired, decode_acquired
from kpax.consumer.share.session import (
    ShareSession,
    acknowledge_request,
    fetch_request,
)
from kpax.proto.errors import CorruptRecordError, KafkaError, SerializationError
from kpax.proto.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kpax.proto.records import Record, encode_batch
from kpax.proto.records.control import COMMIT, ControlRecord
from kpax.structs import TopicPartition

CAP = 64 << 20
ACCEPT, RELEASE, REJECT = (
    int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
)


# ---------------------------------------------------------------- acknowledgements


@given(st.dictionaries(st.integers(0, 300), st.sampled_from([0, 1, 2, 3, 4]), max_size=120))
def test_ack_batches_say_exactly_what_was_given(acks: dict[int, int]) -> None:
    batches = ack_batches(acks)
    back: dict[int, int] = {}
    previous_last = -2
    for first, last, types in batches:
        assert first <= last
        assert first > previous_last + 1  # runs are maximal: a gap between batches
        previous_last = last
        assert len(types) in (1, last - first + 1)
        if len(types) == last - first + 1 and len(types) > 1:
            assert len(set(types)) > 1  # one type is sent once
        for i, offset in enumerate(range(first, last + 1)):
            back[offset] = types[0] if len(types) == 1 else types[i]
    assert back == acks


def test_ack_batches_examples() -> None:
    assert ack_batches({}) == []
    assert ack_batches({5: 1, 6: 1, 7: 1}) == [(5, 7, [1])]
    assert ack_batches({5: 1, 6: 2, 9: 3}) == [(5, 6, [1, 2]), (9, 9, [3])]


def test_parse_ack_type() -> None:
    assert parse_ack_type("reject") is AcknowledgeType.REJECT
    assert parse_ack_type(" Release ") is AcknowledgeType.RELEASE
    assert parse_ack_type(4) is AcknowledgeType.RENEW
    assert parse_ack_type(AcknowledgeType.ACCEPT) is AcknowledgeType.ACCEPT
    for bad in ("gap", 0, 5, True, None, 1.0):
        with pytest.raises(ValueError, match="ACCEPT, RELEASE, REJECT, RENEW"):
            parse_ack_type(bad)
    assert str(AcknowledgeType.RENEW) == "renew"


# ---------------------------------------------------------------- sessions

TP = [TopicPartition("t", p) for p in range(4)]
IDS = {"t": uuid.UUID(int=7)}


def test_session_epochs_and_incremental_partitions() -> None:
    s = ShareSession(1)
    assert not s.open and s.epoch == 0
    add, forget = s.plan(TP[:2])
    assert (add, forget) == (set(TP[:2]), set())
    s.sending(add, forget)
    s.answered()
    assert s.open and s.epoch == 1 and s.partitions == set(TP[:2])
    add, forget = s.plan([TP[1], TP[2]])
    assert (add, forget) == ({TP[2]}, {TP[0]})
    s.sending(add, forget)
    s.answered()
    assert s.epoch == 2 and s.partitions == {TP[1], TP[2]}
    s.drop([TP[1]])
    assert s.plan([TP[1], TP[2]]) == ({TP[1]}, set())
    s.reset()
    assert s.epoch == 0 and not s.partitions
    s.epoch = 2**31 - 1
    s.answered()
    assert s.epoch == 1  # wraps to 1, never to 0 (which opens) or -1 (which closes)


def test_requests_carry_the_acknowledgements_by_topic_id() -> None:
    acks = {TP[0]: {10: ACCEPT, 11: ACCEPT, 13: RELEASE}}
    req = fetch_request(
        "g",
        "m",
        3,
        fetch=[TP[1]],
        forget=[TP[2]],
        acks=acks,
        topic_ids=IDS,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=100,
        max_records=50,
        batch_size=50,
        acquire_mode=0,
    )
    assert isinstance(req, ShareFetchRequest)
    assert req.share_session_epoch == 3
    (topic,) = req.topics
    assert topic.topic_id == IDS["t"]
    parts = {p.partition_index: p for p in topic.partitions}
    assert set(parts) == {0, 1}
    assert [
        (b.first_offset, b.last_offset, b.acknowledge_types)
        for b in parts[0].acknowledgement_batches
    ] == [(10, 11, [1]), (13, 13, [2])]
    assert parts[1].acknowledgement_batches == []
    assert [(f.topic_id, f.partitions) for f in req.forgotten_topics_data] == [(IDS["t"], [2])]
    for version in (1, 2):
        ShareFetchRequest.decode(req.encode(version), version)
    ack = acknowledge_request("g", "m", -1, acks=acks, topic_ids=IDS, renew=True)
    assert isinstance(ack, ShareAcknowledgeRequest)
    assert ack.share_session_epoch == -1 and ack.is_renew_ack
    assert (
        ShareAcknowledgeRequest.decode(ack.encode(2), 2).topics[0].partitions[0].partition_index
        == 0
    )


# ---------------------------------------------------------------- decoding


def batch(first: int, values: list[bytes], **kw: object) -> bytes:
    return encode_batch(
        [Record(v, timestamp=1000 + i) for i, v in enumerate(values)], base_offset=first, **kw
    )  # type: ignore[arg-type]


def test_only_acquired_records_with_their_delivery_counts() -> None:
    data = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d", b"e"], compression="lz4")
    out = decode_acquired(
        "t", 0, data, [Acquired(1, 1, 3), Acquired(3, 4, 1)], max_decompressed=CAP
    )
    assert [(r.offset, r.value, r.delivery_count) for r in out.records] == [
        (1, b"b", 3),
        (3, b"d", 1),
        (4, b"e", 1),
    ]
    assert out.auto_acks == {} and out.error is None
    assert out.records[0].topic == "t" and out.records[0].timestamp == 1001


def test_acquired_offsets_without_a_record_are_gaps() -> None:
    control = encode_batch(
        [ControlRecord(COMMIT)], base_offset=2, control=True, producer_id=5, transactional=True
    )
    data = batch(0, [b"a", b"b"]) + control + batch(5, [b"f"])
    out = decode_acquired("t", 0, data, [Acquired(0, 5, 1)], max_decompressed=CAP)
    assert [r.offset for r in out.records] == [0, 1, 5]
    assert out.auto_acks == {2: GAP, 3: GAP, 4: GAP}


def test_a_corrupt_batch_is_rejected_and_reported() -> None:
    good = batch(0, [b"a", b"b"])
    bad = bytearray(batch(2, [b"c", b"d"]))
    bad[-1] ^= 0xFF  # breaks the CRC
    after = batch(4, [b"e"])
    out = decode_acquired(
        "t", 0, good + bytes(bad) + after, [Acquired(0, 4, 1)], max_decompressed=CAP
    )
    assert [r.offset for r in out.records] == [0, 1]
    assert out.auto_acks == {2: REJECT, 3: REJECT, 4: RELEASE}
    assert isinstance(out.error, CorruptRecordError)
    assert "t-0" in str(out.error) and "rejected" in str(out.error)


def test_a_failing_deserializer_releases_the_record_and_the_rest() -> None:
    data = batch(0, [b"1", b"2", b"x", b"4"])

    def as_int(b: bytes) -> int:
        return int(b)

    out = decode_acquired(
        "t", 0, data, [Acquired(0, 3, 1)], max_decompressed=CAP, value_deserializer=as_int
    )
    assert [r.value for r in out.records] == [1, 2]
    assert out.auto_acks == {2: RELEASE, 3: RELEASE}
    assert isinstance(out.error, SerializationError)
    assert "offset 2" in str(out.error) and "released" in str(out.error)


def test_nothing_acquired_nothing_shown() -> None:
    out = decode_acquired("t", 0, batch(0, [b"a"]), [], max_decompressed=CAP)
    assert out.records == [] and out.auto_acks == {}


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=400),
    cut=st.integers(0, 200),
    first=st.integers(0, 6),
    span=st.integers(0, 6),
)
def test_fuzzed_bytes_never_escape_as_anything_but_an_error(
    data: bytes, cut: int, first: int, span: int
) -> None:
    """Random bytes, and real batches cut or flipped anywhere: the decoder returns
    (records, acknowledgements, a KafkaError) and never raises; every acquired
    offset is shown or acknowledged exactly once."""
    real = bytearray(batch(0, [b"a", b"bb", b"ccc"]) + batch(3, [b"d"] * 3, compression="gzip"))
    if cut < len(real):
        real[cut] ^= 0x5A
    for payload in (data, bytes(real), bytes(real[: cut + 20])):
        acquired = [Acquired(first, first + span, 1)]
        out = decode_acquired("t", 0, payload, acquired, max_decompressed=1 << 16)
        assert out.error is None or isinstance(out.error, KafkaError)
        shown = [r.offset for r in out.records]
        assert len(shown) == len(set(shown))
        assert not set(shown) & set(out.auto_acks)
        assert set(shown) | set(out.auto_acks) == set(range(first, first + span + 1))
