"""`kpax offsets TOPIC` and `kpax rollback --group G TOPIC --to SPEC`.

Role: per partition the earliest and latest offsets, a group's committed
offset and lag (for a share group its start offset and lag instead), the
offset at a time; and moving a group's committed offsets
(classic and consumer (KIP-848) groups; refused while the group has active
members, or is in any state but Empty or Dead, as the coordinator would
refuse the commit). ``rollback`` is a dry run unless ``--execute``: as
``kafka-consumer-groups --reset-offsets``, it prints the plan (partition,
current, new, delta, and the partitions it moves forward, past records the
group has not read) on stdout and exits 0 without changing anything.
``--shift-by N`` moves N records from the committed offsets (Java's
``--shift-by``), or from ``--to``'s offsets when both are given. ``--to -N``
is refused: elsewhere -N means N records before the end, which would move a
group that lags by more than N forward, while kafka-consumer-groups users
read it as a shift back; the error names both spellings.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

import kpax
from kpax.cli import common
from kpax.cli.errors import CommandError, UsageError
from kpax.cli.output import emit, note, table
from kpax.cli.settings import Settings
from kpax.cli.timespec import Spec, parse_spec, parse_time

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


def _rollback_target(args: argparse.Namespace) -> tuple[Spec | None, int, str]:
    """``--to``'s spec (None without it), the shift and the plan's words for them."""
    shift = args.shift_by or 0
    if args.to is None:
        if args.shift_by is None:
            raise UsageError(
                "give --to SPEC (earliest, latest, OFFSET, a TIME), --shift-by N, or both"
            )
        return None, shift, f"the committed offsets {shift:+d}"
    spec = parse_spec(args.to, what="--to")
    if spec.kind == "from_end":
        n = spec.value
        raise UsageError(
            f"rollback --to {args.to.strip()} is ambiguous: to move the committed offsets "
            f"back {n} records (kafka-consumer-groups --shift-by -{n}), write --shift-by -{n}; "
            f"for {n} records before the end of each partition, write --to latest "
            f"--shift-by -{n}"
        )
    words = spec.describe() + (f" {shift:+d}" if shift else "")
    return spec, shift, words


def rollback(args: argparse.Namespace, settings: Settings) -> int:
    spec, shift, words = _rollback_target(args)
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
        old: dict[TP, int | None] = {}
        for tp in tps:
            c = current.get(tp)
            old[tp] = c.offset if c is not None and c.offset >= 0 else None
        earliest, latest = common.earliest_latest(adm, tps, settings.timeout)
        if spec is not None:
            base = common.resolve_spec(adm, tps, spec, settings.timeout)
        else:
            missing = [tp.partition for tp in tps if old[tp] is None]
            if missing:
                raise CommandError(
                    f"group {args.group!r} has no committed offset on partition(s) "
                    f"{', '.join(map(str, missing))} of {args.topic!r} to shift from: "
                    "give --to (e.g. --to earliest --shift-by N) or --partition"
                )
            base = {tp: o for tp, o in old.items() if o is not None}
        target = {tp: min(max(base[tp] + shift, earliest[tp]), latest[tp]) for tp in tps}
        rows: list[dict[str, Any]] = []
        forward: list[dict[str, int]] = []  # past records the group has not read
        for tp in tps:
            was, new = old[tp], target[tp]
            delta = new - was if was is not None else None
            rows.append({"partition": tp.partition, "current": was, "new": new, "delta": delta})
            if delta is not None and delta > 0:
                forward.append({"partition": tp.partition, "by": delta})
        if args.execute:
            adm.alter_group_offsets(args.group, target, timeout=settings.timeout).raise_for_errors()
    doc = {
        "group": args.group,
        "topic": args.topic,
        "to": words,
        "shift_by": shift,
        "executed": args.execute,
        "dry_run": not args.execute,
        "partitions": rows,
        "forward": forward,
    }
    head = "moved" if args.execute else "plan (dry run, nothing changed)"
    human = f"{head}: group {args.group!r} on {args.topic!r} to {words}\n" + table(
        ["PARTITION", "CURRENT", "NEW", "DELTA"],
        [[r["partition"], r["current"], r["new"], _signed(r["delta"])] for r in rows],
    )
    if forward:
        skipped = sum(f["by"] for f in forward)
        human += (
            f"\nforward: {len(forward)} partition(s) "
            f"{'moved' if args.execute else 'move'} past {skipped:,} records the group has "
            "not read: " + ", ".join(f"partition {f['partition']} by {f['by']:,}" for f in forward)
        )
    emit(doc, human, args.output)
    if not args.execute:
        note("dry run: no offset changed; add --execute to move them")
    return 0


def _signed(delta: int | None) -> str | None:
    return None if delta is None else f"{delta:+d}"
