"""Client configuration: Java-client option names in snake_case, with Java defaults.

Role: a shared utility (not a layer) that every client face uses to check the
keyword options a user passes. An unknown option is a :class:`ConfigError`
naming the closest valid one; a value of the wrong type or out of range is a
:class:`ConfigError` naming the option and what it accepts. :class:`Timeouts`
gives a client's typed settings its timeouts in seconds.

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
from typing import Any

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
    normalised value or raises ValueError/TypeError with what it accepts."""

    default: Any
    check: Callable[[Any], Any] | None = None
    doc: str = ""


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


def resolve(kind: str, options: Mapping[str, Option], given: Mapping[str, Any]) -> ClientConfig:
    """Merge ``given`` over the defaults of ``options``, checking each value.

    ``kind`` names the client in messages ("producer", "consumer", "admin");
    a secret option's value is never in them (its type is).
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
        opt = options.get(key)
        if opt is None:
            close = difflib.get_close_matches(key, list(options), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown {kind} option {name!r}{hint}")
        if opt.check is not None and value is not None:
            try:
                value = opt.check(value)
            except (TypeError, ValueError) as exc:
                shown = f"{HIDDEN} (a {type(value).__name__})" if is_secret(key) else repr(value)
                raise ConfigError(f"{kind} option {key}={shown}: {exc}") from None
        out[key] = value
    return ClientConfig(out)


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
