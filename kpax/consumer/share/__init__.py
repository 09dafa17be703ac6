"""kpax.consumer.share — share groups (KIP-932, "queues for Kafka").

Public: :class:`ShareConsumer` (sync face), :class:`AsyncShareConsumer`
(``kpax.aio.ShareConsumer``), :class:`AcknowledgeType`.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: the modules of this package, kpax.lazy_names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

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


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
