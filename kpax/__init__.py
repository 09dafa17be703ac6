"""kpax — a fast, modular Kafka wire-protocol client for Python.

The sync face lives here (``kpax.Producer``, ``kpax.Consumer``, ``kpax.Admin``);
the asyncio face in :mod:`kpax.aio`. See docs/ and DESIGN.md for the layer map.
"""

from kpax import aio
from kpax._version import __version__
from kpax.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    PatternType,
    ResourceType,
)
from kpax.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
)
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
    ProducerFencedError,
    ProtocolError,
    SerializationError,
    TransactionAbortedError,
    UnsupportedApiError,
    UnsupportedCodecError,
)
from kpax.producer import BulkFuture, Producer, RecordFuture
from kpax.structs import (
    BatchResult,
    ConsumerGroupMetadata,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "ProducerFencedError",
    "TransactionAbortedError",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BatchResult",
    "BulkFuture",
    "ConsumerGroupMetadata",
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConfigResource",
    "ConfigResourceType",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PatternType",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "ResourceType",
    "TopicPartition",
    "aio",
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
