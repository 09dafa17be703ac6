"""kpax.cluster — who leads what: bootstrap, metadata cache, leaders, coordinators.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.broker, kpax.proto, kpax.lazy_names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

if TYPE_CHECKING:
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

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "GROUP": "kpax.cluster.cluster",
    "TRANSACTION": "kpax.cluster.cluster",
    "Cluster": "kpax.cluster.cluster",
    "split_address": "kpax.cluster.cluster",
    "BrokerInfo": "kpax.cluster.metadata",
    "ClusterSnapshot": "kpax.cluster.metadata",
    "PartitionInfo": "kpax.cluster.metadata",
    "TopicInfo": "kpax.cluster.metadata",
}


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
