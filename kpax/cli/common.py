"""Helpers shared by the `kpax` subcommands: clients from settings, topic checks.

Role: open kpax.Admin/Producer/Consumer with the command's settings, check a
topic exists (a clear "unknown topic" error instead of auto-creation or a
wait), tell share groups from the others, resolve offset/time specs to
offsets per partition.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable

import kpax
from kpax.admin import ShareGroupDescription, SharePartitionOffset
from kpax.cli.errors import CommandError, UsageError
from kpax.cli.settings import Settings
from kpax.cli.timespec import Spec
from kpax.errors import (
    GroupIdNotFoundError,
    UnknownTopicOrPartitionError,
    UnsupportedApiError,
    UnsupportedVersionError,
)

#: What describing a group as a share group fails with when it is none: unknown,
#: a group of another type ("not a share group"), or a broker without share
#: groups (before Kafka 4.1).
_NOT_SHARE_GROUP = (GroupIdNotFoundError, UnsupportedApiError, UnsupportedVersionError)


def admin(settings: Settings) -> kpax.Admin:
    return kpax.Admin(**settings.admin())


def topic_partitions(adm: kpax.Admin, topic: str, settings: Settings) -> list[int]:
    """The topic's partition numbers; CommandError if the topic does not exist."""
    result = adm.describe_topics([topic], timeout=settings.timeout)
    if topic in result.errors:
        err = result.errors[topic]
        if isinstance(err, UnknownTopicOrPartitionError):
            raise CommandError(f"unknown topic {topic!r} on {settings.bootstrap}")
        raise err
    return sorted(p.partition for p in result[topic].partitions)


def share_groups(
    adm: kpax.Admin, group_ids: list[str], timeout: float
) -> dict[str, ShareGroupDescription]:
    """The share groups among ``group_ids``, described; the others (unknown,
    of another type, or all of them on a broker without share groups) are left
    out. Other failures (authorization, timeouts) are raised."""
    if not group_ids:
        return {}
    try:
        res = adm.describe_share_groups(group_ids, timeout=timeout)
    except _NOT_SHARE_GROUP:
        return {}
    found: dict[str, ShareGroupDescription] = {}
    for gid in group_ids:
        err = res.errors.get(gid)
        if err is None:
            found[gid] = res[gid]
        elif not isinstance(err, _NOT_SHARE_GROUP):
            raise err
    return found


def share_lag(start: SharePartitionOffset | None, latest: int | None) -> int | None:
    """A share group's lag on a partition: the broker's count (KIP-1226); from a
    broker that does not report it, the latest offset minus the start offset
    (which also counts records past the start already acknowledged); None
    where the group has no start offset."""
    if start is None:
        return None
    if start.lag is not None:
        return start.lag
    return None if latest is None else max(latest - start.start_offset, 0)


def pick_partitions(all_parts: list[int], wanted: Iterable[int] | None, topic: str) -> list[int]:
    if not wanted:
        return all_parts
    chosen = sorted(set(wanted))
    missing = [p for p in chosen if p not in all_parts]
    if missing:
        raise UsageError(
            f"topic {topic!r} has no partition {missing[0]} (partitions 0..{len(all_parts) - 1})"
        )
    return chosen


def resolve_spec(
    adm: kpax.Admin, tps: list[kpax.TopicPartition], spec: Spec, timeout: float
) -> dict[kpax.TopicPartition, int]:
    """The offset *spec* names in each partition (a time past the end -> the end)."""
    if spec.kind == "offset":
        return dict.fromkeys(tps, spec.value)
    latest = _offsets(adm, tps, "latest", timeout)
    if spec.kind == "latest":
        return latest
    earliest = _offsets(adm, tps, "earliest", timeout)
    if spec.kind == "earliest":
        return earliest
    if spec.kind == "from_end":
        return {tp: max(earliest[tp], latest[tp] - spec.value) for tp in tps}
    res = adm.list_offsets(dict.fromkeys(tps, spec.value), timeout=timeout)
    res.raise_for_errors()
    out = {}
    for tp in tps:
        off = res[tp].offset
        out[tp] = latest[tp] if off is None or off < 0 else off
    return out


def _offsets(
    adm: kpax.Admin, tps: list[kpax.TopicPartition], which: str, timeout: float
) -> dict[kpax.TopicPartition, int]:
    res = adm.list_offsets(dict.fromkeys(tps, which), timeout=timeout)
    res.raise_for_errors()
    return {tp: res[tp].offset for tp in tps}


def earliest_latest(
    adm: kpax.Admin,
    tps: list[kpax.TopicPartition],
    timeout: float,
    isolation: str = "read_uncommitted",
) -> tuple[dict[kpax.TopicPartition, int], dict[kpax.TopicPartition, int]]:
    e = adm.list_offsets(dict.fromkeys(tps, "earliest"), timeout=timeout)
    e.raise_for_errors()
    lat = adm.list_offsets(dict.fromkeys(tps, "latest"), isolation_level=isolation, timeout=timeout)
    lat.raise_for_errors()
    return {tp: e[tp].offset for tp in tps}, {tp: lat[tp].offset for tp in tps}


def kv_pairs(items: Iterable[str] | None, what: str) -> list[tuple[str, str]]:
    out = []
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise UsageError(f"bad {what} {item!r}: expected key=value")
        out.append((k, v))
    return out
