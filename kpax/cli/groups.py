"""`kpax groups list|describe|delete`.

Role: consumer group administration on kpax.Admin; describe shows state,
members with their partitions, and committed offsets with lag.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

import kpax
from kpax.cli import common
from kpax.cli.output import emit, note, table
from kpax.cli.settings import Settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    with common.admin(settings) as adm:
        if args.action == "list":
            return _list(adm, args, settings)
        if args.action == "describe":
            return _describe(adm, args, settings)
        adm.delete_groups(args.groups, timeout=settings.timeout).raise_for_errors()
        for g in args.groups:
            note(f"deleted group {g!r}")
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
        members: list[dict[str, Any]] = [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "instance_id": m.group_instance_id,
                "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.assignment],
            }
            for m in g.members
        ]
        docs.append(
            {
                "group": gid,
                "state": g.state,
                "type": g.type,
                "protocol": g.protocol,
                "coordinator": g.coordinator,
                "members": members,
                "offsets": offs,
            }
        )
        out.append(
            f"group {gid}: state {g.state}, type {g.type}, coordinator {g.coordinator}, "
            f"{len(members)} member(s)"
        )
        if members:
            rows = [
                [m["member_id"], m["client_id"], m["host"], " ".join(m["assignment"])]
                for m in members
            ]
            out += [
                "  " + ln
                for ln in table(["MEMBER", "CLIENT", "HOST", "PARTITIONS"], rows).splitlines()
            ]
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
