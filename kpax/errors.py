"""The public exception tree (re-exported from :mod:`kpax.proto.errors`).

Imports: kpax.proto.errors, kpax.proto.error_codes.
"""

from kpax.proto.error_codes import *  # noqa: F403
from kpax.proto.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerIdentityError,
    BrokerResponseError,
    ClientClosedError,
    ConfigError,
    CorruptRecordError,
    DecompressionLimitError,
    ForkedClientError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ProtocolError,
    SerializationError,
    TransactionAbortedError,
    UnsupportedApiError,
    UnsupportedCodecError,
    error_for_code,
)

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BrokerIdentityError",
    "BrokerResponseError",
    "ClientClosedError",
    "ConfigError",
    "CorruptRecordError",
    "DecompressionLimitError",
    "ForkedClientError",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "ProtocolError",
    "SerializationError",
    "TransactionAbortedError",
    "UnsupportedApiError",
    "UnsupportedCodecError",
    "error_for_code",
]
