"""The "range" assignor: Java's ``RangeAssignor`` (without rack awareness).

Role: per topic, the members subscribed to it in Java's member order (static
members by group instance id first, then member id) each take a contiguous
range of partitions; the first ``partitions % members`` take one more. Same
inputs give the same assignment as the Java client.

Imports: kpax.structs and kpax.consumer.assignors.base.
"""

from __future__ import annotations

from collections.abc import Mapping

from kpax.consumer.assignors.base import (
    MemberAssignment,
    MemberSubscription,
    java_order,
    java_string_key,
)
from kpax.structs import TopicPartition

__all__ = ["RangeAssignor"]


class RangeAssignor:
    """Contiguous partition ranges per topic (eager rebalancing)."""

    name = "range"
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
        members_per_topic: dict[str, list[str]] = {}
        for member_id, sub in subscriptions.items():
            for topic in dict.fromkeys(sub.topics):
                members_per_topic.setdefault(topic, []).append(member_id)
        result: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic in sorted(members_per_topic, key=java_string_key):
            n = partitions_per_topic.get(topic, 0)
            if n <= 0:
                continue
            members = sorted(
                members_per_topic[topic],
                key=lambda m: (
                    *java_order(m, subscriptions[m].group_instance_id),
                    java_string_key(m),
                ),
            )
            per_member, extra = divmod(n, len(members))
            for i, member_id in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                result[member_id].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
        return {m: MemberAssignment(parts) for m, parts in result.items()}
