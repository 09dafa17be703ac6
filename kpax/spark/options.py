"""Option parsing for the "kpax" Spark data source (driver side, no I/O).

Role: turn Spark's string options (the built-in Kafka source's names) into
checked Python values: which topics (``subscribe`` / ``subscribePattern`` /
``assign``), offset specs, limits, and the ``kafka.*`` pass-through mapped to
kpax client option names (``kafka.security.protocol`` -> ``security_protocol``),
with values converted to the option's type. Every error is a
:class:`kpax.errors.ConfigError` naming the option.

Imports: the standard library, kpax.errors and the kpax client option tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kpax.admin.client import ADMIN_OPTIONS
from kpax.config import Option, dataclass_repr
from kpax.consumer.options import CONSUMER_OPTIONS
from kpax.errors import ConfigError
from kpax.producer.options import PRODUCER_OPTIONS

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
    "client_options",
    "parse_read_options",
    "parse_write_options",
]

#: Spark's sentinels in offset JSON.
EARLIEST = -2
LATEST = -1

#: ``kafka.*`` options Spark's Kafka source refuses (the source manages them itself).
_REFUSED = {
    "group.id": "the source reads without a consumer group",
    "auto.offset.reset": "use startingOffsets / endingOffsets",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "key.serializer": "write a binary or string 'key' column",
    "value.serializer": "write a binary or string 'value' column",
    "enable.auto.commit": "the source commits nothing to Kafka",
    "interceptor.classes": "interceptors are not supported",
}

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}

#: One offset spec: "earliest", "latest", or {topic: {partition: offset}} (-2/-1 allowed),
#: or ("timestamp", ms) / ("timestamps", {topic: {partition: ms}}).
OffsetSpec = Any


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"option {name!r}: expected true or false, got {value!r}")


def _int(name: str, value: str, minimum: int | None = None) -> int:
    try:
        n = int(value.strip())
    except (ValueError, AttributeError):
        raise ConfigError(f"option {name!r}: expected an integer, got {value!r}") from None
    if minimum is not None and n < minimum:
        raise ConfigError(f"option {name!r}: must be >= {minimum}, got {n}")
    return n


def _convert(name: str, option: Option, value: str) -> Any:
    default = option.default
    if name.lower() == "kafka.acks":
        return value.strip() if value.strip().lower() == "all" else _int(name, value)
    if default is None and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(default, bool):
        return _bool(name, value)
    if isinstance(default, int):
        return _int(name, value)
    if isinstance(default, list):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def client_options(
    options: Mapping[str, str], table: Mapping[str, Option], *, what: str
) -> dict[str, Any]:
    """The ``kafka.*`` options as kpax client keyword arguments for ``table``.

    ``kafka.bootstrap.servers`` is required. Options the kpax client does not
    know are a ConfigError naming them (kpax has no silent pass-through)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        lower = key.lower()
        if not lower.startswith("kafka."):
            continue
        java = lower[len("kafka.") :]
        if java in _REFUSED:
            raise ConfigError(f"option {key!r} is not supported: {_REFUSED[java]}")
        name = java.replace(".", "_").replace("-", "_")
        if name == "isolation_level":
            continue  # the source's own 'isolation.level' option wins; handled by the caller
        option = table.get(name)
        if option is None:
            if what == "reader" and name in PRODUCER_OPTIONS:
                continue  # a producer option on a read: ignored, as Spark's source does
            if what == "writer" and name in CONSUMER_OPTIONS:
                continue
            raise ConfigError(
                f"option {key!r}: kpax {what}s have no option {name!r} "
                f"(kafka.* options map to kpax names: kafka.security.protocol -> "
                f"security_protocol)"
            )
        out[name] = _convert(key, option, str(value))
    if "bootstrap_servers" not in out:
        raise ConfigError("option 'kafka.bootstrap.servers' is required")
    return out


def _parse_offsets(name: str, value: str, *, batch: bool, ending: bool) -> OffsetSpec:
    v = value.strip()
    if v.lower() in ("earliest", "latest"):
        spec = v.lower()
        if ending and spec == "earliest":
            raise ConfigError(f"option {name!r}: 'earliest' is not allowed for ending offsets")
        if batch and not ending and spec == "latest":
            raise ConfigError(f"option {name!r}: 'latest' is not allowed in batch queries")
        return spec
    try:
        parsed = json.loads(v)
    except ValueError:
        raise ConfigError(
            f"option {name!r}: expected 'earliest', 'latest' or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}, got {value!r}'
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"option {name!r}: the JSON must be an object of topics, got {value!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"option {name!r}: topic {topic!r} must map partitions to offsets")
        tout: dict[int, int] = {}
        for p, off in parts.items():
            try:
                pn = int(p)
            except ValueError:
                raise ConfigError(f"option {name!r}: bad partition {p!r} of {topic!r}") from None
            if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                raise ConfigError(
                    f"option {name!r}: offset of {topic}-{pn} must be an integer >= -2, got {off!r}"
                )
            if ending and off == EARLIEST:
                raise ConfigError(f"option {name!r}: -2 (earliest) is not allowed for {topic}-{pn}")
            if batch and not ending and off == LATEST:
                raise ConfigError(
                    f"option {name!r}: -1 (latest) is not allowed in batch queries ({topic}-{pn})"
                )
            tout[pn] = off
        out[str(topic)] = tout
    return out


def _parse_assign(value: str) -> dict[str, list[int]]:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(
            f'option \'assign\': expected JSON like {{"topicA":[0,1],"topicB":[2]}}, got {value!r}'
        )
    out: dict[str, list[int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise ConfigError(
                f"option 'assign': topic {topic!r} must map to a list of partitions, got {parts!r}"
            )
        out[str(topic)] = sorted(set(parts))
    return out


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader needs; plain data, so it pickles."""

    client: dict[str, Any]
    subscribe: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    poll_timeout_ms: int = 120000
    extra: dict[str, Any] = field(default_factory=dict)

    __repr__ = dataclass_repr  # (the client's passwords shown as [hidden])


def parse_read_options(options: Mapping[str, str], *, batch: bool) -> ReadOptions:
    """Check the read options (Spark passes them case-insensitively, lower-cased)."""
    opts = {k.lower(): v for k, v in options.items()}
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        names = {"subscribe": "subscribe", "subscribepattern": "subscribePattern"}
        given = ", ".join(repr(names.get(k, k)) for k in chosen)
        raise ConfigError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' is required"
            + (f" (given: {given})" if chosen else "")
        )
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigError("option 'subscribe': no topic given")
        subscribe = topics
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option 'subscribePattern': bad regex {pattern!r}: {exc}") from None
    else:
        assign = _parse_assign(opts["assign"])

    starting: OffsetSpec = "earliest" if batch else "latest"
    ending: OffsetSpec = "latest"
    if "startingoffsets" in opts:
        starting = _parse_offsets(
            "startingOffsets", opts["startingoffsets"], batch=batch, ending=False
        )
    if "startingtimestamp" in opts:
        starting = ("timestamp", _int("startingTimestamp", opts["startingtimestamp"], 0))
    if "startingoffsetsbytimestamp" in opts:
        starting = (
            "timestamps",
            _timestamps("startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"]),
        )
    if "endingoffsets" in opts or "endingtimestamp" in opts:
        if not batch:
            key = "endingOffsets" if "endingoffsets" in opts else "endingTimestamp"
            raise ConfigError(f"option {key!r} is not allowed in streaming queries")
        if "endingoffsets" in opts:
            ending = _parse_offsets(
                "endingOffsets", opts["endingoffsets"], batch=batch, ending=True
            )
        if "endingtimestamp" in opts:
            ending = ("timestamp", _int("endingTimestamp", opts["endingtimestamp"], 0))

    min_partitions = None
    if "minpartitions" in opts:
        min_partitions = _int("minPartitions", opts["minpartitions"], 1)
    max_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        if batch:
            raise ConfigError("option 'maxOffsetsPerTrigger' is only for streaming queries")
        max_per_trigger = _int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"], 1)
    fail = _bool("failOnDataLoss", opts.get("failondataloss", "true"))
    headers = _bool("includeHeaders", opts.get("includeheaders", "false"))
    isolation = opts.get("isolation.level", opts.get("kafka.isolation.level", "read_uncommitted"))
    isolation = isolation.strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError(
            f"option 'isolation.level': must be read_uncommitted or read_committed, got "
            f"{isolation!r}"
        )
    poll_timeout = _int(
        "kafkaConsumer.pollTimeoutMs", opts.get("kafkaconsumer.polltimeoutms", "120000"), 1
    )
    client = client_options(opts, CONSUMER_OPTIONS, what="reader")
    return ReadOptions(
        client=client,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        min_partitions=min_partitions,
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=fail,
        include_headers=headers,
        isolation_level=isolation,
        poll_timeout_ms=poll_timeout,
    )


def _timestamps(name: str, value: str) -> dict[str, dict[int, int]]:
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ConfigError(
            f'option {name!r}: expected JSON like {{"topic":{{"0":1700000000000}}}}, got {value!r}'
        )
    out: dict[str, dict[int, int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"option {name!r}: topic {topic!r} must map partitions to times")
        try:
            out[str(topic)] = {int(p): int(ts) for p, ts in parts.items()}
        except (TypeError, ValueError):
            raise ConfigError(f"option {name!r}: bad partition or timestamp in {topic!r}") from None
    return out


@dataclass(frozen=True)
class WriteOptions:
    """What each write task needs; plain data, so it pickles."""

    client: dict[str, Any]
    topic: str | None = None

    __repr__ = dataclass_repr  # (the client's passwords shown as [hidden])


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = {k.lower(): v for k, v in options.items()}
    for bad in ("subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets"):
        if bad in opts:
            raise ConfigError(f"option {bad!r} is for reading; a write takes 'topic'")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("option 'topic' is empty")
    client = client_options(opts, PRODUCER_OPTIONS, what="writer")
    return WriteOptions(client=client, topic=topic.strip() if topic else None)


# Admin takes only the connection options of a reader/writer's client options.
def admin_options(client: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in client.items() if k in ADMIN_OPTIONS}
