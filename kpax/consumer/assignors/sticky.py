"""The "sticky" (KIP-54) and "cooperative-sticky" (KIP-429) assignors.

Role: wrap :mod:`~kpax.consumer.assignors.sticky_core` with what each Java
assignor reads from a subscription and sends in its user data:

* ``StickyAssignor`` (eager): the previous assignment and generation come from
  the user data (Java's ``StickyAssignorUserData`` v0/v1, byte-compatible, so
  kpax and Java members can share a group); a member without user data falls
  back to the subscription's ``owned_partitions`` and ``generation_id`` (v1+).
* ``CooperativeStickyAssignor``: ownership is the subscription's
  ``owned_partitions``; the generation is the subscription's (v2+) or else the
  int32 in the user data. The target assignment is the same as the sticky one,
  but a partition that would move to a member while another member still
  claims it is left out of this round: the owner revokes it, rejoins, and the
  follow-up rebalance hands it to its new owner.

Rack awareness (KIP-881) is not done: the interface carries no partition racks.

Imports: kpax.structs and kpax.consumer.assignors.*.
"""

from __future__ import annotations

from collections.abc import Mapping

from kpax.consumer.assignors.base import MemberAssignment, MemberSubscription
from kpax.consumer.assignors.sticky_core import sticky_assign, valid_ownership
from kpax.consumer.assignors.userdata import (
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)
from kpax.structs import TopicPartition

__all__ = ["CooperativeStickyAssignor", "StickyAssignor"]


def _topics_of(subscriptions: Mapping[str, MemberSubscription]) -> dict[str, set[str]]:
    return {m: set(s.topics) for m, s in subscriptions.items()}


class StickyAssignor:
    """Balanced and sticky, eager rebalancing (Java's ``StickyAssignor``)."""

    name = "sticky"
    rebalance_protocols: tuple[str, ...] = ("eager",)

    def subscription_user_data(
        self, assignment: list[TopicPartition], generation: int
    ) -> bytes | None:
        return encode_sticky_user_data(assignment, generation)

    @staticmethod
    def previous(sub: MemberSubscription) -> tuple[list[TopicPartition], int]:
        """What *sub* owned and in which generation (-1: unknown)."""
        if sub.user_data:
            decoded = decode_sticky_user_data(sub.user_data)
            if decoded is None:
                return [], -1
            partitions, generation = decoded
            return partitions, -1 if generation is None else generation
        return list(sub.owned_partitions), sub.generation_id

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        topics_of = _topics_of(subscriptions)
        claims = {m: self.previous(s) for m, s in subscriptions.items()}
        owned = valid_ownership(partitions_per_topic, topics_of, claims)
        result = sticky_assign(partitions_per_topic, topics_of, owned)
        return {m: MemberAssignment(result[m]) for m in subscriptions}


class CooperativeStickyAssignor:
    """Sticky with incremental cooperative rebalancing (Java's ``CooperativeStickyAssignor``)."""

    name = "cooperative-sticky"
    rebalance_protocols: tuple[str, ...] = ("eager", "cooperative")

    def subscription_user_data(
        self, assignment: list[TopicPartition], generation: int
    ) -> bytes | None:
        return encode_cooperative_generation(generation)

    @staticmethod
    def previous(sub: MemberSubscription) -> tuple[list[TopicPartition], int]:
        """What *sub* owned and in which generation (-1: unknown)."""
        generation = sub.generation_id
        if generation < 0 and sub.user_data:
            decoded = decode_cooperative_generation(sub.user_data)
            generation = -1 if decoded is None else decoded
        return list(sub.owned_partitions), generation

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> dict[str, MemberAssignment]:
        topics_of = _topics_of(subscriptions)
        claims = {m: self.previous(s) for m, s in subscriptions.items()}
        owned = valid_ownership(partitions_per_topic, topics_of, claims)
        target = sticky_assign(partitions_per_topic, topics_of, owned)
        valid_owner = {tp: m for m, parts in owned.items() for tp in parts}
        claimers: dict[TopicPartition, set[str]] = {}
        for m, s in subscriptions.items():
            for tp in s.owned_partitions:
                claimers.setdefault(tp, set()).add(m)
        out: dict[str, MemberAssignment] = {}
        for m in subscriptions:
            keep = [
                tp
                for tp in target[m]
                if valid_owner.get(tp) == m or not (claimers.get(tp, set()) - {m})
            ]
            out[m] = MemberAssignment(keep)
        return out
