"""Share consumer configuration: the Java share consumer's option names in snake_case.

The option table (:data:`SHARE_CONSUMER_OPTIONS`) validates what the
application gives; :class:`ShareSettings` is its typed, frozen view, built
once per share consumer. Options of the ordinary consumer that mean nothing
to a share group (offsets, auto commit, assignors, isolation level: the
group's ``share.isolation.level`` config decides) are refused by name.

Imports: kpax.broker.options, kpax.config, kpax.consumer.options,
kpax.consumer.share.settings_fields, kpax.proto.errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Annotated, Any

from kpax.broker.options import ConnectionConfig
from kpax.config import (
    Option,
    OptionTable,
    Timeouts,
    one_of,
    option_table,
)
from kpax.consumer.options import FetchConfig, max_decompressed_batch_bytes
from kpax.consumer.share.settings_fields import ShareSettingsFields
from kpax.proto.errors import ConfigError

__all__ = ["ACQUIRE_MODES", "SHARE_CONSUMER_OPTIONS", "ShareConsumerConfig", "ShareSettings"]

#: ``share_acquire_mode`` names and their ShareFetch ids.
ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}


def _required_str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string (the share group's id)")
    return value


class ShareConsumerConfig(ConnectionConfig, FetchConfig, total=False):
    """The options of ``kpax.ShareConsumer`` / ``kpax.aio.ShareConsumer`` (their
    ``**config``), each declared once (:func:`kpax.config.option_table`)."""

    group_id: Annotated[str, Option(None, _required_str, "the share group to join (required)")]
    share_acknowledgement_mode: Annotated[
        str,
        Option(
            "implicit",
            one_of("implicit", "explicit"),
            '`"implicit"`: the next poll or commit accepts what a poll returned (close '
            "accepts only what a `for` loop moved past and releases the rest); "
            '`"explicit"`: `acknowledge` every record before the next poll',
        ),
    ]
    share_acquire_mode: Annotated[
        str,
        Option(
            "batch_optimized",
            one_of(*ACQUIRE_MODES),
            '`"batch_optimized"`: a fetch acquires as many records as the broker allows, '
            "whole batches (each poll returns at most `max_poll_records` of them); "
            '`"record_limit"`: a fetch acquires at most `max_poll_records` (Kafka 4.2+)',
        ),
    ]


#: The share consumer's option table (from :class:`ShareConsumerConfig`).
SHARE_CONSUMER_OPTIONS: OptionTable = option_table(ShareConsumerConfig)


@dataclass(frozen=True)
class ShareSettings(ShareSettingsFields, Timeouts):
    """What the share consumer's parts read from its validated configuration.
    Its fields are generated from :class:`ShareConsumerConfig`
    (:mod:`kpax.consumer.share.settings_fields`, ``tools/gen_settings.py``);
    ``max_decompressed_batch_bytes`` is the cap in force."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ShareSettings:
        """The settings of a resolved (validated) share consumer configuration."""
        if config["group_id"] is None:
            raise ConfigError("a share consumer needs group_id (the share group to join)")
        values = {f.name: config[f.name] for f in fields(cls)}
        values["max_decompressed_batch_bytes"] = max_decompressed_batch_bytes(config)
        return cls(**values)

    @property
    def explicit(self) -> bool:
        """Every record must be acknowledged before the next poll."""
        return self.share_acknowledgement_mode == "explicit"

    @property
    def acquire_mode(self) -> int:
        return ACQUIRE_MODES[self.share_acquire_mode]
