"""Key and value serializers: user objects to the bytes a record carries.

Role: ``key_serializer`` / ``value_serializer`` are callables ``obj -> bytes``
(or None), or one of the built-in names ``"bytes"``, ``"str"`` (UTF-8) and
``"json"`` (compact UTF-8 JSON). Without a serializer a key or value must
already be ``bytes`` (``bytearray``/``memoryview`` are copied) or None; any
other type is a TypeError at ``send``.

A serializer whose second parameter is named ``ctx`` (or ``context``) --
confluent-kafka's ``Serializer.__call__(obj, ctx)``, so its Schema Registry
serializers (Avro, Protobuf, JSON Schema) -- is called with a
:class:`SerializationContext` too: the record's topic, which field
(``"key"``/``"value"``) and its headers. :func:`with_context` marks any
callable ``(obj, ctx) -> bytes`` explicitly.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from kpax.proto.errors import ConfigError, SerializationError

Serializer = Callable[[Any], "bytes | None"]

__all__ = [
    "SerializationContext",
    "Serializer",
    "as_bytes",
    "bytes_serializer",
    "get_serializer",
    "json_serializer",
    "str_serializer",
    "wants_context",
    "with_context",
]


class SerializationContext(NamedTuple):
    """What a context-taking serializer gets besides the object (confluent-kafka's
    ``SerializationContext``: ``ctx.topic``, ``ctx.field``, ``ctx.headers``)."""

    topic: str
    #: ``"key"`` or ``"value"``.
    field: str
    #: The record's headers as given to ``send`` (None: none).
    headers: Any = None


def with_context(fn: Callable[[Any, SerializationContext], bytes | None]) -> Any:
    """Mark ``fn(obj, ctx) -> bytes`` as a serializer that takes a
    :class:`SerializationContext` (one whose second parameter is named ``ctx``
    or ``context`` needs no mark)."""
    fn.kpax_context = True  # type: ignore[attr-defined]
    return fn


def wants_context(fn: Any) -> bool:
    """Does serializer ``fn`` take a :class:`SerializationContext` (see the module
    docstring)? Decided once, when the producer is made."""
    if fn is None:
        return False
    if getattr(fn, "kpax_context", False):
        return True
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # (builtins without a signature)
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 and positional[1].name in ("ctx", "context")


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
