"""One connection per broker, even after a refresh falls back to the bootstrap
addresses (a fenced KRaft broker is missing from Metadata responses for a moment:
the next refresh then starts again from the bootstrap list)."""

from __future__ import annotations

import asyncio

from kpax.broker import ConnectionOptions
from kpax.cluster.cluster import Cluster
from kpax.cluster.metadata import ClusterSnapshot
from kpax.testing.base import KafkaCluster
from tests.sockets import tcp_connections


async def test_a_bootstrap_connection_duplicating_a_node_is_closed(kafka: KafkaCluster) -> None:
    port = int(kafka.bootstrap.split(",")[0].rsplit(":", 1)[1])
    cluster = Cluster([kafka.bootstrap], ConnectionOptions())
    before = tcp_connections(port)
    try:
        await cluster.start()
        assert tcp_connections(port) == before + 1
        # as after a Metadata response that listed no broker
        cluster.snapshot = ClusterSnapshot()
        await cluster.refresh()
        assert cluster.snapshot.brokers, "the bootstrap address answered"
        assert cluster._bootstrap_brokers == []
        for _ in range(50):
            if tcp_connections(port) == before + 1:
                break
            await asyncio.sleep(0.1)
        assert tcp_connections(port) == before + 1, "a second connection to the broker stayed"
    finally:
        await cluster.close()
