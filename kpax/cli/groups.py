"""`kpax groups list|describe|delete`.

Role: consumer group administration on kpax.Admin; list shows each group's
type (classic or consumer); describe shows the kind of group (classic, or
consumer for KIP-848 groups), its state and assignor, members with their
partitions (for consumer groups also member epochs, subscriptions and, while
they reconcile, target assignments), and committed offsets with lag.
``delete`` is a dry run unless ``--execute``: it prints the plan (each
group's type, state, members and committed offsets) and changes nothing; a
group with active members is refused either way (the coordinator would
refuse to delete it: NON_EMPTY_GROUP).

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

import kpax
from kpax.admin import GroupDescription, MemberDescription
from kpax.cli import common
from kpax.cli.errors import CommandError
from kpax.cli.output import emit, note, table
from kpax.cli.settings import Settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    with common.admin(settings) as adm:
        if args.action == "list":
            return _list(adm, args, settings)
        if args.action == "describe":
            return _describe(adm, args, settings)
        return _delete(adm, args, settings)


def _delete(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    names = list(dict.fromkeys(args.groups))
    desc = adm.describe_groups(names, timeout=settings.timeout)
    desc.raise_for_errors()  # an unknown group: GROUP_ID_NOT_FOUND naming it
    rows: list[dict[str, Any]] = []
    for gid in names:
        g = desc[gid]
        if not g.is_empty:
            raise CommandError(
                f"{g.type} group {gid!r} has {len(g.members)} active member(s) "
                f"(state {g.state}): stop its consumers before deleting it"
            )
        committed = adm.list_group_offsets(gid, timeout=settings.timeout)
        topics = sorted({tp.topic for tp in committed})
        rows.append(
            {
                "group": gid,
                "type": g.type,
                "state": g.state,
                "offsets": len(committed),
                "topics": topics,
            }
        )
    if args.execute:
        adm.delete_groups(names, timeout=settings.timeout).raise_for_errors()
    head = "deleted" if args.execute else "plan (dry run, nothing deleted)"
    human = f"{head}: {len(rows)} group(s)\n" + table(
        ["GROUP", "TYPE", "STATE", "OFFSETS", "TOPICS"],
        [[r["group"], r["type"], r["state"], r["offsets"], ",".join(r["topics"])] for r in rows],
    )
    doc = {"executed": args.execute, "dry_run": not args.execute, "groups": rows}
    emit(doc, human, args.output)
    if not args.execute:
        note("dry run: no group deleted; add --execute to delete them")
    return 0


def _list(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    groups = sorted(adm.list_groups(timeout=settings.timeout), key=lambda g: g.group_id)
    docs = [
        {"group": g.group_id, "state": g.state, "type": g.type, "protocol_type": g.protocol_type}
        for g in groups
    ]
    human = table(["GROUP", "STATE", "TYPE"], [[d["group"], d["state"], d["type"]] for d in docs])
    emit(docs, human, args.output)
    return 0


def _describe(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    desc = adm.describe_groups(args.groups, timeout=settings.timeout)
    desc.raise_for_errors()
    docs: list[dict[str, Any]] = []
    out: list[str] = []
    for gid in args.groups:
        g = desc[gid]
        committed = adm.list_group_offsets(gid, timeout=settings.timeout)
        tps = sorted(committed, key=lambda tp: (tp.topic, tp.partition))
        latest: dict[kpax.TopicPartition, int] = {}
        if tps:
            res = adm.list_offsets(dict.fromkeys(tps, "latest"), timeout=settings.timeout)
            latest = {tp: res[tp].offset for tp in tps if tp not in res.errors}
        owner = {tp: m.member_id for m in g.members for tp in m.assignment}
        offs: list[dict[str, Any]] = []
        for tp in tps:
            off = committed[tp].offset
            end = latest.get(tp)
            offs.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "committed": off,
                    "latest": end,
                    "lag": end - off if end is not None and off >= 0 else None,
                    "member": owner.get(tp),
                }
            )
        members = [_member_doc(m) for m in g.members]
        docs.append(
            {
                "group": gid,
                "state": g.state,
                "type": g.type,
                "protocol_type": g.protocol_type,
                "protocol": g.protocol,
                "assignor": g.assignor or None,
                "coordinator": g.coordinator,
                "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch,
                "members": members,
                "offsets": offs,
            }
        )
        out.append(f"group {gid}: {_summary(g)}, {len(members)} member(s)")
        if members:
            out += ["  " + ln for ln in _members_table(g, members).splitlines()]
        if offs:
            rows = [
                [o["topic"], o["partition"], o["committed"], o["latest"], o["lag"]] for o in offs
            ]
            out += [
                "  " + ln
                for ln in table(
                    ["TOPIC", "PARTITION", "COMMITTED", "LATEST", "LAG"], rows
                ).splitlines()
            ]
    emit(docs, "\n".join(out), args.output)
    return 0


def _tps(tps: tuple[kpax.TopicPartition, ...] | None) -> list[str] | None:
    return None if tps is None else [f"{tp.topic}-{tp.partition}" for tp in tps]


def _kind(g: GroupDescription) -> str:
    """What kind of group this is, in words."""
    if g.type == "consumer":
        return "consumer group (KIP-848)"
    if g.type != "classic":
        return f"{g.type} group"
    if g.protocol_type == "consumer":
        return "classic consumer group"
    if not g.protocol_type:
        return "classic group (offsets only, no group management)"
    return f"classic group, protocol type {g.protocol_type!r}"


def _summary(g: GroupDescription) -> str:
    parts = [_kind(g), f"state {g.state}"]
    if g.assignor:
        parts.append(f"assignor {g.assignor}")
    elif g.protocol:
        parts.append(f"protocol {g.protocol}")
    if g.group_epoch is not None:
        parts.append(f"epoch {g.group_epoch}")
    parts.append(f"coordinator {g.coordinator}")
    return ", ".join(parts)


def _member_doc(m: MemberDescription) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "client_id": m.client_id,
        "host": m.client_host,
        "instance_id": m.group_instance_id,
        "rack": m.rack,
        "member_epoch": m.member_epoch,
        "upgraded": m.upgraded,
        "subscribed_topics": None if m.subscribed_topics is None else list(m.subscribed_topics),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": _tps(m.assignment),
        "target_assignment": _tps(m.target_assignment),
    }


def _members_table(g: GroupDescription, members: list[dict[str, Any]]) -> str:
    """MEMBER CLIENT HOST [INSTANCE] [EPOCH] TOPICS PARTITIONS [TARGET]: the
    optional columns only where some member has a value (TARGET while a
    consumer group's member still reconciles towards its target assignment)."""

    def words(v: list[str] | None) -> str | None:
        return None if v is None else " ".join(v)

    cols: list[tuple[str, Any]] = [
        ("MEMBER", lambda m: m["member_id"]),
        ("CLIENT", lambda m: m["client_id"]),
        ("HOST", lambda m: m["host"]),
    ]
    if any(m["instance_id"] for m in members):
        cols.append(("INSTANCE", lambda m: m["instance_id"]))
    if g.type == "consumer":
        cols.append(("EPOCH", lambda m: m["member_epoch"]))
    cols.append(("TOPICS", lambda m: m["subscribed_topic_regex"] or words(m["subscribed_topics"])))
    cols.append(("PARTITIONS", lambda m: words(m["assignment"])))
    if any(
        m["target_assignment"] is not None and m["target_assignment"] != m["assignment"]
        for m in members
    ):
        cols.append(("TARGET", lambda m: words(m["target_assignment"])))
    return table([c for c, _ in cols], [[f(m) for _, f in cols] for m in members])
