"""Public value types shared by the producer, consumer and admin faces.

Role: small immutable records users pass in and get back
(:class:`TopicPartition`, :class:`OffsetAndMetadata`, :class:`NewTopic`, ...)
and :class:`BatchResult`, the per-item result of a batch admin call.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from kpax.proto.errors import KafkaError


class TopicPartition(NamedTuple):
    """A partition of a topic: ``TopicPartition("orders", 0)``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the next offset to read, with optional metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's place in its group (``consumer.group_metadata()``), which
    ``producer.send_offsets_to_transaction`` needs to commit offsets in a
    transaction; a bare group id string is accepted there too."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetAndTimestamp(NamedTuple):
    """An offset found by :meth:`Admin.list_offsets` / ``offsets_for_times``."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


class RecordMetadata(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. ``num_partitions``/``replication_factor`` of -1 take
    the broker's defaults; ``replica_assignment`` maps partition -> broker ids."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerDescription, ...]


K = TypeVar("K")
V = TypeVar("V")


class BatchResult(Mapping[K, V], Generic[K, V]):
    """The per-item outcome of a batch call (create 3 topics, delete 5 groups...).

    A mapping over every item asked for: looking up an item that failed raises
    that item's error; :attr:`errors` holds every failure, :attr:`ok` tells
    whether there were none, :meth:`raise_for_errors` raises the first.
    """

    def __init__(self, values: Mapping[K, V], errors: Mapping[K, KafkaError]) -> None:
        self._values = dict(values)
        self.errors: dict[K, KafkaError] = dict(errors)

    @property
    def ok(self) -> bool:
        """Did every item succeed?"""
        return not self.errors

    def __getitem__(self, key: K) -> V:
        err = self.errors.get(key)
        if err is not None:
            raise err
        return self._values[key]

    def __iter__(self) -> Iterator[K]:
        yield from self._values
        yield from (k for k in self.errors if k not in self._values)

    def __len__(self) -> int:
        return len(self._values.keys() | self.errors.keys())

    @property
    def succeeded(self) -> dict[K, V]:
        """The items that succeeded and their results."""
        return dict(self._values)

    def raise_for_errors(self) -> None:
        """Raise the first item's error, if any failed."""
        for err in self.errors.values():
            raise err

    def __repr__(self) -> str:
        return f"BatchResult(ok={self._values!r}, errors={self.errors!r})"
