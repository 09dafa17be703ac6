"""kpax.broker — one pipelined asyncio connection to one broker.

ApiVersions negotiation, correlation-id matching, many requests in flight,
TLS, SASL, per-request timeouts, reconnect with backoff.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.proto, kpax.lazy_names and the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

if TYPE_CHECKING:
    from kpax.broker.broker import Broker
    from kpax.broker.connection import BrokerConnection
    from kpax.broker.options import COMMON_OPTIONS, ConnectionOptions, connection_options

__all__ = [
    "COMMON_OPTIONS",
    "Broker",
    "BrokerConnection",
    "ConnectionOptions",
    "connection_options",
]

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "Broker": "kpax.broker.broker",
    "BrokerConnection": "kpax.broker.connection",
    "COMMON_OPTIONS": "kpax.broker.options",
    "ConnectionOptions": "kpax.broker.options",
    "connection_options": "kpax.broker.options",
}


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
