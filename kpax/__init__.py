"""kpax — a fast, modular Kafka wire-protocol client for Python.

The sync face lives here (``kpax.Producer``, ``kpax.Consumer``, ``kpax.Admin``);
the asyncio face in :mod:`kpax.aio`. See docs/ and DESIGN.md for the layer map.
"""

from kpax.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerResponseError,
    ClientClosedError,
    ConfigError,
    CorruptRecordError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ProtocolError,
    SerializationError,
    UnsupportedApiError,
    UnsupportedCodecError,
)

from kpax._version import __version__

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BrokerResponseError",
    "ClientClosedError",
    "ConfigError",
    "CorruptRecordError",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "ProtocolError",
    "SerializationError",
    "UnsupportedApiError",
    "UnsupportedCodecError",
    "__version__",
]
