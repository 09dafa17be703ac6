"""Key and value serializers: user objects to the bytes a record carries.

Role: ``key_serializer`` / ``value_serializer`` are callables ``obj -> bytes``
(or None), or one of the built-in names ``"bytes"``, ``"str"`` (UTF-8) and
``"json"`` (compact UTF-8 JSON). Without a serializer a key or value must
already be ``bytes`` (``bytearray``/``memoryview`` are copied) or None; any
other type is a TypeError at ``send``.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kpax.proto.errors import ConfigError, SerializationError

Serializer = Callable[[Any], "bytes | None"]

__all__ = [
    "Serializer",
    "as_bytes",
    "bytes_serializer",
    "get_serializer",
    "json_serializer",
    "str_serializer",
]


def bytes_serializer(obj: Any) -> bytes | None:
    return as_bytes(obj, "value")


def str_serializer(obj: Any) -> bytes | None:
    if obj is None:
        return None
    if not isinstance(obj, str):
        raise SerializationError(f"the 'str' serializer needs a str, not {type(obj).__name__}")
    return obj.encode("utf-8")


def json_serializer(obj: Any) -> bytes | None:
    if obj is None:
        return None
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"the 'json' serializer cannot encode {type(obj).__name__}: {exc}"
        ) from None


_BUILTIN: dict[str, Serializer] = {
    "bytes": bytes_serializer,
    "str": str_serializer,
    "json": json_serializer,
}


def get_serializer(value: Any, option: str) -> Serializer | None:
    """The serializer an option names: None, a built-in name, or a callable."""
    if value is None:
        return None
    if isinstance(value, str):
        found = _BUILTIN.get(value.lower())
        if found is None:
            raise ConfigError(
                f"producer option {option}={value!r}: must be a callable or one of "
                f"{sorted(_BUILTIN)}"
            )
        return found
    if not callable(value):
        raise ConfigError(
            f"producer option {option}: must be a callable obj -> bytes, not {type(value).__name__}"
        )
    return value  # type: ignore[no-any-return]


def as_bytes(obj: Any, what: str) -> bytes | None:
    """``obj`` as bytes, for a key or value given without a serializer."""
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(
        f"record {what} must be bytes or None, not {type(obj).__name__} "
        f"(pass {what.replace('value', 'value')}_serializer=, e.g. 'str' or 'json')"
    )
