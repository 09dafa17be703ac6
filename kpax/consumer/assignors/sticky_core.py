"""The balanced, sticky assignment shared by the sticky assignors (KIP-54/KIP-429).

Role: given the members' topic subscriptions and the partitions each one
validly owned, compute an assignment that is

* complete: every partition of every subscribed topic goes to exactly one
  member subscribed to its topic;
* balanced: when all members subscribe to the same topics, counts differ by at
  most one; otherwise no partition can move, directly or through a chain of
  moves, from a member to a member with at least two fewer partitions;
* sticky: with equal subscriptions each member keeps as many of its partitions
  as a balanced result allows (the fewest possible moves); otherwise members
  keep what they owned and only the moves needed for balance are made,
  preferring partitions that were not previously owned.

Also :func:`valid_ownership`: which claimed partitions count as owned (highest
generation wins a conflict; a tie at the highest generation makes the
partition unowned; partitions of topics gone or no longer subscribed by the
claimer are dropped). Deterministic: same inputs, same output.

Imports: kpax.structs and kpax.consumer.assignors.base.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from kpax.consumer.assignors.base import java_string_key
from kpax.structs import TopicPartition

__all__ = ["sticky_assign", "tp_key", "valid_ownership"]


def tp_key(tp: TopicPartition) -> tuple[bytes, int]:
    return (java_string_key(tp.topic), tp.partition)


def valid_ownership(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, set[str]],
    claims: Mapping[str, tuple[Sequence[TopicPartition], int]],
) -> dict[str, list[TopicPartition]]:
    """Member -> partitions it validly owns, from member -> (claimed, generation)."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member in sorted(claims, key=java_string_key):
        partitions, generation = claims[member]
        subscribed = topics_of.get(member, set())
        for tp in dict.fromkeys(partitions):
            if tp.topic not in subscribed or not 0 <= tp.partition < partitions_per_topic.get(
                tp.topic, 0
            ):
                continue
            prev = best.get(tp)
            if prev is None or generation > prev[0]:
                best[tp] = (generation, member)
            elif generation == prev[0]:
                best[tp] = (generation, None)  # two owners in one generation: neither
    owned: dict[str, list[TopicPartition]] = {m: [] for m in topics_of}
    for tp, (_, owner) in best.items():
        if owner is not None:
            owned[owner].append(tp)
    for parts in owned.values():
        parts.sort(key=tp_key)
    return owned


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    topics_of: Mapping[str, set[str]],
    owned: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Member -> its new partitions (sorted). *owned* must come from :func:`valid_ownership`."""
    members = sorted(topics_of, key=java_string_key)
    if not members:
        return {}
    existing = {t: n for t, n in partitions_per_topic.items() if n > 0}
    subs = {m: topics_of[m] & existing.keys() for m in members}
    if all(subs[m] == subs[members[0]] for m in members):
        result = _assign_equal(members, subs[members[0]], existing, owned)
    else:
        result = _assign_general(members, subs, existing, owned)
    for parts in result.values():
        parts.sort(key=tp_key)
    return result


def _all_partitions(topics: set[str], counts: Mapping[str, int]) -> list[TopicPartition]:
    return [
        TopicPartition(t, p) for t in sorted(topics, key=java_string_key) for p in range(counts[t])
    ]


def _assign_equal(
    members: list[str],
    topics: set[str],
    counts: Mapping[str, int],
    owned: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    partitions = _all_partitions(topics, counts)
    min_quota, extra = divmod(len(partitions), len(members))
    result: dict[str, list[TopicPartition]] = {}
    for m in members:
        result[m] = list(owned.get(m, ())[:min_quota])
    # The members owning more than the minimum keep one more, while max slots last.
    over = [m for m in members if len(owned.get(m, ())) > min_quota]
    over.sort(key=lambda m: -len(owned[m]))  # stable: member order breaks ties
    for m in over[:extra]:
        result[m].append(owned[m][min_quota])
    slots_left = extra - min(extra, len(over))
    taken = {tp for parts in result.values() for tp in parts}
    free = deque(tp for tp in partitions if tp not in taken)
    for m in members:
        while len(result[m]) < min_quota:
            result[m].append(free.popleft())
    for m in members:
        if not free or slots_left == 0:
            break
        if len(result[m]) == min_quota:
            result[m].append(free.popleft())
            slots_left -= 1
    return result


def _assign_general(
    members: list[str],
    subs: Mapping[str, set[str]],
    counts: Mapping[str, int],
    owned: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    order = {m: i for i, m in enumerate(members)}
    subscribers: dict[str, list[str]] = {}
    for m in members:
        for t in subs[m]:
            subscribers.setdefault(t, []).append(m)
    # held[m][t]: the partitions of topic t member m holds; fresh[m][t]: how many
    # of them m did not own before this rebalance (moving those costs nothing).
    held: dict[str, dict[str, list[TopicPartition]]] = {m: {} for m in members}
    fresh: dict[str, dict[str, int]] = {m: {} for m in members}
    size = dict.fromkeys(members, 0)
    previous: set[tuple[str, TopicPartition]] = set()

    def give(m: str, tp: TopicPartition) -> None:
        held[m].setdefault(tp.topic, []).append(tp)
        size[m] += 1
        if (m, tp) not in previous:
            fresh[m][tp.topic] = fresh[m].get(tp.topic, 0) + 1

    def take(m: str, t: str, fresh_only: bool) -> TopicPartition:
        parts = held[m][t]
        # The most recently added partition that m did not own before, else the last.
        idx = next((i for i in range(len(parts) - 1, -1, -1) if (m, parts[i]) not in previous), -1)
        if fresh_only and (m, parts[idx]) in previous:
            raise AssertionError("no fresh partition to hand over")  # pragma: no cover
        tp = parts.pop(idx)
        size[m] -= 1
        if (m, tp) not in previous:
            fresh[m][t] -= 1
        return tp

    for m in members:
        for tp in owned.get(m, ()):
            previous.add((m, tp))
    for m in members:
        for tp in owned.get(m, ()):
            give(m, tp)
    taken = {tp for m in members for tp in owned.get(m, ())}
    free = [tp for tp in _all_partitions(set(subscribers), counts) if tp not in taken]
    # Most constrained partitions first, each to its least loaded eligible member.
    free.sort(key=lambda tp: (len(subscribers[tp.topic]), java_string_key(tp.topic), tp.partition))
    for tp in free:
        give(min(subscribers[tp.topic], key=lambda x: (size[x], order[x])), tp)

    def improve_from(src: str, fresh_only: bool) -> set[str] | None:
        # BFS over "can hand a partition to" edges (only partitions not owned
        # before when fresh_only), stopping at the first member with at least two
        # fewer partitions than src; moving one partition along each edge of the
        # path makes the sum of squared counts drop, so balancing ends. Returns
        # None after a move, else the members reached (none of them can improve).
        parent: dict[str, tuple[str, str]] = {}
        seen = {src}
        queue = deque([src])
        target = None
        limit = size[src] - 2
        while queue and target is None:
            y = queue.popleft()
            for t, parts in held[y].items():
                if not parts or (fresh_only and not fresh[y].get(t)):
                    continue
                for x in subscribers[t]:
                    if x not in seen:
                        seen.add(x)
                        parent[x] = (y, t)
                        queue.append(x)
                        if size[x] <= limit:
                            target = x
                            break
                if target is not None:
                    break
        if target is None:
            return seen
        x = target
        while x != src:
            y, t = parent[x]
            give(x, take(y, t, fresh_only))
            x = y
        return None

    # First balance by moving only partitions nobody keeps from before (free
    # ones): no revocation. Only then move owned partitions if still unbalanced.
    # A state with no improving chain is optimally balanced, so when a balanced
    # result exists that keeps every owned partition (e.g. the follow-up of a
    # cooperative rebalance) the second phase moves nothing.
    for fresh_only in (True, False):
        progress = True
        while progress:
            progress = False
            # A member reached from a source that cannot improve, with no more
            # partitions than it, cannot improve either: skip it in this pass.
            settled: set[str] = set()
            for src in sorted(members, key=lambda m: (-size[m], order[m])):
                if src in settled:
                    continue
                reached = improve_from(src, fresh_only)
                if reached is None:
                    progress = True
                    break
                settled |= {m for m in reached if size[m] <= size[src]}
    return {m: [tp for parts in held[m].values() for tp in parts] for m in members}
