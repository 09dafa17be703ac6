"""`kpax groups list|describe|delete|config`.

Role: group administration on kpax.Admin, for consumer groups (classic and
KIP-848) and share groups (KIP-932). list shows each group's type (classic,
consumer or share); describe shows the kind of group, its state, members with
their partitions and, for consumer groups, assignor, member epochs,
subscriptions, target assignments while members reconcile, and committed
offsets with lag; for share groups the group and assignment epochs and each
partition's start offset with lag. ``delete`` is a dry run unless
``--execute``: it prints the plan (each group's type, state, and the
partitions it has offsets for) and changes nothing; a group with active
members is refused either way (the coordinator would refuse to delete it:
NON_EMPTY_GROUP). ``config`` shows a group's configs (ConfigResourceType.GROUP:
session timeouts, a share group's share.auto.offset.reset...) or changes them.

A group is described as a consumer or classic group first (describe_groups),
and as a share group (describe_share_groups) when it is not one: a group that
is neither is "not found".

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

import kpax
from kpax.admin import (
    ConfigResource,
    ConfigResourceType,
    GroupDescription,
    MemberDescription,
    ShareGroupDescription,
    ShareMemberDescription,
)
from kpax.cli import common
from kpax.cli.errors import CommandError
from kpax.cli.output import emit, note, table
from kpax.cli.settings import Settings
from kpax.errors import GroupIdNotFoundError

#: A group as described: a consumer or classic group, or a share group.
AnyGroup = GroupDescription | ShareGroupDescription


def run(args: argparse.Namespace, settings: Settings) -> int:
    with common.admin(settings) as adm:
        if args.action == "list":
            return _list(adm, args, settings)
        if args.action == "describe":
            return _describe(adm, args, settings)
        if args.action == "config":
            return _config(adm, args, settings)
        return _delete(adm, args, settings)


def _groups(adm: kpax.Admin, names: list[str], settings: Settings) -> dict[str, AnyGroup]:
    """Each of ``names`` described: as a consumer or classic group, else as a
    share group; CommandError naming the first that is neither."""
    desc = adm.describe_groups(names, timeout=settings.timeout)
    found: dict[str, AnyGroup] = {}
    for gid in names:
        err = desc.errors.get(gid)
        if err is None:
            found[gid] = desc[gid]
        elif not isinstance(err, GroupIdNotFoundError):
            raise err
    missing = [gid for gid in names if gid not in found]
    found.update(common.share_groups(adm, missing, settings.timeout))
    for gid in missing:
        if gid not in found:
            raise CommandError(
                f"group {gid!r} not found on {settings.bootstrap} "
                "(no consumer, classic or share group of that name)"
            )
    return found


def _delete(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    names = list(dict.fromkeys(args.groups))
    desc = _groups(adm, names, settings)
    rows: list[dict[str, Any]] = []
    for gid in names:
        g = desc[gid]
        kind = "share" if isinstance(g, ShareGroupDescription) else g.type
        if not g.is_empty:
            raise CommandError(
                f"{kind} group {gid!r} has {len(g.members)} active member(s) "
                f"(state {g.state}): stop its consumers before deleting it"
            )
        if isinstance(g, ShareGroupDescription):
            starts = adm.list_share_group_offsets(gid, timeout=settings.timeout)
            tps = [tp for tp, o in starts.items() if o is not None]
        else:
            tps = list(adm.list_group_offsets(gid, timeout=settings.timeout))
        rows.append(
            {
                "group": gid,
                "type": kind,
                "state": g.state,
                "offsets": len(tps),
                "topics": sorted({tp.topic for tp in tps}),
            }
        )
    if args.execute:
        share = [gid for gid in names if isinstance(desc[gid], ShareGroupDescription)]
        others = [gid for gid in names if gid not in share]
        if others:
            adm.delete_groups(others, timeout=settings.timeout).raise_for_errors()
        if share:
            adm.delete_share_groups(share, timeout=settings.timeout).raise_for_errors()
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
    desc = _groups(adm, list(dict.fromkeys(args.groups)), settings)
    docs: list[dict[str, Any]] = []
    out: list[str] = []
    for gid in args.groups:
        g = desc[gid]
        if isinstance(g, ShareGroupDescription):
            doc = _share_doc(adm, g, settings)
            docs.append(doc)
            out += _share_text(doc)
            continue
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


def _share_doc(adm: kpax.Admin, g: ShareGroupDescription, settings: Settings) -> dict[str, Any]:
    """A share group as ``groups describe`` shows it: its members and, per
    partition it has state on or assigned, the start offset, the latest offset
    and the lag."""
    starts = dict(adm.list_share_group_offsets(g.group_id, timeout=settings.timeout))
    owners: dict[kpax.TopicPartition, list[str]] = {}
    for m in g.members:
        for tp in m.assignment:
            owners.setdefault(tp, []).append(m.member_id)
            starts.setdefault(tp, None)  # assigned, no state yet
    tps = sorted(starts, key=lambda tp: (tp.topic, tp.partition))
    latest: dict[kpax.TopicPartition, int] = {}
    if tps:
        res = adm.list_offsets(dict.fromkeys(tps, "latest"), timeout=settings.timeout)
        latest = {tp: res[tp].offset for tp in tps if tp not in res.errors}
    offs: list[dict[str, Any]] = []
    for tp in tps:
        start = starts[tp]
        offs.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "start_offset": None if start is None else start.start_offset,
                "latest": latest.get(tp),
                "lag": common.share_lag(start, latest.get(tp)),
                "members": owners.get(tp, []),
            }
        )
    return {
        "group": g.group_id,
        "state": g.state,
        "type": "share",
        "assignor": g.assignor or None,
        "coordinator": g.coordinator,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "members": [_share_member_doc(m) for m in g.members],
        "offsets": offs,
    }


def _share_member_doc(m: ShareMemberDescription) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "client_id": m.client_id,
        "host": m.client_host,
        "rack": m.rack,
        "member_epoch": m.member_epoch,
        "subscribed_topics": list(m.subscribed_topics),
        "assignment": _tps(m.assignment),
    }


def _share_text(doc: dict[str, Any]) -> list[str]:
    """The lines of ``groups describe`` for a share group (from its JSON doc):
    a summary, MEMBER CLIENT HOST [RACK] EPOCH TOPICS PARTITIONS, and TOPIC
    PARTITION START_OFFSET LATEST LAG."""
    parts = ["share group (KIP-932)", f"state {doc['state']}"]
    if doc["assignor"]:
        parts.append(f"assignor {doc['assignor']}")
    parts += [
        f"epoch {doc['group_epoch']}",
        f"assignment epoch {doc['assignment_epoch']}",
        f"coordinator {doc['coordinator']}",
        f"{len(doc['members'])} member(s)",
    ]
    out = [f"group {doc['group']}: " + ", ".join(parts)]
    members = doc["members"]
    if members:
        cols: list[tuple[str, Any]] = [
            ("MEMBER", lambda m: m["member_id"]),
            ("CLIENT", lambda m: m["client_id"]),
            ("HOST", lambda m: m["host"]),
        ]
        if any(m["rack"] for m in members):
            cols.append(("RACK", lambda m: m["rack"]))
        cols += [
            ("EPOCH", lambda m: m["member_epoch"]),
            ("TOPICS", lambda m: " ".join(m["subscribed_topics"])),
            ("PARTITIONS", lambda m: " ".join(m["assignment"])),
        ]
        rows = [[f(m) for _, f in cols] for m in members]
        out += ["  " + ln for ln in table([c for c, _ in cols], rows).splitlines()]
    if doc["offsets"]:
        rows = [
            [o["topic"], o["partition"], o["start_offset"], o["latest"], o["lag"]]
            for o in doc["offsets"]
        ]
        heads = ["TOPIC", "PARTITION", "START_OFFSET", "LATEST", "LAG"]
        out += ["  " + ln for ln in table(heads, rows).splitlines()]
    return out


def _config(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    """Show the group's configs, or change them (``--set``/``--delete``). Group
    configs need no group: they may be set before its first member joins."""
    res = ConfigResource(ConfigResourceType.GROUP, args.group)
    ops = [kpax.AlterConfigOp(k, v) for k, v in common.kv_pairs(args.set, "--set")]
    ops += [kpax.AlterConfigOp(k, None, kpax.AlterConfigOpType.DELETE) for k in args.delete or ()]
    if ops:
        adm.incremental_alter_configs({res: ops}, timeout=settings.timeout).raise_for_errors()
        note(f"altered {len(ops)} config(s) of group {args.group!r}")
        return 0
    entries = adm.describe_configs([res], timeout=settings.timeout)[res]
    configs = {k: {"value": e.value, "source": e.source.name} for k, e in sorted(entries.items())}
    human = table(
        ["CONFIG", "VALUE", "SOURCE"], [[k, c["value"], c["source"]] for k, c in configs.items()]
    )
    emit({"group": args.group, "configs": configs}, human, args.output)
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
