"""What a span of :mod:`kpax.otel` says about the client it traces: the asyncio
core behind a face, the broker address, client and group ids, the cluster id.

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: kpax.producer, kpax.consumer, kpax.admin, kpax.parallel (the client types).
"""

from __future__ import annotations

from typing import Any

from kpax.admin.sync import Admin
from kpax.consumer.sync import Consumer
from kpax.parallel.sync import ParallelConsumer
from kpax.producer.sync import Producer

# ---------------------------------------------------------------- per-client facts


def _core(client: Any) -> Any:
    """The asyncio core of a client (the client itself for an asyncio one)."""
    sync = (Producer, Consumer, Admin, ParallelConsumer)
    return client.aio if isinstance(client, sync) else client


def _server(bootstrap: Any) -> tuple[str, int] | None:
    """The first bootstrap address as (host, port)."""
    servers = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap or [])
    if not servers:
        return None
    host, _, port = str(servers[0]).strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    return (host, int(port)) if host and port.isdigit() else None


class _ClientInfo:
    """What every span of one client carries, worked out once."""

    __slots__ = ("attrs", "cluster")

    def __init__(self, client: Any) -> None:
        core = _core(client)
        cfg = core.config
        attrs: dict[str, Any] = {"messaging.system": "kafka"}
        server = _server(cfg.get("bootstrap_servers"))
        if server is not None:
            attrs["server.address"], attrs["server.port"] = server
        if cfg.get("client_id"):
            attrs["messaging.client.id"] = cfg["client_id"]
        if cfg.get("group_id"):
            attrs["messaging.consumer.group.name"] = cfg["group_id"]
        self.attrs = attrs
        self.cluster = core.cluster

    def start_attrs(self) -> dict[str, Any]:
        attrs = dict(self.attrs)
        cluster_id = self.cluster.snapshot.cluster_id
        if cluster_id:
            attrs["messaging.kafka.cluster.id"] = cluster_id
        return attrs
