"""The public exception tree (re-exported from :mod:`kpax.proto.errors`): every
error class kpax raises, the generated per-code classes included.

Imports: kpax.proto.errors, kpax.proto.error_codes.
"""

from kpax.proto.error_codes import *  # noqa: F403
from kpax.proto.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerIdentityError,
    BrokerResponseError,
    ClientClosedError,
    CommitFailedError,
    ConfigError,
    CorruptRecordError,
    DecompressionLimitError,
    ForkedClientError,
    IllegalStateError,
    InvalidMessageError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LogTruncationError,
    NoBrokersAvailableError,
    NoOffsetForPartitionError,
    ProtocolError,
    RebalanceInProgressCommitError,
    RecordPosition,
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
    "CommitFailedError",
    "ConfigError",
    "CorruptRecordError",
    "DecompressionLimitError",
    "ForkedClientError",
    "IllegalStateError",
    "InvalidMessageError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LogTruncationError",
    "NoBrokersAvailableError",
    "NoOffsetForPartitionError",
    "ProtocolError",
    "RebalanceInProgressCommitError",
    "RecordPosition",
    "SerializationError",
    "TransactionAbortedError",
    "UnsupportedApiError",
    "UnsupportedCodecError",
    "error_for_code",
]
