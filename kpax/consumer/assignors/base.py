"""What every consumer-group assignor shares: the interface and its value types.

Role: :class:`Assignor` (the protocol the group leader calls),
:class:`MemberSubscription` / :class:`MemberAssignment`, and the orderings the
Java client uses (members by group instance id then member id, topics and
member ids as Java compares strings: by UTF-16 code units).

Imports: kpax.structs and the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kpax.structs import TopicPartition

__all__ = [
    "Assignor",
    "MemberAssignment",
    "MemberSubscription",
    "all_partitions",
    "java_order",
    "java_string_key",
    "sorted_members",
]


@dataclass
class MemberSubscription:
    """One member's JoinGroup metadata (``ConsumerProtocolSubscription``).

    ``generation_id`` -1 and ``rack_id`` None mean "not sent" (older versions);
    ``group_instance_id`` comes from the JoinGroup response, not these bytes.
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass
class MemberAssignment:
    """What the leader gives one member (``ConsumerProtocolAssignment``)."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


@runtime_checkable
class Assignor(Protocol):
    """A client-side partition assignor of the classic consumer group protocol."""

    name: str
    rebalance_protocols: tuple[str, ...]

    def subscription_user_data(
        self, assignment: list[TopicPartition], generation: int
    ) -> bytes | None:
        """The user data this member sends when joining, given what it owns now."""
        ...

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        """Every member id to its assignment (members with nothing get an empty one).

        *partitions_per_topic* holds the partition count of each subscribed
        topic the metadata knows; topics missing from it (or with 0 partitions)
        are not assigned, as in Java.
        """
        ...


def java_string_key(s: str) -> bytes:
    """Sort key ordering strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def java_order(member_id: str, group_instance_id: str | None) -> tuple[int, bytes]:
    """Java's ``MemberInfo`` order: static members (by instance id) first, then
    dynamic members by member id."""
    if group_instance_id is not None:
        return (0, java_string_key(group_instance_id))
    return (1, java_string_key(member_id))


def sorted_members(subscriptions: Mapping[str, MemberSubscription]) -> list[str]:
    """Member ids in Java's ``MemberInfo`` order."""
    return sorted(
        subscriptions,
        key=lambda m: (*java_order(m, subscriptions[m].group_instance_id), java_string_key(m)),
    )


def all_partitions(
    partitions_per_topic: Mapping[str, int], topics: Iterable[str]
) -> list[TopicPartition]:
    """Every partition of *topics* known to the metadata, topics in Java order."""
    out: list[TopicPartition] = []
    for topic in sorted(set(topics), key=java_string_key):
        n = partitions_per_topic.get(topic, 0)
        out.extend(TopicPartition(topic, p) for p in range(n))
    return out
