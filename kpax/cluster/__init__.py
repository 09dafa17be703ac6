"""kpax.cluster — who leads what: bootstrap, metadata cache, leaders, coordinators.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.broker, kpax.proto.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def _load(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
