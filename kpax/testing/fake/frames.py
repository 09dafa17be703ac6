"""Request frames in, response frames out: the fake broker's side of the framing.

Role: a *frame* here is one request or response without its 4-byte size
prefix. :func:`decode_request` reads the request header (api key, version,
correlation id, client id; the tagged fields of header v2) and decodes the body
with the generated request class; :func:`encode_response` puts a response
header (v0, or v1 for a flexible version; always v0 for ApiVersions) in front
of an encoded response body. :class:`FrameBuffer` cuts a byte stream into
frames, refusing a size no request has.

Imports: kpax.proto (api, errors, header, messages and their schema table,
primitives) and the standard library.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, cast

from kpax.proto.api import Request, Response
from kpax.proto.errors import ProtocolError
from kpax.proto.header import response_header_version
from kpax.proto.messages import REQUESTS
from kpax.proto.messages._generated._schema import SCHEMA
from kpax.proto.primitives import read_tags

__all__ = ["FrameBuffer", "RequestHeader", "decode_request", "encode_response"]

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: The largest request frame accepted (Kafka's socket.request.max.bytes default).
MAX_REQUEST_SIZE = 100 * 1024 * 1024


class BadFrame(Exception):
    """A frame the fake cannot read: the connection is closed, as Kafka does."""


@dataclass(frozen=True)
class RequestHeader:
    """What the request header says."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None

    @property
    def api_name(self) -> str:
        cls = REQUESTS.get(self.api_key)
        return cls.API_NAME if cls is not None else f"api key {self.api_key}"


def peek_header(frame: bytes | memoryview) -> RequestHeader:
    """The header of a request frame; the body is not read."""
    if len(frame) < 10:
        raise BadFrame(f"a request frame of {len(frame)} bytes has no header")
    api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    (n,) = _I16.unpack_from(frame, 8)
    client_id = None
    if n >= 0:
        raw = bytes(frame[10 : 10 + n])
        if len(raw) != n:
            raise BadFrame("the request header's client id is truncated")
        client_id = raw.decode("utf-8", "replace")
    return RequestHeader(api_key, version, correlation_id, client_id)


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Request]:
    """The header and the decoded body of a request frame (size prefix excluded).

    Raises :class:`BadFrame` for an unknown api key or a body that does not decode.
    """
    header = peek_header(frame)
    cls = REQUESTS.get(header.api_key)
    if cls is None:
        raise BadFrame(f"unknown api key {header.api_key}")
    if not cls.MIN_VERSION <= header.version <= cls.MAX_VERSION:
        raise BadFrame(f"{cls.API_NAME} v{header.version} is not a version kpax.proto knows")
    view = memoryview(frame)
    (n,) = _I16.unpack_from(view, 8)
    pos = 10 + max(n, 0)
    try:
        if cls.is_flexible(header.version):
            _tags, pos = read_tags(view, pos)
        request, end = cls.decode_from(view, pos, header.version)
    except (ProtocolError, IndexError, struct.error) as exc:
        raise BadFrame(f"{cls.API_NAME} v{header.version}: {exc}") from None
    if end != len(view):
        raise BadFrame(f"{cls.API_NAME} v{header.version}: {len(view) - end} bytes after the body")
    return header, request


#: (attribute, first version, last version, first and last nullable version, a struct?)
_Field = tuple[str, int, int, int, int, bool]
_LAYOUTS: dict[str, list[_Field]] = {}


def _layout(qualname: str) -> list[_Field]:
    out = _LAYOUTS.get(qualname)
    if out is None:
        out = []
        for spec in SCHEMA.get(qualname, ()):
            versions = cast("tuple[int, int]", spec[2])
            nullable = cast("tuple[int, int] | None", spec[3]) or (1, 0)
            out.append((str(spec[0]), *versions, *nullable, spec[6] is not None))
        _LAYOUTS[qualname] = out
    return out


def fit_to_version(obj: Any, version: int) -> None:
    """Reset, in place, the fields ``version`` does not have (and nulls it does not
    allow) to their defaults, so handlers may fill every field of the newest
    version and answer an older one: the generated encoders refuse a value a
    version cannot carry."""
    fresh: Any = None
    for attr, lo, hi, nlo, nhi, struct_ in _layout(type(obj).__qualname__):
        value = getattr(obj, attr)
        if not lo <= version <= hi or (value is None and not nlo <= version <= nhi):
            if fresh is None:
                fresh = type(obj)()
            setattr(obj, attr, getattr(fresh, attr))
        elif struct_ and value is not None:
            if isinstance(value, list):
                for item in value:
                    fit_to_version(item, version)
            else:
                fit_to_version(value, version)


def encode_response(header: RequestHeader, response: Response | Any, version: int) -> bytes:
    """The response frame (size prefix excluded) answering ``header``; fields the
    version lacks are dropped first (:func:`fit_to_version`)."""
    fit_to_version(response, version)
    buf = bytearray(_I32.pack(header.correlation_id))
    if response_header_version(header.api_key, version) >= 1:
        buf.append(0)  # empty tagged fields
    response.encode_into(buf, version)
    return bytes(buf)


def with_size(frame: bytes) -> bytes:
    """``frame`` with its 4-byte size prefix, as it goes on the socket."""
    return _I32.pack(len(frame)) + frame


class FrameBuffer:
    """Bytes from a socket in, whole frames out (size prefixes removed)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next whole frame, or None until more bytes come. A size below 0 or
        above :data:`MAX_REQUEST_SIZE` raises :class:`BadFrame`."""
        if len(self._buf) < 4:
            return None
        (size,) = _I32.unpack_from(self._buf, 0)
        if size < 0 or size > MAX_REQUEST_SIZE:
            raise BadFrame(f"a request size of {size} bytes")
        if len(self._buf) < 4 + size:
            return None
        frame = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return frame

    def __len__(self) -> int:
        return len(self._buf)
