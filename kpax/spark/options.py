"""Option parsing for the "kpax" Spark data source (driver side, no I/O).

Role: turn Spark's string options (the names of Spark's JVM Kafka connector,
spark-sql-kafka-0-10) into checked Python values: which topics (``subscribe``
/ ``subscribePattern`` / ``assign``), offset and timestamp specs with the
JVM connector's precedence, trigger limits, split limits, the sink's delivery
guarantee, and the ``kafka.*`` pass-through mapped to kpax client option names
(``kafka.security.protocol`` -> ``security_protocol``) with values converted
to the option's type and checked by the kpax client's own option table. An
option the source or sink does not know is refused naming the closest known
one (the JVM connector ignores a misspelt option). Every error is a
:class:`kpax.errors.ConfigError` naming the option.

The kpax client option tables are imported on first use, not at import: a
Python worker that only unpickles a writer or a reader does not load the
kpax client stack for them.

Imports: the standard library, kpax.errors, kpax.config (dataclass_repr; resolve
inside the functions that need it); the kpax client option tables inside the
functions that need them.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kpax.config import dataclass_repr
from kpax.errors import ConfigError

log = logging.getLogger("kpax.spark")

__all__ = [
    "AT_LEAST_ONCE",
    "EARLIEST",
    "EXACTLY_ONCE",
    "LATEST",
    "READ_OPTIONS",
    "WRITE_OPTIONS",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
    "client_options",
    "parse_read_options",
    "parse_write_options",
    "time_ms",
]

#: Spark's sentinels in offset JSON.
EARLIEST = -2
LATEST = -1

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"

#: Read options by their canonical spelling (Spark lower-cases option names; messages
#: name them as a user writes them). ``kafka.*`` options are checked separately.
READ_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "minRecordsPerPartition",
    "groupIdPrefix",
    "includeHeaders",
    "isolation.level",
)

#: Write options (batch and streaming); ``checkpointLocation`` and ``queryName`` are
#: Spark's own, passed to a streaming sink with the others.
WRITE_OPTIONS = (
    "topic",
    "includeHeaders",
    "deliveryGuarantee",
    "transactionalIdPrefix",
    "checkpointLocation",
    "queryName",
)

#: minRecordsPerPartition's default: a Spark task costs more to set up (~0.1 s) than
#: reading this many records (~0.04 s).
MIN_RECORDS_PER_PARTITION = 20_000

_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")

#: ``kafka.*`` options the source refuses (it manages them itself), as the JVM connector.
_REFUSED_READ = {
    "auto.offset.reset": "use startingOffsets (Spark manages where each query reads)",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "enable.auto.commit": "the source commits nothing to Kafka",
    "interceptor.classes": "interceptors are not supported",
}
_REFUSED_WRITE = {
    "key.serializer": "write a binary or string 'key' column",
    "value.serializer": "write a binary or string 'value' column",
    "interceptor.classes": "interceptors are not supported",
    "transactional.id": (
        "the sink names one transactional id per task; set deliveryGuarantee=exactly-once "
        "and, for ACLs, transactionalIdPrefix"
    ),
}

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}

#: One offset spec: "earliest", "latest", {topic: {partition: offset}} (-2/-1 allowed),
#: ("timestamp", ms) or ("timestamps", {topic: {partition: ms}}).
OffsetSpec = Any

_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _canonical(names: tuple[str, ...]) -> dict[str, str]:
    return {n.lower(): n for n in names}


def _did_you_mean(key: str, names: tuple[str, ...]) -> str:
    canon = _canonical(names)
    close = difflib.get_close_matches(key.lower(), list(canon), n=1, cutoff=0.6)
    return f"; did you mean {canon[close[0]]!r}?" if close else ""


def _bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"option {name!r}: expected true or false, got {value!r}")


def _int(name: str, value: str, minimum: int | None = None) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"option {name!r}: expected an integer, got {value!r}") from None
    if minimum is not None and n < minimum:
        raise ConfigError(f"option {name!r}: must be >= {minimum}, got {n}")
    return n


def time_ms(name: str, value: str) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``, ``1h``; a bare
    number is milliseconds) in milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(value))
    unit = m.group(2).lower() if m else ""
    if m is None or (unit and unit not in _UNITS_MS):
        raise ConfigError(
            f"option {name!r}: expected a duration like '15m', '30s' or '500ms', got {value!r}"
        )
    return int(int(m.group(1)) * _UNITS_MS.get(unit, 1))


def _convert(name: str, option: Any, value: str) -> Any:
    default = option.default
    v = str(value).strip()
    if name.lower() == "kafka.acks":
        return v if v.lower() == "all" else _int(name, v)
    if default is None and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if isinstance(default, bool):
        return _bool(name, v)
    if isinstance(default, int):
        return _int(name, v)
    if default is None and re.fullmatch(r"-?\d+", v) and name.lower().endswith(".ms"):
        return int(v)
    if isinstance(default, list):
        return [item.strip() for item in v.split(",") if item.strip()]
    return value


def client_options(options: Mapping[str, str], *, what: str) -> dict[str, Any]:
    """The ``kafka.*`` options as kpax client keyword arguments (``what``: "reader" or
    "writer"), checked against the kpax consumer's or producer's option table.

    ``kafka.bootstrap.servers`` is required. An option the kpax client does not
    know is a ConfigError naming the closest one (kpax has no silent
    pass-through), and so is a producer option on a read or a consumer option on
    a write (it would do nothing). Only the table of the client used is imported
    unless an option is unknown."""
    from kpax.config import resolve

    if what == "reader":
        from kpax.consumer.options import CONSUMER_OPTIONS as table
    else:
        from kpax.producer.options import PRODUCER_OPTIONS as table
    refused = _REFUSED_READ if what == "reader" else _REFUSED_WRITE
    out: dict[str, Any] = {}
    for key, value in options.items():
        lower = key.lower()
        if not lower.startswith("kafka."):
            continue
        java = lower[len("kafka.") :]
        if java in refused:
            raise ConfigError(f"option {key!r} is not supported: {refused[java]}")
        name = java.replace(".", "_").replace("-", "_")
        if name in ("isolation_level", "group_id"):
            continue  # the source's own options (isolation.level, kafka.group.id)
        option = table.get(name)
        if option is None:
            raise ConfigError(_unknown_client_option(key, name, table, what))
        out[name] = _convert(key, option, str(value))
    if "bootstrap_servers" not in out:
        raise ConfigError("option 'kafka.bootstrap.servers' is required")
    kind = "consumer" if what == "reader" else "producer"
    try:
        resolve(kind, table, out)
    except ConfigError as exc:
        raise ConfigError(f"a kafka.* option: {exc}") from None
    return out


def _unknown_client_option(key: str, name: str, table: Mapping[str, Any], what: str) -> str:
    if what == "reader":
        from kpax.producer.options import PRODUCER_OPTIONS as other
    else:
        from kpax.consumer.options import CONSUMER_OPTIONS as other
    if name in other:
        kind, use = ("a producer", "a read") if what == "reader" else ("a consumer", "a write")
        return f"option {key!r} is {kind} option: {use} does not use it"
    close = difflib.get_close_matches(name, list(table), n=1, cutoff=0.6)
    hint = f" (did you mean 'kafka.{close[0].replace('_', '.')}'?)" if close else ""
    return (
        f"option {key!r}: kpax {what}s have no option {name!r}{hint}; kafka.* options map "
        f"to kpax names: kafka.security.protocol -> security_protocol"
    )


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


def _check_names(opts: Mapping[str, str], names: tuple[str, ...], *, what: str) -> None:
    """Refuse option names the source (``what="read"``) or sink does not know."""
    known = _canonical(names)
    other = _canonical(WRITE_OPTIONS if what == "read" else READ_OPTIONS)
    for key in opts:
        lower = key.lower()
        if lower.startswith("kafka.") or lower in known:
            continue
        if lower == "path":
            raise ConfigError(
                "kpax takes no path: name the topics with the options subscribe / "
                "subscribePattern / assign (reads) or topic (writes)"
            )
        if lower in other:
            kind = "a write" if what == "read" else "a read"
            raise ConfigError(
                f"option {other[lower]!r} is {kind} option; the kpax "
                f"{'source' if what == 'read' else 'sink'} does not take it"
            )
        raise ConfigError(
            f"option {key!r} is not an option of the kpax "
            f"{'source' if what == 'read' else 'sink'}{_did_you_mean(key, names)} "
            f"(kpax refuses unknown options; Kafka client settings take the 'kafka.' prefix)"
        )


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader needs; plain data, so it pickles."""

    client: dict[str, Any]
    subscribe: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    #: startingOffsetsByTimestampStrategy: "error" or "latest".
    timestamp_strategy: str = "error"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    #: kpax's: small ranges are packed into Spark partitions of at least this many
    #: records (0: one Spark partition per Kafka partition, the JVM source's mapping).
    min_records_per_partition: int = MIN_RECORDS_PER_PARTITION
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    poll_timeout_ms: int = 120000
    fetch_offset_attempts: int = 3
    fetch_offset_retry_interval_ms: int = 10
    #: The consumer group id the executors' consumers are named after (kafka.group.id, or
    #: groupIdPrefix + a unique id); they never join or commit to it.
    group_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    __repr__ = dataclass_repr  # (the client's passwords shown as [hidden])

    def topics_description(self) -> str:
        """``Subscribe[a,b]`` / ``SubscribePattern[x.*]`` / ``Assign[a-0, a-1]``, as
        the JVM source names its strategy."""
        if self.subscribe is not None:
            return f"Subscribe[{','.join(self.subscribe)}]"
        if self.pattern is not None:
            return f"SubscribePattern[{self.pattern}]"
        assert self.assign is not None
        return "Assign[" + ", ".join(f"{t}-{p}" for t, ps in self.assign.items() for p in ps) + "]"


def _pick(opts: Mapping[str, str], names: tuple[str, str, str]) -> tuple[str | None, str | None]:
    """The option of highest precedence among ``names`` that is set (the JVM
    connector's order: a global timestamp, then per-partition timestamps, then
    offsets), and the name of any lower one it overrides."""
    given = [n for n in names if n.lower() in opts]
    if not given:
        return None, None
    if len(given) > 1:
        log.warning(
            "kpax spark: option %r takes precedence over %s (as in Spark's Kafka source)",
            given[0],
            ", ".join(repr(g) for g in given[1:]),
        )
    return given[0], (given[1] if len(given) > 1 else None)


def parse_read_options(options: Mapping[str, str], *, batch: bool) -> ReadOptions:
    """Check the read options (Spark passes them case-insensitively, lower-cased)."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    _check_names(opts, READ_OPTIONS, what="read")
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
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise ConfigError("option 'subscribePattern': the pattern is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option 'subscribePattern': bad regex {pattern!r}: {exc}") from None
    else:
        assign = _parse_assign(opts["assign"])

    mode = "batch" if batch else "streaming"
    for name in _STREAM_ONLY if batch else _BATCH_ONLY:
        if name.lower() in opts:
            raise ConfigError(f"option {name!r} is not allowed in {mode} queries")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            f"option 'startingOffsetsByTimestampStrategy': must be 'error' or 'latest', got "
            f"{opts['startingoffsetsbytimestampstrategy']!r}"
        )
    starting: OffsetSpec = "earliest" if batch else "latest"
    first, _ = _pick(opts, ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets"))
    if first == "startingTimestamp":
        starting = ("timestamp", _int("startingTimestamp", opts["startingtimestamp"], 0))
    elif first == "startingOffsetsByTimestamp":
        starting = (
            "timestamps",
            _timestamps("startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"]),
        )
    elif first == "startingOffsets":
        starting = _parse_offsets(
            "startingOffsets", opts["startingoffsets"], batch=batch, ending=False
        )
    ending: OffsetSpec = "latest"
    first, _ = _pick(opts, ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"))
    if first == "endingTimestamp":
        ending = ("timestamp", _int("endingTimestamp", opts["endingtimestamp"], 0))
    elif first == "endingOffsetsByTimestamp":
        ending = (
            "timestamps",
            _timestamps("endingOffsetsByTimestamp", opts["endingoffsetsbytimestamp"]),
        )
    elif first == "endingOffsets":
        ending = _parse_offsets("endingOffsets", opts["endingoffsets"], batch=batch, ending=True)

    def optional(name: str, minimum: int) -> int | None:
        return _int(name, opts[name.lower()], minimum) if name.lower() in opts else None

    max_per_trigger = optional("maxOffsetsPerTrigger", 1)
    min_per_trigger = optional("minOffsetsPerTrigger", 0)
    if (
        max_per_trigger is not None
        and min_per_trigger is not None
        and min_per_trigger > max_per_trigger
    ):
        raise ConfigError(
            f"option 'minOffsetsPerTrigger' ({min_per_trigger}) is higher than "
            f"'maxOffsetsPerTrigger' ({max_per_trigger})"
        )
    delay = 15 * 60_000
    if "maxtriggerdelay" in opts:
        delay = time_ms("maxTriggerDelay", opts["maxtriggerdelay"])
        if min_per_trigger is None:
            raise ConfigError("option 'maxTriggerDelay' applies only with 'minOffsetsPerTrigger'")

    isolation = opts.get("isolation.level", opts.get("kafka.isolation.level", "read_uncommitted"))
    isolation = isolation.strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError(
            f"option 'isolation.level': must be read_uncommitted or read_committed, got "
            f"{isolation!r}"
        )
    group_id = None
    if "kafka.group.id" in opts:
        group_id = opts["kafka.group.id"].strip()
        if not group_id:
            raise ConfigError("option 'kafka.group.id' is empty")
        log.warning(
            "kpax spark: option 'kafka.group.id' is set: the executors' consumers are named "
            "after group %r (they never join it or commit to it)%s",
            group_id,
            "; groupIdPrefix is ignored" if "groupidprefix" in opts else "",
        )
    else:
        prefix = opts.get("groupidprefix", "spark-kafka-source" if not batch else "").strip()
        if "groupidprefix" in opts and not prefix:
            raise ConfigError("option 'groupIdPrefix' is empty")
        if not prefix:
            prefix = "spark-kafka-relation"
        group_id = f"{prefix}-{uuid.uuid4()}-executor"
    client = client_options(opts, what="reader")
    return ReadOptions(
        client=client,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        min_partitions=optional("minPartitions", 1),
        max_records_per_partition=optional("maxRecordsPerPartition", 1),
        min_records_per_partition=_int(
            "minRecordsPerPartition",
            opts.get("minrecordsperpartition", str(MIN_RECORDS_PER_PARTITION)),
            0,
        ),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        isolation_level=isolation,
        poll_timeout_ms=_int(
            "kafkaConsumer.pollTimeoutMs", opts.get("kafkaconsumer.polltimeoutms", "120000"), 1
        ),
        fetch_offset_attempts=_int(
            "fetchOffset.numRetries", opts.get("fetchoffset.numretries", "3"), 1
        ),
        fetch_offset_retry_interval_ms=_int(
            "fetchOffset.retryIntervalMs", opts.get("fetchoffset.retryintervalms", "10"), 0
        ),
        group_id=group_id,
    )


@dataclass(frozen=True)
class WriteOptions:
    """What each write task needs; plain data, so it pickles."""

    client: dict[str, Any]
    topic: str | None = None
    delivery: str = AT_LEAST_ONCE
    transactional_id_prefix: str = "kpax-spark"

    __repr__ = dataclass_repr  # (the client's passwords shown as [hidden])

    @property
    def exactly_once(self) -> bool:
        return self.delivery == EXACTLY_ONCE


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = {k.lower(): str(v) for k, v in options.items()}
    _check_names(opts, WRITE_OPTIONS, what="write")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("option 'topic' is empty")
    _bool("includeHeaders", opts.get("includeheaders", "false"))  # the JVM sink's; see docs
    delivery = opts.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower()
    if delivery not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise ConfigError(
            f"option 'deliveryGuarantee': must be {AT_LEAST_ONCE!r} or {EXACTLY_ONCE!r}, got "
            f"{opts['deliveryguarantee']!r}"
        )
    prefix = opts.get("transactionalidprefix", "kpax-spark").strip()
    if not prefix:
        raise ConfigError("option 'transactionalIdPrefix' is empty")
    if "transactionalidprefix" in opts and delivery != EXACTLY_ONCE:
        raise ConfigError(
            "option 'transactionalIdPrefix' applies only with deliveryGuarantee=exactly-once"
        )
    client = client_options(opts, what="writer")
    if delivery == EXACTLY_ONCE:
        if client.get("enable_idempotence") is False:
            raise ConfigError(
                "option 'kafka.enable.idempotence': false is not allowed with "
                "deliveryGuarantee=exactly-once (transactions need idempotence)"
            )
        if client.get("acks", -1) not in (-1, "all"):
            raise ConfigError(
                f"option 'kafka.acks': {client['acks']!r} is not allowed with "
                "deliveryGuarantee=exactly-once (transactions need acks=all)"
            )
    return WriteOptions(
        client=client,
        topic=topic.strip() if topic else None,
        delivery=delivery,
        transactional_id_prefix=prefix,
    )


def admin_options(client: Mapping[str, Any]) -> dict[str, Any]:
    """Admin takes only the connection options of a reader's or writer's client options."""
    from kpax.admin.base import ADMIN_OPTIONS

    return {k: v for k, v in client.items() if k in ADMIN_OPTIONS}
