"""The fake cluster's state: brokers, topics, partitions, configs, coordinators.

Role: the data every handler reads and changes, sans I/O. A topic has a name, a
topic id (a UUID drawn from the cluster's seeded ``random.Random``), configs
(overrides of :data:`TOPIC_DEFAULTS`) and partitions; a partition has a leader,
a leader epoch, replicas and an ISR (metadata only: every replica is always in
sync and the high watermark is the log end offset) and its
:class:`~kpax.testing.fake.log.PartitionLog`. Replicas are placed as Kafka
does, round-robin from a random broker.

Leadership changes bump the leader epoch and start a new entry in the log's
epoch cache: :meth:`ClusterState.move_leader`, :meth:`set_offline` (leader -1),
:meth:`set_online`, and stopping a broker (its partitions move to another live
replica, else go offline). Coordinators: a group's or transactional id's
coordinator is the broker at ``crc32(key) % brokers`` (the next live one when
it is stopped) unless :meth:`move_coordinator` placed it.

Imports: kpax.testing.fake.{codes,log} and the standard library.
"""

from __future__ import annotations

import random
import re
import uuid
import zlib
from dataclasses import dataclass, field

from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.log import PartitionLog

__all__ = [
    "BROKER_DEFAULTS",
    "GROUP_DEFAULTS",
    "TOPIC_DEFAULTS",
    "BrokerInfo",
    "ClusterState",
    "Partition",
    "Topic",
]

#: Topic configs the fake knows, with Kafka 4's defaults (DescribeConfigs shows
#: them; CreateTopics and IncrementalAlterConfigs accept only these names).
TOPIC_DEFAULTS: dict[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "index.interval.bytes": "4096",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}

#: Broker configs the fake reads, with its defaults (Kafka's, except a
#: heartbeat interval of 500 ms for KIP-848 groups so tests rebalance fast).
BROKER_DEFAULTS: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "delete.topic.enable": "true",
    "message.max.bytes": "1048588",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.initial.rebalance.delay.ms": "0",
    "group.max.size": "2147483647",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.assignors": "uniform,range",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "45000",
    "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.max.record.lock.duration.ms": "3600000",
    "group.share.delivery.count.limit": "5",
    "group.share.partition.max.record.locks": "2000",
    "transaction.max.timeout.ms": "900000",
    "transaction.version": "2",
    "max.incremental.fetch.session.cache.slots": "1000",
    "offsets.topic.num.partitions": "50",
    # shown by DescribeConfigs only
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "min.insync.replicas": "1",
    "compression.type": "producer",
}

#: Group configs (resource type GROUP): those without a value here default to the
#: broker config ``group.<name>``.
GROUP_DEFAULTS: dict[str, str | None] = {
    "consumer.session.timeout.ms": None,
    "consumer.heartbeat.interval.ms": None,
    "share.session.timeout.ms": None,
    "share.heartbeat.interval.ms": None,
    "share.record.lock.duration.ms": None,
    "share.delivery.count.limit": None,
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
}

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass
class BrokerInfo:
    node_id: int
    host: str = "127.0.0.1"
    port: int = 0
    rack: str | None = None
    alive: bool = True


@dataclass
class Partition:
    topic: str
    index: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    log: PartitionLog = field(default_factory=PartitionLog)

    @property
    def isr(self) -> list[int]:
        return list(self.replicas) if self.leader >= 0 else []


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def config(self, name: str) -> str:
        return self.configs.get(name, TOPIC_DEFAULTS.get(name, ""))


def check_topic_name(name: str | None) -> str:
    if not name or name in (".", "..") or not _LEGAL_TOPIC.match(name):
        raise ApiError(
            codes.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} is illegal: up to 249 of [a-zA-Z0-9._-], not '.' or '..'",
        )
    return name


class ClusterState:
    """See the module docstring."""

    def __init__(
        self,
        brokers: list[BrokerInfo],
        rng: random.Random,
        config: dict[str, str] | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if not brokers:
            raise ValueError("a cluster needs at least one broker")
        self.brokers: dict[int, BrokerInfo] = {b.node_id: b for b in brokers}
        self.rng = rng
        self.config: dict[str, str] = dict(config or {})
        self.cluster_id = cluster_id or _uuid(rng).hex[:22]
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        #: (key type, key) -> node id placed by move_coordinator.
        self.coordinators: dict[tuple[int, str], int] = {}

    # ------------------------------------------------------------ configs

    def conf(self, name: str) -> str:
        return self.config.get(name, BROKER_DEFAULTS.get(name, ""))

    def conf_int(self, name: str) -> int:
        return int(self.conf(name))

    # ------------------------------------------------------------ brokers

    def alive(self) -> list[int]:
        return sorted(n for n, b in self.brokers.items() if b.alive)

    def is_alive(self, node_id: int) -> bool:
        b = self.brokers.get(node_id)
        return b is not None and b.alive

    def controller(self) -> int:
        alive = self.alive()
        return alive[0] if alive else -1

    def stop_broker(self, node_id: int) -> None:
        broker = self.brokers[node_id]
        broker.alive = False
        for topic in self.topics.values():
            for p in topic.partitions:
                if p.leader == node_id:
                    others = [r for r in p.replicas if r != node_id and self.is_alive(r)]
                    self._elect(p, others[0] if others else -1)

    def start_broker(self, node_id: int) -> None:
        self.brokers[node_id].alive = True
        for topic in self.topics.values():
            for p in topic.partitions:
                if p.leader < 0 and node_id in p.replicas:
                    self._elect(p, node_id)

    # ------------------------------------------------------------ topics

    def topic(self, name: str | None) -> Topic | None:
        return self.topics.get(name) if name is not None else None

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
        *,
        validate_only: bool = False,
        internal: bool = False,
    ) -> Topic:
        """Create a topic (ApiError if it cannot be); -1 takes the broker defaults."""
        check_topic_name(name)
        if name in self.topics:
            raise ApiError(codes.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        configs = dict(configs or {})
        for key in configs:
            if key not in TOPIC_DEFAULTS:
                raise ApiError(codes.INVALID_CONFIG, f"unknown topic config {key!r}")
        alive = self.alive()
        if assignments:
            if partitions not in (-1, len(assignments)) or sorted(assignments) != list(
                range(len(assignments))
            ):
                raise ApiError(codes.INVALID_REPLICA_ASSIGNMENT, "bad replica assignment")
            for replicas in assignments.values():
                if not replicas or any(r not in self.brokers for r in replicas):
                    raise ApiError(codes.INVALID_REPLICA_ASSIGNMENT, f"bad replicas {replicas}")
            placed = [list(assignments[i]) for i in range(len(assignments))]
        else:
            n = self.conf_int("num.partitions") if partitions == -1 else partitions
            rf = (
                self.conf_int("default.replication.factor")
                if replication_factor == -1
                else replication_factor
            )
            if n <= 0:
                raise ApiError(codes.INVALID_PARTITIONS, f"{n} partitions: must be at least 1")
            if rf <= 0 or rf > len(alive):
                raise ApiError(
                    codes.INVALID_REPLICATION_FACTOR,
                    f"replication factor {rf}: larger than the {len(alive)} live brokers"
                    if rf > 0
                    else f"replication factor {rf}: must be at least 1",
                )
            placed = self._place(n, rf, alive)
        if validate_only:
            return Topic(name, uuid.UUID(int=0))
        topic = Topic(name, _uuid(self.rng), configs=configs, internal=internal)
        for i, replicas in enumerate(placed):
            topic.partitions.append(self._new_partition(name, i, replicas))
        self.topics[name] = topic
        self.by_id[topic.topic_id] = topic
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise ApiError(codes.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        del self.by_id[topic.topic_id]
        return topic

    def add_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise ApiError(codes.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        have = len(topic.partitions)
        if count <= have:
            raise ApiError(
                codes.INVALID_PARTITIONS,
                f"topic {name!r} has {have} partitions; {count} would not add any",
            )
        rf = len(topic.partitions[0].replicas) if topic.partitions else 1
        if assignments is not None:
            if len(assignments) != count - have:
                raise ApiError(codes.INVALID_REPLICA_ASSIGNMENT, "one assignment per new partition")
            placed = [list(a) for a in assignments]
        else:
            alive = self.alive()
            placed = self._place(count - have, min(rf, len(alive)), alive)
        if validate_only:
            return
        for i, replicas in enumerate(placed):
            topic.partitions.append(self._new_partition(name, have + i, replicas))

    def _place(self, n: int, rf: int, alive: list[int]) -> list[list[int]]:
        if not alive:
            raise ApiError(codes.INVALID_REPLICATION_FACTOR, "no live broker")
        start = self.rng.randrange(len(alive))
        return [[alive[(start + p + j) % len(alive)] for j in range(rf)] for p in range(n)]

    def _new_partition(self, topic: str, index: int, replicas: list[int]) -> Partition:
        leader = next((r for r in replicas if self.is_alive(r)), -1)
        p = Partition(topic, index, replicas, leader)
        p.log.new_leader_epoch(0)
        return p

    # ------------------------------------------------------------ leadership

    def _elect(self, p: Partition, leader: int) -> None:
        p.leader = leader
        p.leader_epoch += 1
        if leader >= 0:
            p.log.new_leader_epoch(p.leader_epoch)

    def move_leader(self, topic: str, index: int, to: int) -> Partition:
        p = self._partition_or_fail(topic, index)
        if to not in self.brokers:
            raise ValueError(f"no broker {to}")
        if to not in p.replicas:
            p.replicas.append(to)
        self._elect(p, to)
        return p

    def set_offline(self, topic: str, index: int) -> Partition:
        p = self._partition_or_fail(topic, index)
        self._elect(p, -1)
        return p

    def set_online(self, topic: str, index: int, leader: int | None = None) -> Partition:
        p = self._partition_or_fail(topic, index)
        if leader is None:
            leader = next((r for r in p.replicas if self.is_alive(r)), -1)
        if leader < 0:
            raise ValueError(f"{topic}-{index}: no live replica to lead it")
        if leader not in p.replicas:
            p.replicas.append(leader)
        self._elect(p, leader)
        return p

    def _partition_or_fail(self, topic: str, index: int) -> Partition:
        p = self.partition(topic, index)
        if p is None:
            raise ValueError(f"no partition {topic}-{index}")
        return p

    # ------------------------------------------------------------ coordinators

    def coordinator(self, key_type: int, key: str) -> int:
        """The node coordinating ``key`` (0 group, 1 transaction, 2 share), -1 if none is alive."""
        ids = sorted(self.brokers)
        placed = self.coordinators.get((key_type, key))
        if placed is not None and self.is_alive(placed):
            return placed
        start = ids.index(placed) if placed is not None else zlib.crc32(key.encode()) % len(ids)
        for i in range(len(ids)):
            node = ids[(start + i) % len(ids)]
            if self.is_alive(node):
                return node
        return -1

    def move_coordinator(self, key_type: int, key: str, to: int) -> None:
        if to not in self.brokers:
            raise ValueError(f"no broker {to}")
        self.coordinators[(key_type, key)] = to


def _uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def leader_check(
    state: ClusterState, node_id: int, topic: Topic | None, index: int, current_epoch: int = -1
) -> tuple[Partition | None, int]:
    """The partition when ``node_id`` leads it at ``current_epoch`` (-1: any), else
    (None or the partition, the error a leader-routed request gets)."""
    if topic is None or not 0 <= index < len(topic.partitions):
        return None, codes.UNKNOWN_TOPIC_OR_PARTITION
    p = topic.partitions[index]
    if p.leader != node_id:
        return p, codes.NOT_LEADER_OR_FOLLOWER
    if current_epoch >= 0:
        if current_epoch < p.leader_epoch:
            return p, codes.FENCED_LEADER_EPOCH
        if current_epoch > p.leader_epoch:
            return p, codes.UNKNOWN_LEADER_EPOCH
    return p, codes.NONE
