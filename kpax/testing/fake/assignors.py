"""Server-side assignors of KIP-848 groups: ``uniform`` (sticky) and ``range``.

Role: from the members' subscriptions (member id -> topic ids) and each topic's
partition count, the target assignment (member id -> topic id -> partitions).
``uniform`` keeps each member's previous partitions where it can, hands out the
rest to the least loaded subscribed member, then moves partitions from the most
to the least loaded until counts differ by at most one (among members that may
take them). ``range`` gives each member a contiguous range of every topic it
subscribes to, members sorted by id. Both are deterministic.

Imports: the standard library only.
"""

from __future__ import annotations

import uuid

__all__ = ["ASSIGNORS", "Assignment", "range_assign", "uniform_assign"]

Assignment = dict[str, dict[uuid.UUID, set[int]]]


def range_assign(
    subscriptions: dict[str, set[uuid.UUID]],
    partitions: dict[uuid.UUID, int],
    previous: Assignment,
) -> Assignment:
    out: Assignment = {m: {} for m in subscriptions}
    for tid in sorted(partitions, key=str):
        members = sorted(m for m, subs in subscriptions.items() if tid in subs)
        if not members:
            continue
        n = partitions[tid]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][tid] = set(range(start, start + count))
            start += count
    return out


def uniform_assign(
    subscriptions: dict[str, set[uuid.UUID]],
    partitions: dict[uuid.UUID, int],
    previous: Assignment,
) -> Assignment:
    members = sorted(subscriptions)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    for m in members:
        for tid, parts in previous.get(m, {}).items():
            if tid not in subscriptions[m] or tid not in partitions:
                continue
            for p in parts:
                if p < partitions[tid] and (tid, p) not in owner:
                    owner[(tid, p)] = m
                    load[m].add((tid, p))
    for tid in sorted(partitions, key=str):
        eligible = [m for m in members if tid in subscriptions[m]]
        if not eligible:
            continue
        for p in range(partitions[tid]):
            if (tid, p) in owner:
                continue
            m = min(eligible, key=lambda x: (len(load[x]), x))
            owner[(tid, p)] = m
            load[m].add((tid, p))
    # balance: move from the most loaded to the least loaded member that may take it
    for _ in range(sum(partitions.values()) + 1):
        moved = False
        for heavy in sorted(members, key=lambda x: (-len(load[x]), x)):
            for tp in sorted(load[heavy], key=lambda x: (str(x[0]), x[1])):
                takers = [
                    m
                    for m in members
                    if tp[0] in subscriptions[m] and len(load[m]) + 1 < len(load[heavy])
                ]
                if takers:
                    m = min(takers, key=lambda x: (len(load[x]), x))
                    load[heavy].discard(tp)
                    load[m].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    out: Assignment = {m: {} for m in members}
    for m, tps in load.items():
        for tid, p in tps:
            out[m].setdefault(tid, set()).add(p)
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
