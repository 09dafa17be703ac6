"""Consumer configuration: the Java client's option names in snake_case, Java defaults.

The option table (:data:`CONSUMER_OPTIONS`) validates what the application
gives; :class:`ConsumerSettings` is the typed, frozen view of the validated
configuration, built once per consumer and passed to its components (fetcher,
group, the sync face) in place of string lookups.

Beside Java's options: confluent-kafka's offset store
(``enable_auto_offset_store``), partition-EOF notification
(``enable_partition_eof``, ``on_partition_eof``), statistics
(``statistics_interval_ms``, ``stats_callback``) and ``error_callback``.
kpax adds ``fetch_buffer_chunks`` and ``max_decompressed_batch_bytes`` (the most
one compressed batch may decompress to; None: :func:`max_decompressed_batch_bytes`
picks ``max(2 * fetch_max_bytes, 64 MiB)``, see docs/consumer.md for why).

Imports: kpax.broker.options, kpax.config, kpax.consumer.settings_fields, kpax.proto (compression,
errors), kpax.structs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, TypedDict

from kpax.broker.options import ConnectionConfig
from kpax.config import (
    CallbackConfig,
    Option,
    OptionTable,
    Timeouts,
    boolean,
    callback_or_none,
    non_negative_int,
    one_of,
    option_table,
    optional_str,
    positive_int,
)
from kpax.consumer.settings_fields import ConsumerSettingsFields
from kpax.proto.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from kpax.proto.errors import ConfigError
from kpax.structs import TopicPartition

__all__ = [
    "CONSUMER_OPTIONS",
    "ConsumerConfig",
    "ConsumerSettings",
    "FetchConfig",
    "max_decompressed_batch_bytes",
]


def _str_deserializer(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


def _json_deserializer(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


#: The deserializers named by a string, as the producer's serializers are
#: (``value_deserializer="json"``); "bytes" is none at all.
_BUILTIN_DESERIALIZERS: dict[str, Callable[[bytes | None], Any] | None] = {
    "bytes": None,
    "str": _str_deserializer,
    "json": _json_deserializer,
}


def deserializer_option(value: Any) -> Callable[[bytes], Any] | None:
    """The check of ``key_deserializer``/``value_deserializer`` (the share consumer's too)."""
    if isinstance(value, str):
        if value.lower() not in _BUILTIN_DESERIALIZERS:
            raise ValueError(
                f"must be a callable taking bytes (or None), or one of "
                f"{sorted(_BUILTIN_DESERIALIZERS)}"
            )
        return _BUILTIN_DESERIALIZERS[value.lower()]
    if value is not None and not callable(value):
        raise ValueError(
            f"must be a callable taking bytes (or None), or one of {sorted(_BUILTIN_DESERIALIZERS)}"
        )
    deserializer: Callable[[bytes], Any] | None = value
    return deserializer


def _assignors(value: Any) -> tuple[Any, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, (list, tuple)) and value:
        return tuple(value)
    raise ValueError("must be an assignor name, a comma-separated list, or a list of assignors")


class FetchConfig(TypedDict, total=False):
    """The options the consumer and the share consumer both take (fetching and
    decoding records), declared once for both."""

    client_rack: Annotated[str | None, Option(None, optional_str)]
    max_poll_records: Annotated[int, Option(500, positive_int)]
    fetch_min_bytes: Annotated[int, Option(1, positive_int)]
    fetch_max_wait_ms: Annotated[int, Option(500, non_negative_int)]
    fetch_max_bytes: Annotated[int, Option(52428800, positive_int)]
    check_crcs: Annotated[bool, Option(True, boolean)]
    default_api_timeout_ms: Annotated[int, Option(60000, positive_int)]
    key_deserializer: Annotated[
        Callable[[bytes], Any] | str | None,
        Option(None, deserializer_option),
    ]
    value_deserializer: Annotated[
        Callable[[bytes], Any] | str | None,
        Option(None, deserializer_option),
    ]
    max_decompressed_batch_bytes: Annotated[
        int | None,
        Option(
            None,
            positive_int,
            "most bytes one compressed batch may decompress to (None: max(2 * fetch_max_bytes, "
            "64 MiB))",
        ),
    ]


class ConsumerConfig(ConnectionConfig, CallbackConfig, FetchConfig, total=False):
    """The options of ``kpax.Consumer`` / ``kpax.aio.Consumer`` (their
    ``**config``), each declared once: its name, its type for users' type
    checkers, its default, check and doc (:func:`kpax.config.option_table`)."""

    group_id: Annotated[str | None, Option(None, optional_str)]
    group_instance_id: Annotated[str | None, Option(None, optional_str)]
    group_protocol: Annotated[str, Option("classic", one_of("classic", "consumer"))]
    group_remote_assignor: Annotated[str | None, Option(None, optional_str)]
    auto_offset_reset: Annotated[str, Option("latest", one_of("earliest", "latest", "none"))]
    enable_auto_commit: Annotated[bool, Option(True, boolean)]
    auto_commit_interval_ms: Annotated[int, Option(5000, positive_int)]
    isolation_level: Annotated[
        str,
        Option("read_uncommitted", one_of("read_uncommitted", "read_committed")),
    ]
    max_partition_fetch_bytes: Annotated[int, Option(1048576, positive_int)]
    max_poll_interval_ms: Annotated[int, Option(300000, positive_int)]
    session_timeout_ms: Annotated[int, Option(45000, positive_int)]
    heartbeat_interval_ms: Annotated[int, Option(3000, positive_int)]
    partition_assignment_strategy: Annotated[
        str | Sequence[Any],
        Option(["range", "cooperative-sticky"], _assignors),
    ]
    exclude_internal_topics: Annotated[bool, Option(True, boolean)]
    allow_auto_create_topics: Annotated[bool, Option(False, boolean)]
    enable_auto_offset_store: Annotated[
        bool,
        Option(
            True,
            boolean,
            "False: automatic commits (and commit() without offsets) send only what "
            "store_offsets() stored (confluent-kafka's offset store)",
        ),
    ]
    enable_partition_eof: Annotated[
        bool,
        Option(False, boolean, "call on_partition_eof when a partition's records are all read"),
    ]
    on_partition_eof: Annotated[
        Callable[[TopicPartition, int], Any] | None,
        Option(
            None,
            callback_or_none,
            "callable(topic_partition, offset): a partition's records are all read "
            "(its position reached its end); called on the polling thread",
        ),
    ]
    fetch_buffer_chunks: Annotated[
        int,
        Option(2, positive_int, "fetch responses buffered per partition"),
    ]


#: The consumer's option table (from :class:`ConsumerConfig`).
CONSUMER_OPTIONS: OptionTable = option_table(ConsumerConfig)


def max_decompressed_batch_bytes(config: Mapping[str, Any]) -> int:
    """The decompression cap of a resolved consumer config: the option, or by default
    twice ``fetch_max_bytes`` (100 MiB with Java's 50 MiB), at least 64 MiB."""
    value: int | None = config["max_decompressed_batch_bytes"]
    if value is not None:
        return value
    return max(2 * int(config["fetch_max_bytes"]), DEFAULT_MAX_DECOMPRESSED_SIZE)


@dataclass(frozen=True)
class ConsumerSettings(ConsumerSettingsFields, Timeouts):
    """What the consumer's components read from its validated configuration,
    typed and frozen (built once: :meth:`from_config`). Its fields are
    generated from :class:`ConsumerConfig` (:mod:`kpax.consumer.settings_fields`,
    ``tools/gen_settings.py``), named as the options;
    ``max_decompressed_batch_bytes`` is the cap in force (see
    :func:`max_decompressed_batch_bytes`)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ConsumerSettings:
        """The settings of a resolved (validated) consumer configuration."""
        if config["enable_partition_eof"] and config["on_partition_eof"] is None:
            raise ConfigError(
                "consumer option enable_partition_eof=True needs on_partition_eof="
                "callable(topic_partition, offset): kpax tells of a partition's end through it"
            )
        values = {f.name: config[f.name] for f in fields(cls)}
        values["max_decompressed_batch_bytes"] = max_decompressed_batch_bytes(config)
        return cls(**values)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @property
    def isolation(self) -> int:
        """The isolation level as Fetch and ListOffsets send it (1: read_committed)."""
        return 1 if self.read_committed else 0
