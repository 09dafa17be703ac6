"""`kpax offsets TOPIC` and `kpax rollback --group G TOPIC --to SPEC`.

Role: per partition the earliest and latest offsets, a group's committed
offset and lag (for a share group its start offset and lag instead), the
offset at a time; and moving a group's committed offsets
(classic and consumer (KIP-848) groups; refused while the group has active
members, or is in any state but Empty or Dead, as the coordinator would
refuse the commit). ``rollback`` is a dry run unless ``--execute``: as
``kafka-consumer-groups --reset-offsets``, it prints the plan (partition,
current, new, delta) on stdout and exits 0 without changing anything.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

import kpax
from kpax.cli import common
from kpax.cli.errors import CommandError
from kpax.cli.output import emit, note, table
from kpax.cli.settings import Settings
from kpax.cli.timespec import parse_spec, parse_time

TP = kpax.TopicPartition


def offsets(args: argparse.Namespace, settings: Settings) -> int:
    at_time = parse_time(args.time, what="--time") if args.time else None
    with common.admin(settings) as adm:
        parts = common.pick_partitions(
            common.topic_partitions(adm, args.topic, settings), args.partition, args.topic
        )
        tps = [TP(args.topic, p) for p in parts]
        earliest, latest = common.earliest_latest(adm, tps, settings.timeout)
        committed: dict[TP, Any] = {}
        starts: dict[TP, Any] = {}
        # a share group has start offsets, not committed ones
        share = bool(args.group) and bool(common.share_groups(adm, [args.group], settings.timeout))
        if share:
            starts = adm.list_share_group_offsets(args.group, tps, timeout=settings.timeout)
        elif args.group:
            committed = adm.list_group_offsets(args.group, tps, timeout=settings.timeout)
        at: dict[TP, Any] = {}
        if at_time is not None:
            res = adm.list_offsets(dict.fromkeys(tps, at_time), timeout=settings.timeout)
            res.raise_for_errors()
            at = {tp: res[tp] for tp in tps}
    rows: list[dict[str, Any]] = []
    for tp in tps:
        row: dict[str, Any] = {
            "partition": tp.partition,
            "earliest": earliest[tp],
            "latest": latest[tp],
            "records": latest[tp] - earliest[tp],
        }
        if share:
            start = starts.get(tp)
            row["start_offset"] = start.start_offset if start is not None else None
            row["lag"] = common.share_lag(start, latest[tp])
        elif args.group:
            c = committed.get(tp)
            off = c.offset if c is not None and c.offset >= 0 else None
            row["committed"] = off
            row["lag"] = latest[tp] - off if off is not None else latest[tp] - earliest[tp]
        if at_time is not None:
            o = at[tp]
            row["offset_at_time"] = (
                o.offset if o.offset is not None and o.offset >= 0 else latest[tp]
            )
            row["timestamp"] = o.timestamp if o.offset is not None and o.offset >= 0 else None
        rows.append(row)
    doc: dict[str, Any] = {"topic": args.topic, "partitions": rows}
    if args.group:
        doc["group"] = args.group
        if share:
            doc["group_type"] = "share"
        doc["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
    keys = list(rows[0]) if rows else ["partition"]
    human = table([k.upper() for k in keys], [[r[k] for k in keys] for r in rows])
    if share:
        human += (
            f"\nshare group {args.group!r}: total lag {doc['total_lag']} (from its start offsets)"
        )
    elif args.group:
        human += f"\ngroup {args.group!r}: total lag {doc['total_lag']}"
    emit(doc, human, args.output)
    return 0


def rollback(args: argparse.Namespace, settings: Settings) -> int:
    spec = parse_spec(args.to, what="--to")
    with common.admin(settings) as adm:
        parts = common.pick_partitions(
            common.topic_partitions(adm, args.topic, settings), args.partition, args.topic
        )
        tps = [TP(args.topic, p) for p in parts]
        desc = adm.describe_groups([args.group], timeout=settings.timeout)
        if args.group in desc.errors:
            raise desc.errors[args.group]
        group = desc[args.group]
        if not group.is_empty:
            # Coordinators refuse outside commits while a group has members
            # (UNKNOWN_MEMBER_ID), classic and consumer (KIP-848) groups alike;
            # kafka-consumer-groups --reset-offsets refuses the same way.
            raise CommandError(
                f"{group.type} group {args.group!r} has {len(group.members)} active "
                f"member(s) (state {group.state}): stop its consumers before moving "
                "its offsets"
            )
        current = adm.list_group_offsets(args.group, tps, timeout=settings.timeout)
        earliest, latest = common.earliest_latest(adm, tps, settings.timeout)
        target = common.resolve_spec(adm, tps, spec, settings.timeout)
        target = {tp: min(max(off, earliest[tp]), latest[tp]) for tp, off in target.items()}
        rows = []
        for tp in tps:
            c = current.get(tp)
            old = c.offset if c is not None and c.offset >= 0 else None
            new = target[tp]
            delta = new - old if old is not None else None
            rows.append({"partition": tp.partition, "current": old, "new": new, "delta": delta})
        if args.execute:
            adm.alter_group_offsets(args.group, target, timeout=settings.timeout).raise_for_errors()
    doc = {
        "group": args.group,
        "topic": args.topic,
        "to": spec.describe(),
        "executed": args.execute,
        "dry_run": not args.execute,
        "partitions": rows,
    }
    head = "moved" if args.execute else "plan (dry run, nothing changed)"
    human = f"{head}: group {args.group!r} on {args.topic!r} to {spec.describe()}\n" + table(
        ["PARTITION", "CURRENT", "NEW", "DELTA"],
        [[r["partition"], r["current"], r["new"], _signed(r["delta"])] for r in rows],
    )
    emit(doc, human, args.output)
    if not args.execute:
        note("dry run: no offset changed; add --execute to move them")
    return 0


def _signed(delta: int | None) -> str | None:
    return None if delta is None else f"{delta:+d}"
