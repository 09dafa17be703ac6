"""Record headers and span attributes for :mod:`kpax.otel`: the trace context
written into a record's headers and read back (only it: never baggage, nor a
value too long to be trace context), and the attributes a record gives a span.

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: opentelemetry-api; kpax.otel._common, kpax.proto.errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.propagators.textmap import Getter, Setter

from kpax.otel._common import Headers
from kpax.proto.errors import BrokerResponseError

# ---------------------------------------------------------------- headers

#: Header names that carry baggage (W3C; Jaeger's and OpenTracing's prefixes):
#: never read from a record. A record's headers are whatever its producer wrote.
_BAGGAGE = "baggage"
_BAGGAGE_PREFIXES = ("uberctx-", "ot-baggage-")
#: A header value longer than this is not trace context (a W3C traceparent is
#: 55 characters; OpenTelemetry keeps at most 8192 of tracestate): left unread.
MAX_CONTEXT_HEADER = 8192


def _is_baggage(key: str) -> bool:
    k = key.lower()
    return k == _BAGGAGE or k.startswith(_BAGGAGE_PREFIXES)


class _HeaderSetter(Setter[Headers]):
    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier[:] = [(k, v) for k, v in carrier if k != key]
        carrier.append((key, value.encode("utf-8")))


class _TraceContextGetter(Getter[Sequence[tuple[str, bytes | None]]]):
    """A record's headers as the propagator sees them: trace context only.
    Baggage headers are invisible, and so is a value too long to be trace
    context (so a hostile header is neither decoded nor logged)."""

    def get(self, carrier: Sequence[tuple[str, bytes | None]], key: str) -> list[str] | None:
        if _is_baggage(key):
            return None
        out = [
            v.decode("utf-8", "replace")
            for k, v in carrier
            if k == key and v is not None and len(v) <= MAX_CONTEXT_HEADER
        ]
        return out or None

    def keys(self, carrier: Sequence[tuple[str, bytes | None]]) -> list[str]:
        return [k for k, _ in carrier if not _is_baggage(k)]


_SETTER = _HeaderSetter()
_GETTER = _TraceContextGetter()


def _headers(headers: Any) -> Headers:
    if not headers:
        return []
    items = headers.items() if hasattr(headers, "items") else headers
    return [(k, v.encode("utf-8") if isinstance(v, str) else v) for k, v in items]


def _key_text(key: Any) -> str | None:
    """The key as the conventions want it: its text, or None when it has no
    unambiguous text form (bytes that are not UTF-8)."""
    if key is None:
        return None
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return str(key)


def _body_attrs(attrs: dict[str, Any], value: Any) -> None:
    if value is None:
        attrs["messaging.kafka.message.tombstone"] = True
    elif isinstance(value, (bytes, bytearray)):
        attrs["messaging.message.body.size"] = len(value)
    elif isinstance(value, memoryview):
        attrs["messaging.message.body.size"] = value.nbytes


def _error_type(exc: BaseException) -> str:
    """``error.type``: the Kafka error name for a broker error, else the class."""
    if isinstance(exc, BrokerResponseError):
        return exc.name
    return type(exc).__qualname__
