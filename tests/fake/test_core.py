"""The sans-I/O core (FakeCluster, FakeConnection) driven with request frames
and virtual time: no socket, no thread, no clock. Determinism, long polls,
timeouts, fetch sessions, idempotence, the classic join flow, framing."""

from __future__ import annotations

import uuid
from typing import Any

from kpax.proto import error_codes as ec
from kpax.proto.header import decode_response, encode_request
from kpax.proto.messages import (
    ApiVersionsRequest,
    FetchRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    MetadataRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from kpax.proto.records import Record, decode_batches, encode_batch
from kpax.testing.fake import FakeCluster
from kpax.testing.fake.log import PartitionLog

FR = FetchRequest


def call(
    cluster: FakeCluster, request: Any, version: int, *, node: int = 1, now: int = 0, conn: int = 1
) -> Any:
    """One request through ``handle``; the decoded response (None while pending)."""
    frame = encode_request(request, version, 7, "test")[4:]
    answer = cluster.handle(node, conn, frame, now)
    if not answer.resolved:
        return answer
    assert answer.frame is not None
    return decode_response(answer.frame, request.API_KEY, version)[1]


def decode(answer: Any, request_cls: Any, version: int) -> Any:
    assert answer.resolved and answer.frame is not None
    return decode_response(answer.frame, request_cls.API_KEY, version)[1]


def produce(
    cluster: FakeCluster,
    topic: str,
    values: list[bytes],
    *,
    now: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> Any:
    batch = encode_batch(
        [Record(v, timestamp=now) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    req = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
            )
        ],
    )
    return call(cluster, req, 11, now=now).responses[0].partition_responses[0]


def fetch(
    topic_id: uuid.UUID,
    offset: int,
    *,
    session: int = 0,
    epoch: int = -1,
    max_wait: int = 0,
    min_bytes: int = 1,
) -> Any:
    return FR(
        max_wait_ms=max_wait,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        session_id=session,
        session_epoch=epoch,
        topics=[
            FR.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    FR.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )


def scenario(seed: int) -> list[bytes]:
    """A run through many random choices; every answer's bytes."""
    c = FakeCluster(3, seed=seed)
    out = []
    for i, (req, v) in enumerate(
        [
            (MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")]), 12),
            (InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4),
            (
                JoinGroupRequest(
                    group_id="g",
                    session_timeout_ms=10000,
                    rebalance_timeout_ms=10000,
                    protocol_type="consumer",
                    protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range")],
                ),
                9,
            ),
        ]
    ):
        frame = encode_request(req, v, i, "c")[4:]
        for node in (1, 2, 3):
            answer = c.handle(node, i, frame, 1000 + i)
            out.append(answer.frame or b"")
    topic_id = c.state.topics["auto"].topic_id
    leader = c.state.topics["auto"].partitions[0].leader
    frame = encode_request(fetch(topic_id, 0, epoch=0), 17, 9, "c")[4:]
    out.append(c.handle(leader, 9, frame, 2000).frame or b"")
    return out


def test_same_seed_same_bytes():
    assert scenario(42) == scenario(42)
    assert scenario(42) != scenario(43)  # topic ids, member ids, session ids, placement


def test_long_poll_waits_for_data_or_max_wait():
    c = FakeCluster(1)
    tid = c.create_topic("t").topic_id
    pending = call(c, fetch(tid, 0, max_wait=500), 17, now=0)
    assert not pending.resolved
    c.tick(499)
    assert not pending.resolved
    c.tick(500)
    resp = decode(pending, FetchRequest, 17)
    assert resp.responses[0].partitions[0].records == b""
    pending = call(c, fetch(tid, 0, max_wait=500), 17, now=600)
    assert produce(c, "t", [b"x"], now=650).error_code == 0
    resp = decode(pending, FetchRequest, 17)  # answered by the produce, before its max wait
    batch = next(decode_batches(bytes(resp.responses[0].partitions[0].records)))
    assert [r.value for r in batch] == [b"x"]
    assert c.next_deadline() is None


def test_fetch_sessions_incremental_and_errors():
    c = FakeCluster(1, seed=1)
    tid = c.create_topic("t").topic_id
    produce(c, "t", [b"a"])
    first = call(c, fetch(tid, 0, epoch=0), 17)
    sid = first.session_id
    assert sid != 0 and len(first.responses[0].partitions) == 1
    # incremental, the position moved on and nothing new: the partition is left out
    nothing = call(c, fetch(tid, 1, session=sid, epoch=1), 17)
    assert nothing.error_code == 0 and nothing.responses == []
    produce(c, "t", [b"b"])
    news = call(c, FR(max_wait_ms=0, session_id=sid, session_epoch=2), 17)
    assert news.responses[0].partitions[0].high_watermark == 2  # the session's offset: 1
    assert [
        r.value for r in next(decode_batches(bytes(news.responses[0].partitions[0].records)))
    ] == [b"b"]
    stale = call(c, FR(max_wait_ms=0, session_id=sid, session_epoch=2), 17)
    assert stale.error_code == ec.InvalidFetchSessionEpochError.code
    unknown = call(c, FR(max_wait_ms=0, session_id=sid + 1, session_epoch=1), 17)
    assert unknown.error_code == ec.FetchSessionIdNotFoundError.code


def test_log_idempotence_duplicates_and_sequences():
    log = PartitionLog()
    log.new_leader_epoch(0)

    def append(seq: int, n: int = 2, epoch: int = 0) -> Any:
        data = encode_batch(
            [Record(b"%d" % i) for i in range(n)],
            producer_id=5,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        return log.append(data, leader_epoch=0, now_ms=0, max_message_bytes=1 << 20)

    assert append(0).base_offset == 0
    assert append(2).base_offset == 2
    dup = append(0)
    assert (dup.error, dup.base_offset) == (0, 0)  # the offset it was written at
    assert log.log_end_offset == 4
    assert append(7).error == ec.OutOfOrderSequenceNumberError.code
    assert append(4, epoch=1).error == ec.OutOfOrderSequenceNumberError.code  # new epoch: seq 0
    assert append(0, epoch=1).base_offset == 4
    assert append(4, epoch=0).error == ec.InvalidProducerEpochError.code


def test_classic_join_flow_and_session_timeout():
    c = FakeCluster(1)
    join = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=6000,
        rebalance_timeout_ms=6000,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range")],
    )
    first = call(c, join, 9)
    assert first.error_code == ec.MemberIdRequiredError.code and first.member_id
    join.member_id = first.member_id
    joined = call(c, join, 9)
    assert (joined.generation_id, joined.leader) == (1, first.member_id)
    sync = SyncGroupRequest(
        group_id="g",
        generation_id=1,
        member_id=first.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"A")
        ],
    )
    assert call(c, sync, 5).assignment == b"A"
    hb = HeartbeatRequest(group_id="g", generation_id=1, member_id=first.member_id)
    assert call(c, hb, 4, now=5000).error_code == 0
    c.tick(10999)
    assert call(c, hb, 4, now=10999).error_code == 0
    c.tick(17000)  # 6 s without a heartbeat: removed
    assert call(c, hb, 4, now=17000).error_code == ec.UnknownMemberIdError.code


def test_connection_answers_in_order_one_at_a_time():
    c = FakeCluster(1)
    tid = c.create_topic("t").topic_id
    conn = c.connect(1)
    c.inject("Metadata", delay_ms=100)
    md = encode_request(MetadataRequest(topics=None), 12, 1, "x")
    av = encode_request(ApiVersionsRequest(), 3, 2, "x")
    conn.receive(md + av[:5], 0)
    conn.receive(av[5:], 0)
    assert conn.data_to_send() == b""  # the delayed Metadata holds the ApiVersions behind it
    assert c.next_deadline() == 100
    c.tick(100)
    out = conn.data_to_send()
    assert out[4:8] == (1).to_bytes(4, "big")  # correlation 1, then 2
    second = out[4 + int.from_bytes(out[:4], "big") :]
    assert second[4:8] == (2).to_bytes(4, "big")
    c.inject("Fetch", drop="before")
    conn.receive(encode_request(fetch(tid, 0), 17, 3, "x"), 200)
    assert conn.closed and conn.data_to_send() == b""


def test_api_versions_newer_than_known_gets_v0_unsupported():
    c = FakeCluster(1)
    frame = bytearray(encode_request(ApiVersionsRequest(), 3, 5, "x")[4:])
    frame[2:4] = (99).to_bytes(2, "big")
    answer = c.handle(1, 1, bytes(frame), 0)
    _cid, resp = decode_response(answer.frame, ApiVersionsRequest.API_KEY, 0)
    assert resp.error_code == ec.UnsupportedVersionError.code
    assert {k.api_key for k in resp.api_keys} >= {0, 1, 3, 18}


def test_an_answer_made_ready_by_another_connection_goes_at_once():
    c = FakeCluster(1)
    tid = c.create_topic("t").topic_id
    consumer, producer = c.connect(1), c.connect(1)
    consumer.receive(encode_request(fetch(tid, 0, max_wait=10_000), 17, 1, "c"), 0)
    assert consumer.data_to_send() == b""
    batch = encode_batch([Record(b"x", timestamp=0)])
    req = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
            )
        ],
    )
    producer.receive(encode_request(req, 11, 1, "p"), 5)
    assert producer.data_to_send()
    out = consumer.data_to_send()  # no tick: the produce woke the long poll
    resp = decode_response(out[4:], FetchRequest.API_KEY, 17)[1]
    assert resp.responses[0].partitions[0].high_watermark == 1


def test_kip848_revocation_comes_before_assignment():
    from kpax.proto.messages import ConsumerGroupHeartbeatRequest as CH

    c = FakeCluster(1)
    tid = c.create_topic("t", 4).topic_id

    def hb(member: str, epoch: int, owned: list[int] | None, *, join: bool = False) -> Any:
        req = CH(
            group_id="g",
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=["t"] if join else None,
            topic_partitions=None
            if owned is None
            else [CH.TopicPartitions(topic_id=tid, partitions=owned)],
        )
        return call(c, req, 1)

    def parts(resp: Any) -> list[int] | None:
        if resp.assignment is None:
            return None
        return sorted(p for t in resp.assignment.topic_partitions for p in t.partitions)

    a = hb("A", 0, [], join=True)
    assert (a.member_epoch, parts(a)) == (1, [0, 1, 2, 3])
    b = hb("B", 0, [], join=True)
    assert (b.member_epoch, parts(b)) == (2, [])  # its partitions are still A's
    a = hb("A", 1, None)
    assert a.member_epoch == 1 and len(parts(a) or []) == 2  # revoke two, epoch kept
    kept = parts(a)
    b = hb("B", 2, None)
    assert parts(b) is None  # nothing released yet
    a = hb("A", 1, kept)  # A no longer owns the other two
    assert a.member_epoch == 2
    b = hb("B", 2, None)
    assert sorted(parts(b) or []) == sorted({0, 1, 2, 3} - set(kept or []))
    stale = hb("A", 7, None)
    assert stale.error_code == ec.FencedMemberEpochError.code


def test_a_handler_failure_closes_the_connection_and_is_kept(monkeypatch):
    import dataclasses

    from kpax.testing.fake import cluster as cluster_module

    def broken(ctx: Any, req: Any) -> Any:
        raise RuntimeError("boom")

    key = MetadataRequest.API_KEY
    monkeypatch.setitem(
        cluster_module.APIS, key, dataclasses.replace(cluster_module.APIS[key], handler=broken)
    )
    c = FakeCluster(1)
    conn = c.connect(1)
    conn.receive(encode_request(MetadataRequest(topics=None), 12, 1, "x"), 0)
    assert conn.closed
    assert c.errors == ["Metadata v12: RuntimeError('boom')"]


def test_share_sessions_and_locks_in_virtual_time():
    from kpax.proto.messages import ShareFetchRequest as SF

    c = FakeCluster(1)
    tid = c.create_topic("t").topic_id
    c.group_configs["g"] = {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "1000",
    }
    produce(c, "t", [b"a", b"b"])

    def fetch_share(member: str, epoch: int, now: int, acks: list[Any] | None = None) -> Any:
        part = SF.FetchPartition(partition_index=0, acknowledgement_batches=acks or [])
        req = SF(
            group_id="g",
            member_id=member,
            share_session_epoch=epoch,
            max_records=10,
            topics=[SF.FetchTopic(topic_id=tid, partitions=[part])],
        )
        return call(c, req, 2, now=now)

    first = fetch_share("m1", 0, 0).responses[0].partitions[0]
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in first.acquired_records] == [
        (0, 1, 1)
    ]
    assert fetch_share("m2", 0, 10).responses == []  # both held by m1
    assert fetch_share("m1", 5, 20).error_code == ec.InvalidShareSessionEpochError.code
    assert fetch_share("m3", 1, 20).error_code == ec.ShareSessionNotFoundError.code
    c.tick(1000)  # m1's lock ends
    again = fetch_share("m2", 1, 1000).responses[0].partitions[0]
    assert [(a.first_offset, a.delivery_count) for a in again.acquired_records] == [(0, 2)]
    late = SF.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=[1])
    stale = fetch_share("m1", 1, 1001, [late]).responses[0].partitions[0]
    assert stale.acknowledge_error_code == ec.InvalidRecordStateError.code  # not m1's any more
    ok = fetch_share("m2", 2, 1002, [late]).responses
    assert ok[0].partitions[0].acknowledge_error_code == 0
    assert c.share_partitions.start_offsets("g") == {("t", 0): 2}
