"""Client configuration: Java-client option names in snake_case, with Java defaults.

Role: a shared utility (not a layer) that every client face uses to check the
keyword options a user passes. An unknown option is a :class:`ConfigError`
naming the closest valid one; a value of the wrong type or out of range is a
:class:`ConfigError` naming the option and what it accepts. :class:`Timeouts`
gives a client's typed settings its timeouts in seconds.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kpax.proto.errors import ConfigError


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


def resolve(kind: str, options: Mapping[str, Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``given`` over the defaults of ``options``, checking each value.

    ``kind`` names the client in messages ("producer", "consumer", "admin").
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
                raise ConfigError(f"{kind} option {key}={value!r}: {exc}") from None
        out[key] = value
    return out


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
