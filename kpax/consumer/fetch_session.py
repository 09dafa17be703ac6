"""The client side of a broker's fetch session (KIP-227) and the Fetch requests it sends.

Role: one :class:`FetchSession` per broker the fetcher fetches from
(:class:`~kpax.consumer.fetcher.Fetcher` keeps them). It remembers what the
broker holds for each partition of the session (fetch offset, last fetched
epoch, current leader epoch) and builds the next Fetch request: a full one
opens a session, later ones are incremental -- only partitions whose fetch
position changed, plus ``forgotten`` ones. With Fetch v13+ topics are named by
id; a forgotten topic whose id is unknown makes the session start over with a
full request. The session remembers the id it holds each topic under: a topic
deleted and re-created under the same name (another id in the metadata) has
its partitions forgotten under the old id and added again under the new one,
as the Java client does. :meth:`FetchSession.completed` moves the session on
after a response; :meth:`FetchSession.close_request` asks the broker to drop it.

Imports: kpax.cluster.metadata, kpax.consumer.options, kpax.proto.messages, kpax.structs,
the standard library.
"""

from __future__ import annotations

import uuid
from typing import Any

from kpax.cluster.metadata import ClusterSnapshot
from kpax.consumer.options import ConsumerSettings
from kpax.proto.messages import FetchRequest
from kpax.structs import TopicPartition

__all__ = ["FetchSession", "Wanted"]

_MAX_EPOCH = 2**31 - 1

#: tp -> (fetch_offset, last_fetched_epoch, current_leader_epoch).
Wanted = dict[TopicPartition, tuple[int, int, int]]


class FetchSession:
    """Client side of one broker's fetch session."""

    __slots__ = ("epoch", "id", "parts", "topic_ids", "with_ids")

    def __init__(self) -> None:
        self.id = 0
        self.epoch = 0
        #: tp -> (fetch_offset, last_fetched_epoch, current_leader_epoch) as the broker has it.
        self.parts: Wanted = {}
        #: topic name -> the topic id the broker holds its partitions under (Fetch v13+).
        self.topic_ids: dict[str, uuid.UUID] = {}
        #: Whether the session was opened naming topics by id (Fetch v13+).
        self.with_ids = False

    def reset(self) -> None:
        self.id = 0
        self.epoch = 0
        self.parts = {}
        self.topic_ids = {}

    def replaced(self, wanted: Wanted, snapshot: ClusterSnapshot) -> set[TopicPartition]:
        """Partitions the broker holds under another topic id than the metadata's
        now (the topic was deleted and re-created): to be forgotten under the old
        id and added again under the new one, as the Java client does."""
        out: set[TopicPartition] = set()
        held = self.topic_ids
        if not held:
            return out
        topics = snapshot.topics
        for tp in self.parts:
            old = held.get(tp.topic)
            info = topics.get(tp.topic)
            if (
                old is not None
                and tp in wanted
                and info is not None
                and info.topic_id is not None
                and info.topic_id != old
            ):
                out.add(tp)
        return out

    def request(
        self,
        wanted: Wanted,
        snapshot: ClusterSnapshot,
        use_ids: bool,
        settings: ConsumerSettings,
        isolation: int,
        *,
        sessionless: bool = False,
    ) -> tuple[FetchRequest, dict[Any, str]] | None:
        """The Fetch request for ``wanted`` (the session's partitions from now on)
        and the names of the topic ids it may answer with (the metadata's ids of
        the topics of ``wanted``); None (and the session reset) when a forgotten
        topic cannot be named by id. ``sessionless``: a one-off full request outside
        any session (session id 0, epoch -1) that does not wait for data (max wait
        0); this session is left as it is."""
        max_bytes = settings.max_partition_fetch_bytes
        if not sessionless and self.id and use_ids != self.with_ids:
            self.reset()  # a session is by names or by ids for its whole life
        forgotten: list[TopicPartition]
        if sessionless:
            send, forgotten, epoch = wanted, [], -1
        elif self.id:
            replaced = self.replaced(wanted, snapshot) if use_ids else set()
            send = {tp: v for tp, v in wanted.items() if tp in replaced or self.parts.get(tp) != v}
            forgotten = [tp for tp in self.parts if tp not in wanted or tp in replaced]
            epoch = self.epoch
        else:
            send = wanted
            forgotten = []
            epoch = 0
        topics: dict[str, list[Any]] = {}
        for tp, (offset, last_epoch, leader_epoch) in send.items():
            topics.setdefault(tp.topic, []).append(
                FetchRequest.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=leader_epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=-1,
                    partition_max_bytes=max_bytes,
                )
            )
        ids: dict[Any, str] = {}
        if use_ids:
            for tp in wanted:
                info = snapshot.topics.get(tp.topic)
                if info is not None and info.topic_id is not None:
                    ids[info.topic_id] = tp.topic
        req_topics = []
        for name, ps in topics.items():
            tid = snapshot.topics[name].topic_id if use_ids else None
            req_topics.append(
                FetchRequest.FetchTopic(topic=name, topic_id=tid, partitions=ps)
                if tid
                else FetchRequest.FetchTopic(topic=name, partitions=ps)
            )
        forgot: dict[str, list[int]] = {}
        for tp in forgotten:
            forgot.setdefault(tp.topic, []).append(tp.partition)
        forgotten_data = []
        for name, pids in forgot.items():
            tid = None
            if use_ids:  # the id the broker holds them under (the metadata's may be newer)
                tid = self.topic_ids.get(name)
                if tid is None:
                    info = snapshot.topics.get(name)
                    tid = info.topic_id if info is not None else None
                if tid is None:
                    self.reset()  # cannot name it: start over with a full request
                    return None
            if tid is not None:
                forgotten_data.append(
                    FetchRequest.ForgottenTopic(topic=name, topic_id=tid, partitions=pids)
                )
            else:
                forgotten_data.append(FetchRequest.ForgottenTopic(topic=name, partitions=pids))
        req = FetchRequest(
            replica_id=-1,
            max_wait_ms=0 if sessionless else settings.fetch_max_wait_ms,
            min_bytes=settings.fetch_min_bytes,
            max_bytes=settings.fetch_max_bytes,
            isolation_level=isolation,
            session_id=0 if sessionless else self.id,
            session_epoch=epoch,
            topics=req_topics,
            forgotten_topics_data=forgotten_data,
            rack_id=settings.client_rack or "",
        )
        return req, ids

    def completed(self, session_id: int, wanted: Wanted, ids: dict[Any, str]) -> None:
        """A Fetch request for ``wanted`` succeeded; the response names ``session_id``;
        ``ids`` are the topic ids the request named (from :meth:`request`)."""
        if self.id == 0 and session_id:
            self.id = session_id
            self.epoch = 1
            self.with_ids = bool(ids)
        elif self.id:
            self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        else:
            return
        self.parts = wanted
        self.topic_ids = {name: tid for tid, name in ids.items()}

    def close_request(self) -> FetchRequest:
        """The request that tells the broker to drop this session (epoch -1)."""
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1,
            session_id=self.id,
            session_epoch=-1,
            topics=[],
            forgotten_topics_data=[],
            rack_id="",
        )
