"""Client configuration: Java-client option names in snake_case, with Java defaults.

Role: a shared utility (not a layer) that every client face uses to check the
keyword options a user passes. An unknown option is a :class:`ConfigError`
naming the closest valid one; a value of the wrong type or out of range is a
:class:`ConfigError` naming the option and what it accepts. :class:`Timeouts`
gives a client's typed settings its timeouts in seconds.

Names and values as the peers write them: a Java or librdkafka dotted name
(``"enable.auto.commit"``) is the snake_case option (``enable_auto_commit``),
and a string value is parsed as the Java client parses it (``"false"``,
``"5"``), then checked like any other. librdkafka-only names map to kpax's
option (:data:`PEER_NAMES`: ``message.timeout.ms`` is ``delivery_timeout_ms``,
``ssl.ca.location`` is ``ssl_cafile``...); the ones kpax has no equivalent for
are refused with what to do instead (:data:`PEER_HINTS`).

Secrets are never printed: a resolved configuration (:class:`ClientConfig`)
and the objects built from it show ``[hidden]`` (as the Java client does) for
every secret option or field (:func:`is_secret`: passwords, tokens, token
providers, JAAS configs), in their reprs (:func:`safe_repr`,
:func:`dataclass_repr`) and in configuration errors; the typed objects the
broker layer keeps hold them as :class:`Secret` (``[hidden]`` in any repr,
``vars()`` included; :func:`reveal` gives the value where it is used).

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Annotated, Any, TypedDict, get_args, get_type_hints

from kpax.proto.errors import ConfigError

#: What a secret value prints as (the Java client's word).
HIDDEN = "[hidden]"

#: Parts of option and field names that hold secrets: ``sasl_plain_password``,
#: ``ssl_password``, ``sasl_oauth_token_provider`` and the connection options'
#: ``sasl_password`` and ``sasl_token_provider``, the CLI's Java names
#: (``ssl_key_password``, ``sasl_jaas_config``, ``*_store_password``), a
#: JAAS config's or SCRAM upsertion's ``password``.
_SECRET_WORDS = ("password", "token", "secret", "jaas", "credential")


class Secret:
    """A secret value (a password, a token provider) that prints as ``[hidden]``;
    :meth:`get` (or :func:`reveal`) gives it where it is used."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def get(self) -> Any:
        return self._value

    def __repr__(self) -> str:
        return HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def hide(value: Any) -> Any:
    """``value`` as a :class:`Secret` (None stays None; a Secret stays as it is)."""
    return value if value is None or isinstance(value, Secret) else Secret(value)


def reveal(value: Any) -> Any:
    """The value of a :class:`Secret`; anything else as it is."""
    return value.get() if isinstance(value, Secret) else value


def is_secret(name: object) -> bool:
    """Does the option or field ``name`` hold a secret (a password, a token or
    its provider, a JAAS config)?"""
    if not isinstance(name, str):
        return False
    low = name.lower()
    return any(word in low for word in _SECRET_WORDS)


def _shown(name: object, value: Any) -> str:
    return HIDDEN if value is not None and is_secret(name) else safe_repr(value)


def safe_repr(value: Any) -> str:
    """``repr(value)`` with the values of secret keys (mappings) and fields
    (dataclasses) shown as ``[hidden]``, through nested mappings, lists,
    tuples and dataclasses."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k!r}: {_shown(k, v)}" for k, v in value.items()) + "}"
    if is_dataclass(value) and not isinstance(value, type):
        return dataclass_repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(safe_repr(v) for v in value) + "]"
    if isinstance(value, tuple) and type(value) is tuple:
        inner = ", ".join(safe_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def dataclass_repr(obj: Any) -> str:
    """A dataclass's repr as ``dataclasses`` writes it, secret fields shown as
    ``[hidden]`` (for a dataclass's ``__repr__``)."""
    shown = ", ".join(
        f"{f.name}={_shown(f.name, getattr(obj, f.name))}" for f in fields(obj) if f.repr
    )
    return f"{type(obj).__qualname__}({shown})"


class ClientConfig(dict[str, Any]):
    """A client's resolved configuration (:func:`resolve`): a dict whose repr
    and str show secret values as ``[hidden]``."""

    def __repr__(self) -> str:
        return safe_repr(dict(self))

    __str__ = __repr__


@dataclass(frozen=True)
class Option:
    """One configuration option: its default, and a check that returns the
    normalised value or raises ValueError/TypeError with what it accepts.

    Declared once, as the ``Annotated`` metadata of the option's key in its
    client's config TypedDict (``linger_ms: Annotated[int, Option(5,
    non_negative_int)]`` in ``ProducerConfig``): the key is the option's name,
    the type is what users' type checkers see (``**config: Unpack[...]``), and
    :func:`option_table` reads the Options back for :func:`resolve` and the
    docs' option tables, and ``tools/gen_settings.py`` the fields of the
    client's typed Settings (each typed as :func:`resolved_type` says).

    ``resolved``: the type of the value the client reads once the option is
    resolved (its Settings field), where neither the check's return annotation
    nor the declared type says it (``enable_idempotence``: ``bool | None``
    given, always a bool once resolved). Keep it rare: annotate the check."""

    default: Any
    check: Callable[[Any], Any] | None = None
    doc: str = ""
    resolved: Any = None


class OptionTable(dict[str, Option]):
    """A client's option table (:func:`option_table`): each :class:`Option` by
    name, and :attr:`nullable`, the names that take None (their declared type
    admits it, or their default is None); :func:`resolve` refuses None for the
    others, naming the option, rather than letting it reach the client."""

    nullable: frozenset[str] = frozenset()


def option_table(config_type: type) -> OptionTable:
    """The option table of a client's config TypedDict (in declaration order,
    inherited keys first): each key's :class:`Option`, from its ``Annotated``
    metadata. A key without exactly one Option is a TypeError at import."""
    out = OptionTable()
    nullable = set()
    for name, hint in get_type_hints(config_type, include_extras=True).items():
        found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Option)]
        if len(found) != 1:
            raise TypeError(
                f"{config_type.__name__}.{name}: declare the option as "
                "Annotated[<type>, Option(default, check, doc)]"
            )
        out[name] = found[0]
        declared = getattr(hint, "__origin__", hint)
        if found[0].default is None or declared is Any or type(None) in get_args(declared):
            nullable.add(name)
    out.nullable = frozenset(nullable)
    return out


def resolved_type(option: Option, declared: Any) -> Any:
    """The type of ``option``'s value once resolved (its Settings field's type):
    its explicit ``resolved``, else its check's return annotation unless that is
    ``Any``, else ``declared`` (the type users give it)."""
    if option.resolved is not None:
        return option.resolved
    if option.check is not None:
        try:
            returned = get_type_hints(option.check).get("return", Any)
        except (NameError, TypeError):
            returned = Any
        if returned is not Any:
            return returned
    return declared


def one_of(*choices: Any) -> Callable[[Any], Any]:
    """A check accepting only the given values (strings compared case-insensitively)."""

    def check(value: Any) -> Any:
        for choice in choices:
            if value == choice or (
                isinstance(value, str) and isinstance(choice, str) and value.lower() == choice
            ):
                return choice
        raise ValueError(f"must be one of {', '.join(repr(c) for c in choices)}")

    return check


def non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("must be an integer >= 0")
    return value


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("must be an integer > 0")
    return value


def optional_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError("must be a string or None")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be True or False")
    return value


def callback_or_none(value: Any) -> Any:
    if value is not None and not callable(value):
        raise ValueError("must be a callable (or None)")
    return value


def bootstrap_list(value: Any) -> list[str]:
    """``"h1:9092,h2:9092"`` or a list of ``host:port`` strings."""
    items: Iterable[str]
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Iterable):
        items = [str(v) for v in value]
    else:
        raise ValueError("must be 'host:port[,host:port...]' or a list of 'host:port'")
    out = [item.strip() for item in items if item.strip()]
    if not out:
        raise ValueError("must name at least one host:port")
    for item in out:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"{item!r} is not host:port")
    return out


def _kbytes(value: Any) -> int:
    return int(value) * 1024


def _identification(value: Any) -> bool:
    return str(value).strip().lower() not in ("none", "")


def _offset_reset(value: Any) -> Any:
    """librdkafka's ``auto.offset.reset`` words as the Java client's."""
    if isinstance(value, str):
        low = value.strip().lower()
        return {
            "smallest": "earliest",
            "beginning": "earliest",
            "largest": "latest",
            "end": "latest",
            "error": "none",
        }.get(low, value)
    return value


#: librdkafka's (confluent-kafka's) and the other peers' option names that kpax
#: spells differently, in snake_case: ``{name: (kpax option, value conversion)}``.
PEER_NAMES: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "message_timeout_ms": ("delivery_timeout_ms", None),
    "request_required_acks": ("acks", None),
    "queue_buffering_max_ms": ("linger_ms", None),
    "queue_buffering_max_kbytes": ("buffer_memory", _kbytes),
    "compression_codec": ("compression_type", None),
    "message_send_max_retries": ("retries", None),
    "max_in_flight": ("max_in_flight_requests_per_connection", None),
    "message_max_bytes": ("max_request_size", None),
    "socket_timeout_ms": ("request_timeout_ms", None),
    "topic_metadata_refresh_interval_ms": ("metadata_max_age_ms", None),
    "fetch_wait_max_ms": ("fetch_max_wait_ms", None),
    "fetch_message_max_bytes": ("max_partition_fetch_bytes", None),
    "auto_offset_reset": ("auto_offset_reset", _offset_reset),
    "ssl_ca_location": ("ssl_cafile", None),
    "ssl_certificate_location": ("ssl_certfile", None),
    "ssl_key_location": ("ssl_keyfile", None),
    "ssl_key_password": ("ssl_password", None),
    "enable_ssl_certificate_verification": ("ssl_verify", None),
    "ssl_endpoint_identification_algorithm": ("ssl_check_hostname", _identification),
    "sasl_mechanisms": ("sasl_mechanism", None),
    "sasl_username": ("sasl_plain_username", None),
    "sasl_password": ("sasl_plain_password", None),
    "error_cb": ("error_callback", None),
    "stats_cb": ("stats_callback", None),
}

#: Peer option names kpax has no equivalent for, and what to do instead.
PEER_HINTS: dict[str, str] = {
    "queue_buffering_max_messages": "kpax bounds what a producer buffers in bytes: buffer_memory",
    "batch_num_messages": "kpax bounds a batch in bytes: batch_size",
    "queued_max_messages_kbytes": (
        "kpax bounds what a consumer buffers with fetch_max_bytes and fetch_buffer_chunks"
    ),
    "debug": (
        "kpax logs through the standard logging module: "
        "logging.getLogger('kpax').setLevel(logging.DEBUG) (see docs/logging.md)"
    ),
    "logger": "kpax logs through the standard logging module (see docs/logging.md)",
    "log_level": "kpax logs through the standard logging module (see docs/logging.md)",
    "api_version_request": "kpax always asks the brokers for their API versions; leave it out",
    "broker_version_fallback": "kpax always asks the brokers for their API versions; leave it out",
    "on_delivery": "pass callback= to send() (or use the future it returns)",
    "delivery_cb": "pass callback= to send() (or use the future it returns)",
    "dr_cb": "pass callback= to send() (or use the future it returns)",
    "dr_msg_cb": "pass callback= to send() (or use the future it returns)",
    "on_commit": "pass callback= to commit_async()",
    "oauth_cb": "give sasl_oauth_token_provider= (an object with a token() method)",
    "throttle_cb": "a producer's throttling shows in metrics(): produce-throttle-time-avg",
    "enable_auto_offset_store": "only the consumer has it: enable_auto_offset_store",
    "api_version": "kpax asks each broker for its API versions (kafka-python's api_version "
    "pins them): leave it out",
    "api_version_auto_timeout_ms": "kpax asks each broker for its API versions: leave it out",
    "default_topic_config": "give its entries as top-level options (librdkafka's "
    "default.topic.config is a nested dict)",
}


class CallbackConfig(TypedDict, total=False):
    """The producer's and the consumer's statistics and error callbacks
    (confluent-kafka's ``stats_cb``/``error_cb``), declared once for both."""

    statistics_interval_ms: Annotated[
        int, Option(0, non_negative_int, "how often stats_callback gets metrics() (0: never)")
    ]
    stats_callback: Annotated[
        Callable[[dict[str, float]], Any] | None,
        Option(
            None,
            callback_or_none,
            "callable(metrics: dict[str, float]) every statistics_interval_ms (may be async def)",
        ),
    ]
    error_callback: Annotated[
        Callable[[BaseException], Any] | None,
        Option(
            None,
            callback_or_none,
            "callable(error) (may be async def): client-level problems (no broker reachable, "
            "authentication failed, a fatal error), once per change",
        ),
    ]


#: The options of :class:`CallbackConfig`.
CALLBACK_OPTIONS: OptionTable = option_table(CallbackConfig)


def _from_string(check: Callable[[Any], Any], text: str) -> Any:
    """A string value as the Java client parses it for a typed option:
    ``"true"``/``"false"`` for a boolean, digits for a number; then ``check``."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return check(low == "true")
    try:
        number = int(low)
    except ValueError:
        raise ValueError("not a value of this option") from None
    return check(number)


def given_options(first: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """A client's keyword options with its first positional argument folded in:
    the bootstrap servers, or a whole configuration dict as confluent-kafka
    takes it (``kpax.Producer({"bootstrap.servers": ..., "acks": "all"})``;
    keyword options win)."""
    if isinstance(first, Mapping):
        return {**first, **config}
    out = dict(config)
    if first is not None:
        out["bootstrap_servers"] = first
    return out


def resolve(kind: str, options: OptionTable, given: Mapping[str, Any]) -> ClientConfig:
    """Merge ``given`` over the defaults of ``options``, checking each value.

    ``kind`` names the client in messages ("producer", "consumer", "admin");
    a secret option's value is never in them (its type is). Peer names map
    to kpax's (:data:`PEER_NAMES`) and string values are parsed (module
    docstring).
    """
    # A default takes the same check as a given value: every value of the
    # result has one form (``bootstrap_servers`` a list, whether given or not).
    out: dict[str, Any] = {
        name: opt.default if opt.check is None or opt.default is None else opt.check(opt.default)
        for name, opt in options.items()
    }
    for name, raw in given.items():
        value = raw
        key = name.replace(".", "_").replace("-", "_")
        renamed = PEER_NAMES.get(key)
        if renamed is not None and renamed[0] in options:
            key, convert = renamed
            if convert is not None and value is not None:
                try:
                    value = convert(value)
                except (TypeError, ValueError):
                    raise ConfigError(
                        f"{kind} option {name!r} (kpax's {key}): {value!r} is not a value of it"
                    ) from None
        opt = options.get(key)
        if opt is None:
            raise ConfigError(f"unknown {kind} option {name!r}{_unknown_hint(kind, key, options)}")
        if value is None and key not in options.nullable:
            raise _bad_value(kind, name, key, raw, _refusing_none(opt))
        if opt.check is not None and value is not None:
            try:
                value = opt.check(value)
            except (TypeError, ValueError) as exc:
                error: Exception | None = exc
                if isinstance(value, str):
                    try:
                        value = _from_string(opt.check, value)
                        error = None
                    except (TypeError, ValueError):
                        pass
                if error is not None:
                    raise _bad_value(kind, name, key, raw, error) from None
        out[key] = value
    return ClientConfig(out)


def _refusing_none(opt: Option) -> Exception:
    """Why None is no value of ``opt`` (an option whose type does not take it):
    what its check says of None, else that it needs a value."""
    if opt.check is not None:
        try:
            opt.check(None)
        except (TypeError, ValueError) as exc:
            return exc
    return ValueError("needs a value (leave the option out for its default)")


def _bad_value(kind: str, name: str, key: str, raw: Any, exc: Exception) -> ConfigError:
    shown = f"{HIDDEN} (a {type(raw).__name__})" if is_secret(key) else repr(raw)
    given = name.replace(".", "_").replace("-", "_")
    where = key if given == key else f"{name!r} (kpax's {key})"
    return ConfigError(f"{kind} option {where}={shown}: {exc}")


def _unknown_hint(kind: str, key: str, options: Mapping[str, Option]) -> str:
    """What an unknown option's error adds: a peer name's equivalent or what to
    do instead, else the closest kpax option."""
    hint = PEER_HINTS.get(key)
    if hint is not None:
        return f" (a librdkafka/peer option): {hint}"
    renamed = PEER_NAMES.get(key)
    if renamed is not None:
        return f" (the peers' name of kpax's {renamed[0]}, which a {kind} does not have)"
    close = difflib.get_close_matches(key, list(options), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class Timeouts:
    """The request timeout, API timeout and retry backoff of a client's typed
    settings (a frozen dataclass with the ``*_ms`` fields below), in the units
    its components use. A mixin: its annotations are not dataclass fields."""

    request_timeout_ms: int
    default_api_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int

    @property
    def request_timeout(self) -> float:
        """``request_timeout_ms`` in seconds."""
        return self.request_timeout_ms / 1000

    @property
    def api_timeout(self) -> float:
        """``default_api_timeout_ms`` in seconds."""
        return self.default_api_timeout_ms / 1000

    @property
    def retry_backoff(self) -> tuple[int, int]:
        """``(retry_backoff_ms, retry_backoff_max_ms)``."""
        return self.retry_backoff_ms, self.retry_backoff_max_ms
