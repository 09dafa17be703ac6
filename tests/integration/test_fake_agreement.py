"""FakeKafka agrees with Kafka: the same scenario against the real broker (the
``kafka`` fixture) and against the fake, comparing what a client observes --
offsets assigned, the batches read back, the error for an unknown topic, an
offset out of range, a duplicate and an out-of-order sequence, a stale
producer epoch, and the classic group's join / sync / rebalance flow -- with
raw requests, so neither side's client logic hides a difference."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kpax
from kpax.proto.error_families import COORDINATOR_ERRORS, code_in
from kpax.proto.errors import error_for_code
from kpax.proto.header import decode_response, encode_request
from kpax.proto.messages import (
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from kpax.proto.records import Record, decode_batches, encode_batch
from kpax.testing.fake import FakeKafka

pytestmark = pytest.mark.integration


class Raw:
    """A blocking connection sending one request at a time."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.cid = 0

    def __call__(self, request: Any, version: int) -> Any:
        self.cid += 1
        self.sock.sendall(encode_request(request, version, self.cid, "agree"))
        (size,) = struct.unpack(">i", self._read(4))
        cid, response = decode_response(self._read(size), request.API_KEY, version)
        assert cid == self.cid
        return response

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


Setup = Callable[[int], str]  # partitions -> a new topic's name


@pytest.fixture(params=["kafka", "fake"])
def side(request: pytest.FixtureRequest) -> Iterator[tuple[str, Setup]]:
    """(bootstrap, make_topic) of the real broker or of a fake one."""
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka")
        topic = request.getfixturevalue("topic")
        yield kafka.bootstrap, topic
        return
    with FakeKafka(1) as fake:
        yield fake.bootstrap, lambda n: fake.create_topic(f"t-{uuid.uuid4().hex[:8]}", n)


def _until_ready(call: Callable[[], Any], timeout: float = 30) -> Any:
    """Repeat ``call`` while it answers a coordinator error (a broker that has just
    started loads its coordinators)."""
    deadline = time.monotonic() + timeout
    while True:
        response = call()
        if not code_in(response.error_code, COORDINATOR_ERRORS) or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def _name(code: int) -> str:
    return "NONE" if code == 0 else error_for_code(code).name


def _produce(raw: Raw, topic: str, batch: bytes, partition: int = 0) -> tuple[str, int]:
    req = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition, records=batch)
                ],
            )
        ],
    )
    r = raw(req, 11).responses[0].partition_responses[0]
    return _name(r.error_code), r.base_offset


def _fetch(raw: Raw, topic: str, offset: int, partition: int = 0) -> Any:
    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    return raw(req, 12).responses[0].partitions[0]


def test_offsets_and_batches_read_back(side):
    bootstrap, make_topic = side
    topic = make_topic(2)
    with kpax.Producer(bootstrap, linger_ms=0, enable_idempotence=False, acks=1) as p:
        metas = [p.send(topic, b"v%d" % i, partition=i % 2).result(10) for i in range(6)]
        p.send_many(topic, [b"a", b"b", b"c"], partition=0)
        p.flush(10)
    raw = Raw(bootstrap)
    try:
        layout = []
        for partition in (0, 1):
            part = _fetch(raw, topic, 0, partition)
            batches = list(decode_batches(bytes(part.records)))
            layout.append(
                (
                    part.high_watermark,
                    [(b.base_offset, b.count, b.last_offset, b.compression) for b in batches],
                    [[r.value for r in b] for b in batches],
                )
            )
    finally:
        raw.close()
    observed = ([(m.partition, m.offset) for m in metas], layout)
    assert observed == (
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)],
        [
            (6, [(0, 1, 0, "none"), (1, 1, 1, "none"), (2, 1, 2, "none"), (3, 3, 5, "none")],
             [[b"v0"], [b"v2"], [b"v4"], [b"a", b"b", b"c"]]),
            (3, [(0, 1, 0, "none"), (1, 1, 1, "none"), (2, 1, 2, "none")],
             [[b"v1"], [b"v3"], [b"v5"]]),
        ],
    )  # fmt: skip


def test_errors_for_unknown_topic_and_out_of_range(side):
    bootstrap, make_topic = side
    topic = make_topic(1)
    raw = Raw(bootstrap)
    try:
        missing = f"missing-{uuid.uuid4().hex[:8]}"
        md = raw(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=missing)],
                allow_auto_topic_creation=False,
            ),
            12,
        )
        lo = raw(
            ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=missing,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)
                        ],
                    )
                ],
            ),
            8,
        )
        past_end = _fetch(raw, topic, 5)
        no_partition = _fetch(raw, topic, 0, partition=3)
    finally:
        raw.close()
    assert (
        _name(md.topics[0].error_code),
        _name(lo.topics[0].partitions[0].error_code),
        _name(past_end.error_code),
        _name(no_partition.error_code),
    ) == (
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "OFFSET_OUT_OF_RANGE",
        "UNKNOWN_TOPIC_OR_PARTITION",
    )


def test_idempotent_sequences(side):
    bootstrap, make_topic = side
    topic = make_topic(1)
    raw = Raw(bootstrap)
    try:
        init = _until_ready(
            lambda: raw(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4
            )
        )
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(seq: int, n: int = 2, ep: int = epoch) -> bytes:
            return encode_batch(
                [Record(b"%d" % i) for i in range(n)],
                producer_id=pid,
                producer_epoch=ep,
                base_sequence=seq,
            )

        observed = [
            _produce(raw, topic, batch(0)),
            _produce(raw, topic, batch(2)),
            _produce(raw, topic, batch(0)),  # a retry of the first: its offset, not written
            _produce(raw, topic, batch(9)),  # a gap
            _produce(raw, topic, batch(4, ep=epoch + 1)),  # a new epoch must start at 0
            _produce(raw, topic, batch(0, ep=epoch + 1)),
            _produce(raw, topic, batch(4)),  # the old epoch, now fenced
        ]
        hw = _fetch(raw, topic, 0).high_watermark
    finally:
        raw.close()
    assert [(e, o if e == "NONE" else None) for e, o in observed] == [
        ("NONE", 0),
        ("NONE", 2),
        ("NONE", 0),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", None),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", None),
        ("NONE", 4),
        ("INVALID_PRODUCER_EPOCH", None),
    ]
    assert hw == 6


def test_classic_group_generation_flow(side):
    bootstrap, _make_topic = side
    group = f"g-{uuid.uuid4().hex[:8]}"
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")]

    def join(member: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id=member,
            protocol_type="consumer",
            protocols=proto,
        )

    a, b = Raw(bootstrap), Raw(bootstrap)
    try:
        found = _until_ready(lambda: a(FindCoordinatorRequest(key=group, key_type=0), 3))
        assert found.error_code == 0
        first = _until_ready(lambda: a(join(""), 9))
        ja = a(join(first.member_id), 9)
        me = ja.member_id
        sync = SyncGroupRequest(
            group_id=group,
            generation_id=ja.generation_id,
            member_id=me,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=me, assignment=b"x")
            ],
        )
        sa = a(sync, 5)
        hb = a(HeartbeatRequest(group_id=group, generation_id=ja.generation_id, member_id=me), 4)
        jb = b(join(""), 9)  # only a member id: no rebalance yet
        hb2 = a(HeartbeatRequest(group_id=group, generation_id=ja.generation_id, member_id=me), 4)
        stale = a(HeartbeatRequest(group_id=group, generation_id=7, member_id=me), 4)
        unknown = a(HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody"), 4)
    finally:
        a.close()
        b.close()
    assert [
        (_name(first.error_code), first.generation_id),
        (
            _name(ja.error_code),
            ja.generation_id,
            ja.leader == me,
            len(ja.members),
            ja.protocol_name,
        ),
        (_name(sa.error_code), sa.assignment),
        _name(hb.error_code),
        _name(jb.error_code),
        _name(hb2.error_code),
        _name(stale.error_code),
        _name(unknown.error_code),
    ] == [
        ("MEMBER_ID_REQUIRED", -1),
        ("NONE", 1, True, 1, "range"),
        ("NONE", b"x"),
        "NONE",
        "MEMBER_ID_REQUIRED",
        "NONE",
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
    ]
