"""Admin operations on the cluster as a whole (``ClusterAdmin``): describe_cluster.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for cluster-wide
calls asked of any broker (cluster id, controller, brokers); cluster-level
features, log dirs or quotas belong here too.

Imports: kpax.admin.base, kpax.cluster.request_path, kpax.broker.broker, kpax.proto, kpax.structs.
"""

from __future__ import annotations

from kpax.admin.base import AdminBase, broker_error
from kpax.broker.broker import Broker
from kpax.cluster.request_path import ANY_BROKER
from kpax.proto.messages import DescribeClusterRequest
from kpax.structs import BrokerDescription, ClusterDescription


class ClusterAdmin(AdminBase):
    """Cluster-wide calls: describe_cluster."""

    async def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """Cluster id, controller, brokers."""

        async def call(broker: Broker) -> ClusterDescription:
            resp = await broker.request(DescribeClusterRequest())
            if resp.error_code:
                raise broker_error(
                    resp.error_code, f"DescribeCluster on {broker.describe()}", resp.error_message
                )
            return ClusterDescription(
                cluster_id=resp.cluster_id,
                controller_id=resp.controller_id,
                brokers=tuple(
                    BrokerDescription(b.broker_id, b.host, b.port, b.rack)
                    for b in sorted(resp.brokers, key=lambda b: b.broker_id)
                ),
            )

        return await self._on_route("describe_cluster", ANY_BROKER, call, timeout)
