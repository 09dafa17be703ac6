"""`kpax topics list|describe|create|delete|alter-config`.

Role: topic administration on kpax.Admin, each action one function.
``delete`` is a dry run unless ``--execute``: it prints the plan (each
topic's partitions and records, which would be lost) and changes nothing.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

import kpax
from kpax.cli import common
from kpax.cli.errors import UsageError
from kpax.cli.output import emit, note, table
from kpax.cli.settings import Settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    with common.admin(settings) as adm:
        action = {
            "list": _list,
            "describe": _describe,
            "create": _create,
            "delete": _delete,
            "alter-config": _alter,
        }[args.action]
        return action(adm, args, settings)


def _list(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    names = sorted(adm.list_topics(internal=args.internal, timeout=settings.timeout))
    emit(names, "\n".join(names), args.output)
    return 0


def _describe(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    for name in args.topics:
        common.topic_partitions(adm, name, settings)  # unknown topic -> clear error
    described = adm.describe_topics(args.topics, timeout=settings.timeout)
    res = [kpax.ConfigResource.topic(n) for n in args.topics]
    configs = adm.describe_configs(res, timeout=settings.timeout)
    docs: list[dict[str, Any]] = []
    out: list[str] = []
    for name, r in zip(args.topics, res, strict=True):
        t = described[name]
        entries = configs[r] if r not in configs.errors else {}
        changed = {
            k: e.value
            for k, e in sorted(entries.items())
            if e.source.name not in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG", "UNKNOWN")
            or args.all_configs
        }
        parts = sorted(t.partitions, key=lambda p: p.partition)
        docs.append(
            {
                "name": name,
                "topic_id": str(t.topic_id) if t.topic_id else None,
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                    }
                    for p in parts
                ],
                "configs": changed,
            }
        )
        out.append(f"topic {name} (id {t.topic_id}): {len(parts)} partition(s)")
        rows = [
            [p.partition, p.leader, ",".join(map(str, p.replicas)), ",".join(map(str, p.isr))]
            for p in parts
        ]
        out += [
            "  " + ln for ln in table(["PARTITION", "LEADER", "REPLICAS", "ISR"], rows).splitlines()
        ]
        if changed:
            out.append("  configs:")
            out += [f"    {k}={v}" for k, v in changed.items()]
    emit(docs, "\n".join(out), args.output)
    return 0


def _create(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    if args.partitions < 1 or args.replication_factor < 1:
        raise UsageError("--partitions and --replication-factor must be >= 1")
    configs = dict(common.kv_pairs(args.set, "--set"))
    new = [
        kpax.NewTopic(n, args.partitions, args.replication_factor, configs=configs)
        for n in args.topics
    ]
    adm.create_topics(new, timeout=settings.timeout).raise_for_errors()
    for n in args.topics:
        note(
            f"created topic {n!r} ({args.partitions} partitions, "
            f"replication {args.replication_factor})"
        )
    return 0


def _delete(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    names = list(dict.fromkeys(args.topics))
    rows: list[dict[str, Any]] = []
    for name in names:
        tps = [kpax.TopicPartition(name, p) for p in common.topic_partitions(adm, name, settings)]
        earliest, latest = common.earliest_latest(adm, tps, settings.timeout)
        records = sum(latest[tp] - earliest[tp] for tp in tps)
        rows.append({"topic": name, "partitions": len(tps), "records": records})
    if args.execute:
        adm.delete_topics(names, timeout=settings.timeout).raise_for_errors()
    head = "deleted" if args.execute else "plan (dry run, nothing deleted)"
    human = f"{head}: {len(rows)} topic(s)\n" + table(
        ["TOPIC", "PARTITIONS", "RECORDS"],
        [[r["topic"], r["partitions"], r["records"]] for r in rows],
    )
    doc = {"executed": args.execute, "dry_run": not args.execute, "topics": rows}
    emit(doc, human, args.output)
    if not args.execute:
        note("dry run: no topic deleted; add --execute to delete them")
    return 0


def _alter(adm: kpax.Admin, args: argparse.Namespace, settings: Settings) -> int:
    ops = [kpax.AlterConfigOp(k, v) for k, v in common.kv_pairs(args.set, "--set")]
    ops += [kpax.AlterConfigOp(k, None, kpax.AlterConfigOpType.DELETE) for k in args.delete or ()]
    if not ops:
        raise UsageError("alter-config needs --set key=value and/or --delete key")
    common.topic_partitions(adm, args.topic, settings)
    res = kpax.ConfigResource.topic(args.topic)
    adm.incremental_alter_configs({res: ops}, timeout=settings.timeout).raise_for_errors()
    note(f"altered {len(ops)} config(s) of topic {args.topic!r}")
    return 0
