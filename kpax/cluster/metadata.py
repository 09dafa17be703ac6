"""The cluster metadata snapshot: brokers, controller, topics, partitions.

Role: plain immutable-ish records built from a Metadata response
(:func:`snapshot_from_response`), merged over the previous snapshot so that a
refresh for a few topics does not forget the others. Nothing here does I/O.

Imports: kpax.proto and the standard library.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kpax.proto.error_codes import LeaderNotAvailableError
from kpax.proto.error_families import code_in

#: Coordinator key types (FindCoordinator's ``key_type``): a group, a transactional id.
GROUP = 0
TRANSACTION = 1


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: dict[int, PartitionInfo]
    error_code: int = 0

    @property
    def partition_ids(self) -> list[int]:
        return sorted(self.partitions)


@dataclass
class ClusterSnapshot:
    """What the client knows of the cluster at one moment."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    #: Topics the last refresh reported as failed: name -> error code.
    topic_errors: dict[str, int] = field(default_factory=dict)
    updated_at: float = 0.0

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None


def _uuid(value: Any) -> uuid.UUID | None:
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return None if value.int == 0 else value
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        u = uuid.UUID(bytes=bytes(value))
        return None if u.int == 0 else u
    return None


def snapshot_from_response(
    resp: Any, previous: ClusterSnapshot | None, requested: list[str] | None
) -> ClusterSnapshot:
    """Merge a Metadata response into a new snapshot.

    ``requested`` is the list of topics asked for (None = all topics: topics
    absent from the answer are forgotten).
    """
    brokers = {
        b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
        for b in resp.brokers
    }
    topics: dict[str, TopicInfo] = {}
    if previous is not None and requested is not None:
        topics.update(previous.topics)
    errors: dict[str, int] = {}
    for t in resp.topics:
        name = t.name
        if name is None:
            continue
        if t.error_code:
            errors[name] = t.error_code
            # Keep what we knew if the topic is only temporarily without a leader.
            if not code_in(t.error_code, LeaderNotAvailableError):
                topics.pop(name, None)
            if not t.partitions:
                continue
        parts = {
            p.partition_index: PartitionInfo(
                topic=name,
                partition=p.partition_index,
                leader=p.leader_id,
                leader_epoch=getattr(p, "leader_epoch", -1),
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(getattr(p, "offline_replicas", ()) or ()),
                error_code=p.error_code,
            )
            for p in t.partitions
        }
        topics[name] = TopicInfo(
            name=name,
            topic_id=_uuid(getattr(t, "topic_id", None)),
            is_internal=bool(getattr(t, "is_internal", False)),
            partitions=parts,
            error_code=t.error_code,
        )
    return ClusterSnapshot(
        brokers=brokers,
        controller_id=getattr(resp, "controller_id", -1),
        cluster_id=getattr(resp, "cluster_id", None),
        topics=topics,
        topic_errors=errors,
        updated_at=time.monotonic(),
    )
