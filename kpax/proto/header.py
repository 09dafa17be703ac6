"""Request/response framing: headers, size prefix and correlation ids.

Role: turn a request message into the bytes that go on the socket
(:func:`encode_request`: 4-byte size, request header, body) and a response
frame (without its size prefix) back into ``(correlation_id, response)``
(:func:`decode_response`). Header versions follow Kafka's rules: a flexible
request version uses request header v2 (else v1); a flexible response version
uses response header v1 (else v0), except ApiVersions responses, which always
use v0 so a client can read them whatever version it asked for.

Imports: the standard library and kpax.proto (api, errors, messages) only.
"""

from __future__ import annotations

import struct

from kpax.proto.api import Request, Response
from kpax.proto.errors import InvalidMessageError, ProtocolError
from kpax.proto.messages import REQUESTS
from kpax.proto.primitives import read_tags, write_str

__all__ = [
    "API_VERSIONS_KEY",
    "decode_response",
    "encode_request",
    "peek_correlation_id",
    "request_header_version",
    "response_header_version",
]

#: The ApiVersions api key: its response header is always v0.
API_VERSIONS_KEY = 18

_SIZE = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_CORR = struct.Struct(">i")


#: The request classes looked up so far: REQUESTS imports a message module on a key's
#: first lookup, through a Python method; this plain dict keeps the lookup done for
#: every request and response a C call.
_REQUEST_CLASSES: dict[int, type[Request]] = {}


def _request_class(api_key: int) -> type[Request]:
    cls = _REQUEST_CLASSES.get(api_key)
    if cls is None:
        cls = REQUESTS.get(api_key)
        if cls is None:
            raise InvalidMessageError(f"unknown api key {api_key}")
        _REQUEST_CLASSES[api_key] = cls
    return cls


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version for this request: 2 when flexible, else 1."""
    return 2 if _request_class(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version: 1 when flexible, else 0 (always 0 for ApiVersions)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _request_class(api_key).RESPONSE.is_flexible(api_version) else 0


def encode_request(
    request: Request, version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """The full frame for ``request`` in ``version``: size prefix, header, body."""
    buf = bytearray(_REQ_HEAD.pack(0, request.API_KEY, version, correlation_id))
    # ClientId is always a classic (int16-length) nullable string, even in header v2.
    write_str(buf, client_id, False, True, "client_id")
    if request.is_flexible(version):
        buf.append(0)  # header v2: empty tagged-field section
    request.encode_into(buf, version)
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    return bytes(buf)


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id at the start of a response frame (size prefix excluded)."""
    try:
        return int(_CORR.unpack_from(frame, 0)[0])
    except struct.error:
        raise ProtocolError(
            f"response frame of {len(frame)} bytes is too short for a correlation id"
        ) from None


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, version: int
) -> tuple[int, Response]:
    """Parse a response frame (size prefix excluded): header, then the body of the
    response to ``api_key`` at ``version``. Returns ``(correlation_id, response)``;
    ``records`` fields in the response are zero-copy views of ``frame``."""
    cls = _request_class(api_key).RESPONSE
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    correlation_id = peek_correlation_id(view)
    pos = 4
    if response_header_version(api_key, version) >= 1:
        try:
            _tags, pos = read_tags(view, pos)
        except (IndexError, ProtocolError) as exc:
            raise ProtocolError(
                f"cannot decode {cls.__name__} v{version} header "
                f"(correlation id {correlation_id}): {exc}"
            ) from None
    response, end = cls.decode_from(view, pos, version)
    if end != view.nbytes:
        raise ProtocolError(
            f"{cls.__name__} v{version} (correlation id {correlation_id}): "
            f"{view.nbytes - end} unexpected bytes after the response"
        )
    return correlation_id, response
