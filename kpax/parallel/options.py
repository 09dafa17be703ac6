"""Parallel consumer configuration: its own options, checked; the rest go to its consumer.

Role: :class:`ParallelOptions` declares what ``kpax.ParallelConsumer`` adds to
the consumer's options (ordering, concurrency, the window, retries, dead
letters, commits; :data:`PARALLEL_OPTIONS` is its table, and
:class:`ParallelConsumerConfig` every option, for ``**config``);
:func:`split_config` separates them from the options of the consumer it runs
on (checked by the consumer itself), and
:class:`ParallelSettings` is their typed, frozen view.

Imports: kpax.config, kpax.consumer.options, kpax.parallel.engine, kpax.proto.errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from kpax.config import (
    Option,
    OptionTable,
    non_negative_int,
    one_of,
    option_table,
    positive_int,
    resolve,
)
from kpax.consumer.options import ConsumerConfig
from kpax.parallel.engine import EngineSettings
from kpax.proto.errors import ConfigError

__all__ = [
    "PARALLEL_OPTIONS",
    "ParallelConsumerConfig",
    "ParallelOptions",
    "ParallelSettings",
    "split_config",
]


def _optional_positive(value: Any) -> int | None:
    return None if value is None else positive_int(value)


def _topic_template(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a topic name (may contain '{topic}')")
    try:
        value.format(topic="t")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"bad template ({exc}): only '{{topic}}' may be named") from None
    return value


def _callable(value: Any) -> Any:
    if not callable(value):
        raise ValueError("must be a callable")
    return value


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError("must be a dict of producer options")
    return dict(value)


class ParallelOptions(TypedDict, total=False):
    """What ``kpax.ParallelConsumer`` adds to the consumer's options, each declared
    once: its name, its type for users' type checkers, its default, check and doc
    (:func:`kpax.config.option_table`)."""

    ordering: Annotated[
        str,
        Option(
            "key",
            one_of("key", "partition", "unordered"),
            '`"key"`: records of one key (in one partition) one at a time, in offset '
            'order; `"partition"`: one record per partition at a time; `"unordered"`: '
            "any record",
        ),
    ]
    max_concurrency: Annotated[
        int,
        Option(
            16,
            positive_int,
            "most handlers running at once (threads on the sync face, tasks on asyncio)",
        ),
    ]
    max_records_in_flight: Annotated[
        int | None,
        Option(
            None,
            _optional_positive,
            "most records taken from the consumer and not yet committed as done: fetching "
            "pauses there; bounds the records a crash makes processed again. None: "
            "`max(1000, 10 * max_concurrency)`",
        ),
    ]
    max_bytes_in_flight: Annotated[
        int,
        Option(
            64 * 1024 * 1024,
            positive_int,
            "the same bound in key and value bytes (of records whose key and value are bytes)",
        ),
    ]
    max_attempts: Annotated[
        int | None,
        Option(
            3,
            _optional_positive,
            "handler calls per record before it is given up (dead-letter topic, `on_error`, "
            "or `run()` raises); None: retry forever",
        ),
    ]
    retry_delay_ms: Annotated[
        int,
        Option(100, non_negative_int, "wait before the first retry; doubles at each retry"),
    ]
    retry_delay_max_ms: Annotated[int, Option(10_000, non_negative_int, "... up to this")]
    dead_letter_topic: Annotated[
        str | None,
        Option(
            None,
            _topic_template,
            "where a given-up record goes (with `kpax.dlt.*` headers naming its source and "
            'the error); `"{topic}.DLT"` names one per source topic',
        ),
    ]
    dead_letter_producer_config: Annotated[
        Mapping[str, Any] | None,
        Option(
            None,
            _mapping,
            "options of the dead-letter producer, over the consumer's connection options "
            "(e.g. serializers when the consumer has deserializers)",
        ),
    ]
    on_error: Annotated[
        Callable[[Any, BaseException], Any] | None,
        Option(
            None,
            _callable,
            "`on_error(record, exception)` for a given-up record when there is no "
            "dead-letter topic; it counts as done once this returns",
        ),
    ]
    commit_interval_ms: Annotated[
        int,
        Option(
            1000,
            positive_int,
            "commit period (a commit also goes as soon as a quarter of the window is done)",
        ),
    ]
    drain_timeout_ms: Annotated[
        int,
        Option(
            10_000,
            non_negative_int,
            "how long a revocation or a stop waits for running handlers before committing",
        ),
    ]
    offset_metadata_max_bytes: Annotated[
        int,
        Option(
            4096,
            non_negative_int,
            "the broker's `offset.metadata.max.bytes`: the most the completed-offsets map "
            "may take in a commit (0: no map, commit the points only)",
        ),
    ]


#: The parallel consumer's own option table (from :class:`ParallelOptions`).
PARALLEL_OPTIONS: OptionTable = option_table(ParallelOptions)


class ParallelConsumerConfig(ConsumerConfig, ParallelOptions, total=False):
    """Every option of ``kpax.ParallelConsumer`` / ``kpax.aio.ParallelConsumer``
    (their ``**config``): the consumer's and :class:`ParallelOptions`."""


def split_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the parallel consumer's options, checked; the consumer's, unchecked).
    ``enable_auto_commit`` may only be False: this consumer commits itself."""
    own: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for name, value in config.items():
        key = name.replace(".", "_").replace("-", "_")
        (own if key in PARALLEL_OPTIONS else rest)[name] = value
    auto = rest.pop("enable_auto_commit", rest.pop("enable.auto.commit", False))
    if auto and str(auto).strip().lower() != "false":
        raise ConfigError(
            "parallel consumer option enable_auto_commit=True: the parallel consumer "
            "commits what its handlers finished itself; leave enable_auto_commit out"
        )
    rest["enable_auto_commit"] = False
    return resolve("parallel consumer", PARALLEL_OPTIONS, own), rest


@dataclass(frozen=True)
class ParallelSettings:
    """The typed view of the parallel consumer's options."""

    engine: EngineSettings
    commit_interval: float
    drain_timeout: float
    dead_letter_topic: str | None
    dead_letter_producer_config: dict[str, Any]
    on_error: Callable[..., Any] | None

    @property
    def max_concurrency(self) -> int:
        return self.engine.max_concurrency

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ParallelSettings:
        concurrency = config["max_concurrency"]
        window = config["max_records_in_flight"] or max(1000, 10 * concurrency)
        delay = config["retry_delay_ms"] / 1000
        engine = EngineSettings(
            ordering=config["ordering"],
            max_concurrency=concurrency,
            max_records=window,
            max_bytes=config["max_bytes_in_flight"],
            max_attempts=config["max_attempts"],
            retry_delay=delay,
            retry_delay_max=max(delay, config["retry_delay_max_ms"] / 1000),
            max_metadata_bytes=config["offset_metadata_max_bytes"],
        )
        return cls(
            engine=engine,
            commit_interval=config["commit_interval_ms"] / 1000,
            drain_timeout=config["drain_timeout_ms"] / 1000,
            dead_letter_topic=config["dead_letter_topic"],
            dead_letter_producer_config=dict(config["dead_letter_producer_config"] or {}),
            on_error=config["on_error"],
        )
