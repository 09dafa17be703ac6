"""Fetch sessions by topic id (Fetch v13+) driven with plain bytes: a topic
deleted and re-created under the same name (another topic id in the metadata)
is forgotten in the broker's fetch session under its old id and fetched again
under the new one from a position found anew, and a Fetch answer about a topic
id the consumer does not fetch is never dropped without a word. The test plays
a broker that keeps a fetch session as Kafka does (partitions held by topic id,
incremental requests adding and forgetting them)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from kpax.cluster.metadata import ClusterSnapshot, snapshot_from_response
from kpax.config import resolve
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.fetch_session import FetchSession
from kpax.consumer.options import CONSUMER_OPTIONS, ConsumerSettings
from kpax.proto.error_codes import UnknownTopicIdError
from kpax.proto.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kpax.proto.records import encode_columns
from kpax.structs import TopicPartition
from tests.unit.bytewire import Handler, ScriptedBroker, attach

TOPIC = "orders"
TP0 = TopicPartition(TOPIC, 0)
VERSIONS = {
    FetchRequest.API_KEY: (4, 13),  # topics by id
    ListOffsetsRequest.API_KEY: (1, 5),
    MetadataRequest.API_KEY: (0, 12),
}
MR = MetadataResponse


def _metadata(topic_id: uuid.UUID | None) -> Any:
    """Broker 1 leading partition 0 of TOPIC (with ``topic_id``; None: no such topic)."""
    topics = []
    if topic_id is not None:
        topics.append(
            MR.MetadataResponseTopic(
                name=TOPIC,
                topic_id=topic_id,
                partitions=[
                    MR.MetadataResponsePartition(
                        partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
        )
    return MR(
        brokers=[MR.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9)],
        cluster_id="c",
        controller_id=1,
        topics=topics,
    )


def _list_offsets(request: Any, version: int) -> Any:
    R = ListOffsetsResponse
    return R(
        topics=[
            R.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    R.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=0)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


class SessionBroker:
    """One broker's topics (by id) and its fetch session, as Kafka keeps them:
    a full request (epoch 0) opens a new session with its partitions; an
    incremental one adds or updates the partitions it names and drops the
    forgotten ones; every answer covers the partitions the session holds."""

    def __init__(self, topic_id: uuid.UUID, values: list[bytes]) -> None:
        self.topic_id = topic_id  # TOPIC's id now
        self.logs: dict[uuid.UUID, list[bytes]] = {topic_id: values}  # deleted ids: absent
        self.session_id = 0
        self.held: dict[tuple[uuid.UUID, int], int] = {}  # (topic id, partition) -> offset
        self.fetches: list[Any] = []
        #: A topic id the broker answers about besides the session's (None: none).
        self.stray: uuid.UUID | None = None

    def recreate(self, topic_id: uuid.UUID, values: list[bytes]) -> None:
        """TOPIC deleted and created again: a new id and a new log."""
        del self.logs[self.topic_id]
        self.topic_id = topic_id
        self.logs[topic_id] = values

    def metadata(self, request: Any, version: int) -> Any:
        return _metadata(self.topic_id)

    def fetch(self, request: Any, version: int) -> Any:
        assert version >= 13, version
        self.fetches.append(request)
        if request.session_epoch == 0:
            self.session_id += 1
            self.held = {}
        for f in request.forgotten_topics_data:
            for p in f.partitions:
                self.held.pop((f.topic_id, p), None)
        for t in request.topics:
            for p in t.partitions:
                self.held[(t.topic_id, p.partition)] = p.fetch_offset
        R = FetchResponse
        by_id: dict[uuid.UUID, list[Any]] = {}
        for (tid, part), offset in self.held.items():
            log = self.logs.get(tid)
            if log is None:
                data = R.PartitionData(partition_index=part, error_code=UnknownTopicIdError.code)
            else:
                records = b""
                if offset < len(log):
                    n = len(log) - offset
                    records = encode_columns(
                        [1_700_000_000_000] * n, [None] * n, log[offset:], base_offset=offset
                    )
                data = R.PartitionData(
                    partition_index=part,
                    high_watermark=len(log),
                    last_stable_offset=len(log),
                    log_start_offset=0,
                    records=records,
                )
            by_id.setdefault(tid, []).append(data)
        if self.stray is not None and request.session_epoch != 0:
            by_id[self.stray] = [R.PartitionData(partition_index=0, high_watermark=3)]
        return R(
            session_id=self.session_id,
            responses=[
                R.FetchableTopicResponse(topic_id=t, partitions=ps) for t, ps in by_id.items()
            ],
        )


async def _consumer(broker: SessionBroker) -> tuple[AsyncConsumer, list[ScriptedBroker]]:
    c = AsyncConsumer(
        "127.0.0.1:9",
        auto_offset_reset="earliest",
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        fetch_max_wait_ms=10,
        default_api_timeout_ms=2000,
    )
    cluster = c.cluster
    cluster._adopt(snapshot_from_response(_metadata(broker.topic_id), None, [TOPIC]))
    cluster._started = True
    cluster._interest.add(TOPIC)
    handlers: dict[int, Handler] = {
        FetchRequest.API_KEY: broker.fetch,
        ListOffsetsRequest.API_KEY: _list_offsets,
        MetadataRequest.API_KEY: broker.metadata,
    }
    brokers = []
    for handle in (cluster.broker(1), cluster.fetch_broker(1)):
        conn, wire = attach(handle, cluster.options, VERSIONS)
        brokers.append(ScriptedBroker(wire, conn, handlers))
    await c.start()
    return c, brokers


async def _poll_until(c: AsyncConsumer, brokers: list[ScriptedBroker], want: int) -> list[Any]:
    got: list[Any] = []
    for _ in range(3000):
        for b in brokers:
            b.pump()
        got += await c.poll(0)
        if len(got) >= want:
            return got
        await asyncio.sleep(0.001)
    raise AssertionError(
        f"{len(got)} records; the brokers saw last {[b.log[-5:] for b in brokers]}"
    )


def _said(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


async def test_a_recreated_topic_is_forgotten_under_its_old_id_and_read_from_its_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    broker = SessionBroker(old_id, [b"old%d" % i for i in range(20)])
    c, brokers = await _consumer(broker)
    caplog.set_level(logging.INFO, logger="kpax.consumer")
    try:
        await c.assign([TP0])
        old = await _poll_until(c, brokers, 20)
        assert [r.value for r in old] == [b"old%d" % i for i in range(20)]
        broker.recreate(new_id, [b"new%d" % i for i in range(5)])
        new = await _poll_until(c, brokers, 5)
        # the new topic's records from its first one (the old position 20 skips none)
        assert [(r.offset, r.value) for r in new] == [(i, b"new%d" % i) for i in range(5)]
        assert await c.position(TP0) == 5
        # the broker's session no longer holds the old topic: forgotten under its id
        forgotten = [
            (f.topic_id, list(f.partitions))
            for r in broker.fetches
            for f in r.forgotten_topics_data
        ]
        assert (old_id, [0]) in forgotten
        assert set(broker.held) == {(new_id, 0)}
        said = _said(caplog, "re-created")
        assert len(said) == 1 and TOPIC in said[0] and str(new_id) in said[0], said
    finally:
        await c.close(0)


async def test_an_answer_about_an_unknown_topic_id_is_said_once_and_starts_a_new_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = SessionBroker(uuid.uuid4(), [b"r%d" % i for i in range(10)])
    c, brokers = await _consumer(broker)
    caplog.set_level(logging.INFO, logger="kpax.consumer")
    try:
        await c.assign([TP0])
        await _poll_until(c, brokers, 10)
        stray = uuid.uuid4()
        broker.stray = stray  # answered in incremental fetches of a session
        sessions = broker.session_id
        pipelined = brokers[0]
        metadata_before = pipelined.log.count("Metadata")
        for _ in range(3000):
            for b in brokers:
                b.pump()
            await c.poll(0)
            if broker.session_id >= sessions + 2:  # a new session, twice
                break
            await asyncio.sleep(0.001)
        else:
            raise AssertionError(f"no new fetch session; fetches {len(broker.fetches)}")
        said = _said(caplog, str(stray))
        assert len(said) == 1, said  # once per id, however often the broker says it
        assert pipelined.log.count("Metadata") > metadata_before  # the metadata looked at again
        broker.stray = None
        broker.logs[broker.topic_id] += [b"r10", b"r11"]
        more = await _poll_until(c, brokers, 2)
        assert [r.offset for r in more] == [10, 11]  # fetching goes on where it was
    finally:
        await c.close(0)


def _snapshot(topic_id: uuid.UUID) -> ClusterSnapshot:
    return snapshot_from_response(_metadata(topic_id), None, [TOPIC])


def test_a_session_forgets_a_partition_held_under_an_old_topic_id_and_adds_it_under_the_new():
    settings = ConsumerSettings.from_config(resolve("consumer", CONSUMER_OPTIONS, {}))
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    s = FetchSession()
    wanted = {TP0: (20, 0, 0)}
    built = s.request(wanted, _snapshot(old_id), True, settings, 0)
    assert built is not None
    s.completed(7, wanted, built[1])
    # the same partition at the same offset, but the metadata names another topic id
    built = s.request(wanted, _snapshot(new_id), True, settings, 0)
    assert built is not None
    req, ids = built
    assert (req.session_id, req.session_epoch) == (7, 1)  # incremental
    assert [(f.topic_id, f.partitions) for f in req.forgotten_topics_data] == [(old_id, [0])]
    assert [(t.topic_id, [p.partition for p in t.partitions]) for t in req.topics] == [
        (new_id, [0])
    ]
    assert ids == {new_id: TOPIC}  # answers about the old id are not taken as the new topic's
    s.completed(7, wanted, ids)
    again = s.request(wanted, _snapshot(new_id), True, settings, 0)
    assert again is not None
    assert again[0].topics == [] and again[0].forgotten_topics_data == []  # nothing changed
