"""kpax — a fast, modular Kafka wire-protocol client for Python.

The sync face lives here (``kpax.Producer``, ``kpax.Consumer``, ``kpax.Admin``);
the asyncio face in :mod:`kpax.aio`. See docs/ and docs/architecture.md for the layer map.

``import kpax`` is cheap: the names below are imported on first use (PEP 562
``__getattr__``), so that importing a light submodule (``kpax.testing.pytest_plugin``,
loaded by every pytest run where kpax is installed; ``kpax --version``) does not load
the client, asyncio and the generated protocol code. ``from kpax import Producer``
and ``kpax.Producer`` work as before; a name is looked up once, then cached here.

Imports: kpax._version; the rest on first use (kpax.producer, kpax.consumer,
kpax.parallel, kpax.admin, kpax.structs, kpax.errors, ...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kpax._version import __version__

if TYPE_CHECKING:
    from kpax import aio
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
    from kpax.admin.base import AdminConfig
    from kpax.consumer import (
        CommitFailedError,
        Consumer,
        ConsumerRebalanceListener,
        ConsumerRecord,
        RebalanceInProgressCommitError,
        ShareConsumerRecord,
    )
    from kpax.consumer.options import ConsumerConfig
    from kpax.consumer.share import AcknowledgeType, ShareConsumer
    from kpax.consumer.share.options import ShareConsumerConfig
    from kpax.errors import (
        AuthenticationError,
        AuthorizationError,
        BrokerResponseError,
        ClientClosedError,
        ConfigError,
        CorruptRecordError,
        DecompressionLimitError,
        ForkedClientError,
        IllegalStateError,
        InvalidTopicError,
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
    from kpax.parallel import ParallelConsumer
    from kpax.parallel.options import ParallelConsumerConfig
    from kpax.producer import BulkFuture, Producer, RecordFuture
    from kpax.producer.options import ProducerConfig
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
    "RebalanceInProgressCommitError",
    "ShareConsumer",
    "ShareConsumerRecord",
    "AcknowledgeType",
    "ConfigResource",
    "ConfigResourceType",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "ParallelConsumer",
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
    "DecompressionLimitError",
    "ForkedClientError",
    "IllegalStateError",
    "InvalidTopicError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "ProtocolError",
    "SerializationError",
    "UnsupportedApiError",
    "UnsupportedCodecError",
    "ProducerConfig",
    "ConsumerConfig",
    "ShareConsumerConfig",
    "ParallelConsumerConfig",
    "AdminConfig",
    "__version__",
]

# name -> module it is imported from on first use ("kpax.aio" is the subpackage itself)
_LAZY: dict[str, str] = {
    "aio": "kpax.aio",
    **dict.fromkeys(
        (
            "AclBinding",
            "AclBindingFilter",
            "AclOperation",
            "AclPermissionType",
            "Admin",
            "AlterConfigOp",
            "AlterConfigOpType",
            "ConfigResource",
            "ConfigResourceType",
            "PatternType",
            "ResourceType",
        ),
        "kpax.admin",
    ),
    **dict.fromkeys(
        (
            "CommitFailedError",
            "Consumer",
            "ConsumerRebalanceListener",
            "ConsumerRecord",
            "RebalanceInProgressCommitError",
            "ShareConsumerRecord",
        ),
        "kpax.consumer",
    ),
    **dict.fromkeys(("AcknowledgeType", "ShareConsumer"), "kpax.consumer.share"),
    **dict.fromkeys(
        (
            "AuthenticationError",
            "AuthorizationError",
            "BrokerResponseError",
            "ClientClosedError",
            "ConfigError",
            "CorruptRecordError",
            "DecompressionLimitError",
            "ForkedClientError",
            "IllegalStateError",
            "InvalidTopicError",
            "KafkaConnectionError",
            "KafkaError",
            "KafkaTimeoutError",
            "NoBrokersAvailableError",
            "ProducerFencedError",
            "ProtocolError",
            "SerializationError",
            "TransactionAbortedError",
            "UnsupportedApiError",
            "UnsupportedCodecError",
        ),
        "kpax.errors",
    ),
    **dict.fromkeys(("BulkFuture", "Producer", "RecordFuture"), "kpax.producer"),
    "ParallelConsumer": "kpax.parallel",
    # the options' TypedDicts (``**config: Unpack[ProducerConfig]``), for annotating
    # a configuration built apart from the call
    "ProducerConfig": "kpax.producer.options",
    "ConsumerConfig": "kpax.consumer.options",
    "ShareConsumerConfig": "kpax.consumer.share.options",
    "ParallelConsumerConfig": "kpax.parallel.options",
    "AdminConfig": "kpax.admin.base",
    **dict.fromkeys(
        (
            "BatchResult",
            "ConsumerGroupMetadata",
            "NewTopic",
            "OffsetAndMetadata",
            "OffsetAndTimestamp",
            "RecordMetadata",
            "TopicPartition",
        ),
        "kpax.structs",
    ),
}


# Subpackages reachable as attributes (``kpax.errors.OffsetOutOfRangeError``), as
# they were when this module imported them eagerly.
_SUBMODULES = frozenset(
    {
        "admin",
        "broker",
        "cli",
        "cluster",
        "config",
        "consumer",
        "errors",
        "metrics",
        "otel",
        "parallel",
        "producer",
        "proto",
        "spark",
        "structs",
        "testing",
    }
)


if not TYPE_CHECKING:  # (a type checker sees the imports above: a misspelt name is an error)

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            if name in _SUBMODULES:
                sub = importlib.import_module(f"kpax.{name}")
                globals()[name] = sub
                return sub
            raise AttributeError(f"module 'kpax' has no attribute {name!r}")
        imported = importlib.import_module(module)
        value = imported if module == f"kpax.{name}" else getattr(imported, name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
