"""kpax.cluster — who leads what: bootstrap, metadata cache, leaders, coordinators.

Imports: kpax.broker, kpax.proto.
"""

from kpax.cluster.cluster import GROUP, TRANSACTION, Cluster, split_address
from kpax.cluster.metadata import BrokerInfo, ClusterSnapshot, PartitionInfo, TopicInfo

__all__ = [
    "GROUP",
    "TRANSACTION",
    "BrokerInfo",
    "Cluster",
    "ClusterSnapshot",
    "PartitionInfo",
    "TopicInfo",
    "split_address",
]
