"""A share session with one broker: the epoch rules and the requests they shape.

Role: pure state, no I/O. A share consumer keeps one share session per
broker that leads any of its partitions (KIP-932). The session epoch is 0 in
the request that opens it (which names every partition), then 1, 2, ... in
each following request (which names only the partitions added, and those
with acknowledgements, and lists the partitions removed as forgotten), and
-1 in the request that closes it (which may carry final acknowledgements;
closing releases whatever the member still holds on that broker). Requests
in a session are strictly sequential: :class:`ShareSession` is advanced only
when an answer arrived (:meth:`ShareSession.answered`); an error that says the
session is gone, or a request whose answer never came, starts a new session
(:meth:`ShareSession.reset`). Acknowledgements of records acquired in a
session that is gone cannot be sent in a new one: the caller fails them.

:func:`fetch_request` and :func:`acknowledge_request` build the requests from
the session, the partitions wanted and the acknowledgements to send.

Imports: kpax.proto.messages, kpax.structs, kpax.consumer.share.acks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kpax.consumer.share.acks import ack_batches
from kpax.proto.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kpax.structs import TopicPartition

__all__ = [
    "CLOSE_EPOCH",
    "INITIAL_EPOCH",
    "ShareSession",
    "acknowledge_request",
    "fetch_request",
]

INITIAL_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

#: {TopicPartition: {offset: acknowledge type}}
Acks = Mapping[TopicPartition, Mapping[int, int]]


class ShareSession:
    """The client's side of one share session (see the module docstring)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.epoch = INITIAL_EPOCH
        #: Partitions the broker has in this session (as of the last answer).
        self.partitions: set[TopicPartition] = set()
        #: The partitions the request in flight adds and forgets.
        self._adding: set[TopicPartition] = set()
        self._forgetting: set[TopicPartition] = set()

    @property
    def open(self) -> bool:
        """True once a request opened the session and its answer arrived."""
        return self.epoch > INITIAL_EPOCH

    def plan(
        self, wanted: Iterable[TopicPartition]
    ) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """(partitions to add, partitions to forget) for the next request when
        ``wanted`` is what this member should fetch from this broker."""
        want = set(wanted)
        if not self.open:
            return want, set()
        return want - self.partitions, self.partitions - want

    def sending(self, adding: set[TopicPartition], forgetting: set[TopicPartition]) -> None:
        """A request that adds ``adding`` and forgets ``forgetting`` is being sent."""
        self._adding, self._forgetting = set(adding), set(forgetting)

    def answered(self) -> None:
        """The request in flight was answered without a session error."""
        if self.epoch == INITIAL_EPOCH:
            self.partitions = set(self._adding)
        else:
            self.partitions |= self._adding
        self.partitions -= self._forgetting
        self._adding, self._forgetting = set(), set()
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def drop(self, tps: Iterable[TopicPartition]) -> None:
        """The broker no longer serves ``tps`` here (e.g. it stopped leading them)."""
        self.partitions -= set(tps)

    def reset(self) -> None:
        """The session is gone (or its state unknown): the next request opens a new one."""
        self.epoch = INITIAL_EPOCH
        self.partitions = set()
        self._adding, self._forgetting = set(), set()


def _by_topic(
    tps: Iterable[TopicPartition], topic_ids: Mapping[str, uuid.UUID]
) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for tp in sorted(tps):
        tid = topic_ids.get(tp.topic)
        if tid is not None:
            out.setdefault(tid, []).append(tp.partition)
    return out


def fetch_request(
    group_id: str,
    member_id: str,
    epoch: int,
    *,
    fetch: Iterable[TopicPartition],
    forget: Iterable[TopicPartition],
    acks: Acks,
    topic_ids: Mapping[str, uuid.UUID],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    max_records: int,
    batch_size: int,
    acquire_mode: int,
) -> ShareFetchRequest:
    """A ShareFetch naming ``fetch`` (the partitions added to the session) and the
    partitions with acknowledgements, forgetting ``forget``."""
    parts: dict[TopicPartition, list[Any]] = {tp: [] for tp in fetch}
    for tp, offsets in acks.items():
        parts[tp] = [
            ShareFetchRequest.AcknowledgementBatch(
                first_offset=first, last_offset=last, acknowledge_types=types
            )
            for first, last, types in ack_batches(offsets)
        ]
    topics = []
    for tid, partitions in _by_topic(parts, topic_ids).items():
        name = next(t for t, i in topic_ids.items() if i == tid)
        topics.append(
            ShareFetchRequest.FetchTopic(
                topic_id=tid,
                partitions=[
                    ShareFetchRequest.FetchPartition(
                        partition_index=p,
                        acknowledgement_batches=parts[TopicPartition(name, p)],
                    )
                    for p in partitions
                ],
            )
        )
    forgotten = [
        ShareFetchRequest.ForgottenTopic(topic_id=tid, partitions=ps)
        for tid, ps in _by_topic(forget, topic_ids).items()
    ]
    return ShareFetchRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=batch_size,
        share_acquire_mode=acquire_mode,
        topics=topics,
        forgotten_topics_data=forgotten,
    )


def acknowledge_request(
    group_id: str,
    member_id: str,
    epoch: int,
    *,
    acks: Acks,
    topic_ids: Mapping[str, uuid.UUID],
    renew: bool = False,
) -> ShareAcknowledgeRequest:
    """A ShareAcknowledge carrying ``acks`` (``renew``: some are RENEW)."""
    topics = []
    for tid, partitions in _by_topic(acks, topic_ids).items():
        name = next(t for t, i in topic_ids.items() if i == tid)
        topics.append(
            ShareAcknowledgeRequest.AcknowledgeTopic(
                topic_id=tid,
                partitions=[
                    ShareAcknowledgeRequest.AcknowledgePartition(
                        partition_index=p,
                        acknowledgement_batches=[
                            ShareAcknowledgeRequest.AcknowledgementBatch(
                                first_offset=first, last_offset=last, acknowledge_types=types
                            )
                            for first, last, types in ack_batches(acks[TopicPartition(name, p)])
                        ],
                    )
                    for p in partitions
                ],
            )
        )
    return ShareAcknowledgeRequest(
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=topics,
    )
