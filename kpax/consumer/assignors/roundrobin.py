"""The "roundrobin" assignor: Java's ``RoundRobinAssignor``.

Role: all partitions of all subscribed topics (topics sorted, partitions in
order) are dealt one by one to the members in Java's member order, skipping
members not subscribed to the partition's topic. Same inputs give the same
assignment as the Java client.

Imports: kpax.structs and kpax.consumer.assignors.base.
"""

from __future__ import annotations

from collections.abc import Mapping

from kpax.consumer.assignors.base import (
    MemberAssignment,
    MemberSubscription,
    all_partitions,
    sorted_members,
)
from kpax.structs import TopicPartition

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor:
    """Partitions dealt round robin over the members (eager rebalancing)."""

    name = "roundrobin"
    rebalance_protocols: tuple[str, ...] = ("eager",)

    def subscription_user_data(
        self, assignment: list[TopicPartition], generation: int
    ) -> bytes | None:
        return None

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions)
        if not members:
            return {}
        topic_sets = {m: set(subscriptions[m].topics) for m in members}
        topics = [t for m in members for t in subscriptions[m].topics]
        i = 0
        count = len(members)
        for tp in all_partitions(partitions_per_topic, topics):
            # Some member is subscribed to tp.topic (it came from a subscription).
            while tp.topic not in topic_sets[members[i]]:
                i = (i + 1) % count
            result[members[i]].append(tp)
            i = (i + 1) % count
        return {m: MemberAssignment(parts) for m, parts in result.items()}
