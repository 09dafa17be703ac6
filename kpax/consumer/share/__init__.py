"""kpax.consumer.share — share groups (KIP-932, "queues for Kafka").

Public: :class:`ShareConsumer` (sync face), :class:`AsyncShareConsumer`
(``kpax.aio.ShareConsumer``), :class:`AcknowledgeType`.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: the modules of this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kpax.consumer.share.acks import AcknowledgeType
    from kpax.consumer.share.client import AsyncShareConsumer
    from kpax.consumer.share.sync import ShareConsumer

__all__ = [
    "AcknowledgeType",
    "AsyncShareConsumer",
    "ShareConsumer",
]

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "AcknowledgeType": "kpax.consumer.share.acks",
    "AsyncShareConsumer": "kpax.consumer.share.client",
    "ShareConsumer": "kpax.consumer.share.sync",
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
