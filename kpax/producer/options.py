"""The producer's configuration: Java option names in snake_case, Java 4.x defaults.

Role: the option table of ``kpax.Producer`` / ``kpax.aio.Producer`` and
:func:`resolve_producer_config`, which checks a user's keyword options and
applies the Java client's rules that tie options together:

* ``enable_idempotence`` defaults to on (Java 3.0+). Left unset, it is quietly
  turned off when ``acks`` is not ``"all"``, ``retries`` is 0 or
  ``max_in_flight_requests_per_connection`` > 5 (as Java does); set to True
  with such options it is a :class:`ConfigError`.
* ``delivery_timeout_ms`` must be >= ``linger_ms + request_timeout_ms``.
* ``acks`` accepts 0, 1, -1, "0", "1", "-1" and "all" (normalised to 0, 1, -1).
* ``transactional_id`` makes the producer transactional: idempotence must be on
  (setting ``enable_idempotence=False`` with it is a :class:`ConfigError`);
  ``transaction_timeout_ms`` (Java default 60000) is how long the coordinator
  lets a transaction stay open before aborting it.
* ``metadata_max_idle_ms`` (Java's default, 5 minutes): a topic not sent to for
  that long leaves the producer's metadata requests (Java requires at least
  5000; kpax takes any positive value).
* ``batch_size`` is librdkafka's and franz-go's 1,000,000 bytes, not Java's
  16384: a batch's cost (sealing, a request's share, completing) is paid per
  batch, and a new batch reserves only 16 KiB of ``buffer_memory``, growing as
  it fills (kpax.producer.accumulator), so keyed records spread over many
  partitions, whose batches hold a few records each, do not pay for it.

Imports: kpax.config, kpax.broker.options, kpax.producer.settings_fields, kpax.proto.errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Annotated, Any

from kpax.broker.options import ConnectionConfig
from kpax.config import (
    CallbackConfig,
    Option,
    OptionTable,
    boolean,
    non_negative_int,
    one_of,
    option_table,
    optional_str,
    positive_int,
    resolve,
)
from kpax.producer.settings_fields import ProducerSettingsFields
from kpax.proto.errors import ConfigError

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


def _acks(value: Any) -> int:
    if isinstance(value, str):
        value = value.strip().lower()
        if value == "all":
            return -1
        try:
            value = int(value)
        except ValueError:
            raise ValueError("must be 0, 1, -1 or 'all'") from None
    if isinstance(value, bool) or value not in (0, 1, -1):
        raise ValueError("must be 0, 1, -1 or 'all'")
    return int(value)


def _optional_bool(value: Any) -> bool | None:
    return None if value is None else boolean(value)


class ProducerConfig(ConnectionConfig, CallbackConfig, total=False):
    """The options of ``kpax.Producer`` / ``kpax.aio.Producer`` (their
    ``**config``), each declared once: its name, its type for users' type
    checkers, its default, check and doc (:func:`kpax.config.option_table`).
    ``partitioner``: a :class:`~kpax.producer.partitioner.Partitioner` or
    ``f(topic, key, value, num_partitions) -> int``."""

    acks: Annotated[int | str, Option(-1, _acks)]
    linger_ms: Annotated[int, Option(5, non_negative_int)]
    batch_size: Annotated[int, Option(1_000_000, positive_int)]
    buffer_memory: Annotated[int, Option(32 * 1024 * 1024, positive_int)]
    max_block_ms: Annotated[int, Option(60000, non_negative_int)]
    max_request_size: Annotated[int, Option(1024 * 1024, positive_int)]
    compression_type: Annotated[
        str | None, Option("none", one_of(*COMPRESSION_TYPES), resolved=str)
    ]
    retries: Annotated[int, Option(2147483647, non_negative_int)]
    delivery_timeout_ms: Annotated[int, Option(120000, positive_int)]
    max_in_flight_requests_per_connection: Annotated[int, Option(5, positive_int)]
    enable_idempotence: Annotated[bool | None, Option(None, _optional_bool, resolved=bool)]
    transactional_id: Annotated[str | None, Option(None, optional_str)]
    transaction_timeout_ms: Annotated[int, Option(60000, positive_int)]
    allow_auto_create_topics: Annotated[bool, Option(True, boolean)]
    metadata_max_idle_ms: Annotated[int, Option(300000, positive_int)]
    partitioner: Annotated[Any, Option(None)]
    key_serializer: Annotated[Callable[..., Any] | str | None, Option(None)]
    value_serializer: Annotated[Callable[..., Any] | str | None, Option(None)]


#: The producer's option table (from :class:`ProducerConfig`).
PRODUCER_OPTIONS: OptionTable = option_table(ProducerConfig)


def resolve_producer_config(given: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``given`` against :data:`PRODUCER_OPTIONS`; apply the Java rules above."""
    cfg = resolve("producer", PRODUCER_OPTIONS, given)
    if cfg["compression_type"] is None:
        cfg["compression_type"] = "none"
    conflicts = []
    if cfg["acks"] != -1:
        conflicts.append(f"acks={cfg['acks']} (needs 'all')")
    if cfg["retries"] == 0:
        conflicts.append("retries=0 (needs > 0)")
    if cfg["max_in_flight_requests_per_connection"] > 5:
        conflicts.append(
            f"max_in_flight_requests_per_connection={cfg['max_in_flight_requests_per_connection']}"
            " (needs <= 5)"
        )
    if cfg["transactional_id"] is not None:
        if cfg["enable_idempotence"] is False:
            raise ConfigError(
                "producer option transactional_id needs enable_idempotence (it is False)"
            )
        cfg["enable_idempotence"] = True
    if cfg["enable_idempotence"] is None:
        cfg["enable_idempotence"] = not conflicts
    elif cfg["enable_idempotence"] and conflicts:
        raise ConfigError(
            "producer option enable_idempotence=True conflicts with " + ", ".join(conflicts)
        )
    if cfg["delivery_timeout_ms"] < cfg["linger_ms"] + cfg["request_timeout_ms"]:
        raise ConfigError(
            f"producer option delivery_timeout_ms={cfg['delivery_timeout_ms']} must be >= "
            f"linger_ms + request_timeout_ms ({cfg['linger_ms'] + cfg['request_timeout_ms']})"
        )
    return cfg


@dataclass(frozen=True)
class ProducerSettings(ProducerSettingsFields):
    """The producer's options, typed and frozen: built once from the validated
    config (:func:`resolve_producer_config`) and read by the client, the
    sender and the transaction manager instead of ``config["..."]`` lookups.
    Its fields are generated from :class:`ProducerConfig`
    (:mod:`kpax.producer.settings_fields`, ``tools/gen_settings.py``)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ProducerSettings:
        """The settings of a resolved (validated) producer configuration
        (:func:`resolve_producer_config`): each field is the option of its name."""
        return cls(**{f.name: config[f.name] for f in fields(cls)})
