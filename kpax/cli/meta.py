"""`kpax meta [TOPIC]` and `kpax coord --group G`: what the cluster looks like.

Role: brokers, controller, topics and partitions with leader, replicas and
ISR; a group's coordinator broker.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
from typing import Any

from kpax.cli import common
from kpax.cli.errors import CommandError
from kpax.cli.output import emit, table
from kpax.cli.settings import Settings


def meta(args: argparse.Namespace, settings: Settings) -> int:
    with common.admin(settings) as adm:
        cluster = adm.describe_cluster(timeout=settings.timeout)
        if args.topics:
            names = list(args.topics)
        else:
            names = sorted(adm.list_topics(internal=args.internal, timeout=settings.timeout))
        described = adm.describe_topics(names, timeout=settings.timeout) if names else None
    topics: list[dict[str, Any]] = []
    for name in names:
        assert described is not None
        if name in described.errors:
            if args.topics:
                raise CommandError(f"unknown topic {name!r} on {settings.bootstrap}")
            continue
        t = described[name]
        topics.append(
            {
                "name": name,
                "topic_id": str(t.topic_id) if t.topic_id else None,
                "internal": t.is_internal,
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                    }
                    for p in sorted(t.partitions, key=lambda p: p.partition)
                ],
            }
        )
    brokers = [
        {"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
        for b in sorted(cluster.brokers, key=lambda b: b.node_id)
    ]
    doc = {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller_id,
        "brokers": brokers,
        "topics": topics,
    }
    lines = [f"cluster {cluster.cluster_id}, controller {cluster.controller_id}", "brokers:"]
    brows = [
        [
            b["id"],
            f"{b['host']}:{b['port']}",
            b["rack"],
            "*" if b["id"] == cluster.controller_id else "",
        ]
        for b in brokers
    ]
    lines += [
        "  " + ln for ln in table(["ID", "ADDRESS", "RACK", "CONTROLLER"], brows).splitlines()
    ]
    lines.append(f"topics ({len(topics)}):")
    rows = []
    for td in topics:
        for p in td["partitions"]:
            rows.append(
                [
                    td["name"],
                    p["partition"],
                    p["leader"],
                    ",".join(map(str, p["replicas"])),
                    ",".join(map(str, p["isr"])),
                ]
            )
    if rows:
        lines += [
            "  " + ln
            for ln in table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"], rows).splitlines()
        ]
    emit(doc, "\n".join(lines), args.output)
    return 0


def coord(args: argparse.Namespace, settings: Settings) -> int:
    with common.admin(settings) as adm:
        desc = adm.describe_groups([args.group], timeout=settings.timeout)
        if args.group in desc.errors:
            raise desc.errors[args.group]
        node = desc[args.group].coordinator
        cluster = adm.describe_cluster(timeout=settings.timeout)
    addr = next((f"{b.host}:{b.port}" for b in cluster.brokers if b.node_id == node), None)
    doc = {"group": args.group, "coordinator": node, "address": addr}
    emit(
        doc,
        f"group {args.group!r}: coordinator broker {node} ({addr or 'unknown address'})",
        args.output,
    )
    return 0
