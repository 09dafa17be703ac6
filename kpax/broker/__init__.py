"""kpax.broker — one pipelined asyncio connection to one broker.

ApiVersions negotiation, correlation-id matching, many requests in flight,
TLS, SASL, per-request timeouts, reconnect with backoff.
Imports: kpax.proto and the standard library.
"""

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
