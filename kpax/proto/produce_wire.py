"""Produce requests and responses on the producer's hot path, without message objects.

Role: the producer sends one Produce request per ready set of batches, a few
thousand a second, and the general message classes (a dataclass per topic and
per partition, the generic encoder and decoder) cost more than the rest of
that path together. :func:`encode_produce` writes the whole request frame --
size prefix, header v1/v2, body -- straight from ``(topic, [(partition,
records)])`` tuples with one copy of the record bytes;
:func:`decode_produce_response` reads a response frame into flat tuples of
the fields a producer acts on. Versions 3 to 13, byte for byte the same as
``encode_request(ProduceRequest(...))`` and ``decode_response`` (the unit
tests compare them on random input); tagged fields are skipped.

Where the C accelerator is built (kpax.proto.accel), both run in C for the
well-formed common case; the Python functions (``py_encode_produce``,
``py_decode_produce_response``) stay the reference, give every error, and
take whatever C declines (the unit tests compare the two on random input).

Sans-I/O: pure functions on bytes.

Imports: the standard library and kpax.proto (accel, errors, primitives, varint) only.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from kpax.proto.accel import speedups
from kpax.proto.errors import InvalidMessageError, ProtocolError
from kpax.proto.primitives import read_uvarint
from kpax.proto.varint import encode_uvarint

__all__ = [
    "MAX_VERSION",
    "MIN_VERSION",
    "PartitionResult",
    "decode_produce_response",
    "encode_produce",
    "py_decode_produce_response",
    "py_encode_produce",
]

_c_encode = speedups.encode_produce if speedups is not None else None
_c_decode = speedups.decode_produce_response if speedups is not None else None

MIN_VERSION = 3
MAX_VERSION = 13
_FLEXIBLE = 9  # first flexible version (request header v2, response header v1)
_TOPIC_IDS = 13  # topics named by id

_HEAD = struct.Struct(">ihhi")  # size, api key (0), api version, correlation id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART = struct.Struct(">ihq")  # index, error code, base offset
_I64 = struct.Struct(">q")

#: One partition's answer: (topic, partition, error code, base offset,
#: log-append time or -1, error message or None). ``topic`` is the name, or for
#: v13 the topic id's 16 bytes (``uuid.UUID.bytes``).
PartitionResult = tuple[str | bytes, int, int, int, int, str | None]


def _classic_str(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise InvalidMessageError(f"string of {len(raw)} bytes is too long for int16 length")
    return _I16.pack(len(raw)) + raw


def encode_produce(  # noqa: PLR0917  (positional: hot path)
    version: int,
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[tuple[int, bytes | None]]]],
) -> bytes:
    """The whole Produce request frame (size prefix included) of ``version``.

    ``topics`` holds ``(topic, [(partition, records), ...])``: the topic's
    name, or from v13 on its id (a UUID)."""
    if _c_encode is not None:
        out = _c_encode(
            version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics
        )
        if out is not NotImplemented:
            return out  # type: ignore[no-any-return]
    return py_encode_produce(
        version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics
    )


def py_encode_produce(  # noqa: PLR0917
    version: int,
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[tuple[int, bytes | None]]]],
) -> bytes:
    """:func:`encode_produce` in Python: the reference."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise InvalidMessageError(f"Produce v{version}: kpax speaks v{MIN_VERSION}-v{MAX_VERSION}")
    flexible = version >= _FLEXIBLE
    parts: list[bytes] = [b"", _classic_str(client_id)]
    append = parts.append
    if flexible:
        append(b"\x00")  # header tagged fields
        if transactional_id is None:
            append(b"\x00")
        else:
            raw = transactional_id.encode()
            append(encode_uvarint(len(raw) + 1))
            append(raw)
    else:
        append(_classic_str(transactional_id))
    append(_ACKS_TIMEOUT.pack(acks, timeout_ms))
    append(encode_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for topic, partitions in topics:
        if version >= _TOPIC_IDS:
            if not isinstance(topic, uuid.UUID):
                raise InvalidMessageError(f"Produce v{version} names topics by id, not {topic!r}")
            append(topic.bytes)
        else:
            if not isinstance(topic, str):
                raise InvalidMessageError(f"Produce v{version} names topics by name, not {topic!r}")
            raw = topic.encode()
            if flexible:
                append(encode_uvarint(len(raw) + 1))
                append(raw)
            else:
                append(_I16.pack(len(raw)))
                append(raw)
        append(encode_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        for index, records in partitions:
            append(_I32.pack(index))
            if flexible:
                if records is None:
                    append(b"\x00")
                else:
                    append(encode_uvarint(len(records) + 1))
                    append(records)
                append(b"\x00")  # partition tagged fields
            elif records is None:
                append(b"\xff\xff\xff\xff")
            else:
                append(_I32.pack(len(records)))
                append(records)
        if flexible:
            append(b"\x00")  # topic tagged fields
    if flexible:
        append(b"\x00")  # request tagged fields
    size = sum(map(len, parts)) + 8  # + api key, version, correlation id
    parts[0] = _HEAD.pack(size, 0, version, correlation_id)
    return b"".join(parts)


class _Reader:
    """A cursor over a response frame (no per-field objects beyond the values)."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)  # type: ignore[arg-type]
        return value

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            self.pos += size
        if self.pos > len(self.buf):
            raise IndexError("tagged field past the end")

    def int32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def string(self, flexible: bool) -> str | None:
        if flexible:
            n = self.uvarint() - 1
        else:
            (n,) = _I16.unpack_from(self.buf, self.pos)
            self.pos += 2
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise IndexError("string past the end")
        raw = bytes(self.buf[self.pos : end])
        self.pos = end
        return raw.decode()

    def count(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            return 0  # a null array
        if n > len(self.buf) - self.pos:
            raise ProtocolError(f"array of {n} entries in a {len(self.buf)}-byte frame")
        return n


def decode_produce_response(
    frame: bytes | bytearray | memoryview, version: int
) -> tuple[int, list[PartitionResult]]:
    """``(throttle_time_ms, [PartitionResult, ...])`` from a Produce response
    frame of ``version`` (size prefix excluded; correlation id included).

    Per-record errors (``record_errors``, v8+) are folded into the error
    message when the broker sent no message of its own. Raises ProtocolError
    on truncated or malformed bytes."""
    if _c_decode is not None:
        out = _c_decode(frame, version)
        if out is not NotImplemented:
            return out  # type: ignore[no-any-return]
    return py_decode_produce_response(frame, version)


def py_decode_produce_response(
    frame: bytes | bytearray | memoryview, version: int
) -> tuple[int, list[PartitionResult]]:
    """:func:`decode_produce_response` in Python: the reference."""
    try:
        return _decode(frame, version)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(
            f"malformed Produce v{version} response of {len(frame)} bytes: {exc}"
        ) from None


def _decode(
    frame: bytes | bytearray | memoryview, version: int
) -> tuple[int, list[PartitionResult]]:
    flexible = version >= _FLEXIBLE
    r = _Reader(frame, 4)  # past the correlation id
    if flexible:
        r.skip_tags()  # response header v1
    by_id = version >= _TOPIC_IDS
    out: list[PartitionResult] = []
    buf = frame
    for _ in range(r.count(flexible)):
        topic: str | bytes
        if by_id:
            end = r.pos + 16
            if end > len(buf):
                raise IndexError("topic id past the end")
            topic = bytes(buf[r.pos : end])
            r.pos = end
        else:
            name = r.string(flexible)
            topic = "" if name is None else name
        for _ in range(r.count(flexible)):
            index, code, base_offset = _PART.unpack_from(buf, r.pos)
            r.pos += 14
            (log_append,) = _I64.unpack_from(buf, r.pos)
            r.pos += 16 if version >= 5 else 8  # + log_start_offset
            message: str | None = None
            if version >= 8:
                record_errors: list[str] | None = None
                n_errors = r.count(flexible)
                if n_errors:
                    record_errors = []
                    for _ in range(n_errors):
                        batch_index = r.int32()
                        text = r.string(flexible)
                        record_errors.append(f"record {batch_index}: {text or 'no message'}")
                        if flexible:
                            r.skip_tags()
                message = r.string(flexible)
                if message is None and record_errors:
                    message = "; ".join(record_errors)
            if flexible:
                r.skip_tags()  # current_leader (v10+) and any later tags
            out.append((topic, int(index), int(code), int(base_offset), int(log_append), message))
        if flexible:
            r.skip_tags()
    throttle = r.int32()
    if flexible:
        r.skip_tags()  # node_endpoints (v10+)
    if r.pos != len(buf):
        raise ProtocolError(f"Produce v{version} response has {len(buf) - r.pos} byte(s) left over")
    return throttle, out
