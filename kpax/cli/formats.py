"""Record formats of `kpax produce` and `kpax consume`: raw, json, msgpack.

Role: turn input (lines, JSON lines, a msgpack stream) into :class:`InRecord`
and consumer records into output bytes. JSON bytes: UTF-8 text as a string,
anything else as ``{"base64": "..."}``; on input a key/value may also be any
other JSON value (object, number...), produced as its compact JSON text.
Headers are a list of ``[key, value]`` pairs (an object is accepted on input).
msgpack carries bytes as bytes (maps with the same field names).

Imports: kpax.cli.errors, the standard library; msgpack lazily.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import IO, Any

from kpax.cli.errors import CommandError, UsageError

FORMATS = ("raw", "json", "msgpack")
_VALUE = attrgetter("value")
Headers = list[tuple[str, bytes | None]]


#: The largest record timestamp (Kafka's int64) and partition number (int32).
MAX_TIMESTAMP = 2**63 - 1
MAX_PARTITION = 2**31 - 1
_LIMITS = {"2**63-1": MAX_TIMESTAMP, "2**31-1": MAX_PARTITION}


@dataclass
class InRecord:
    value: bytes | None
    key: bytes | None = None
    headers: Headers | None = None
    partition: int | None = None
    timestamp: int | None = None
    #: Where the record came from ("line 3", "msgpack item 7"), for error messages.
    where: str = field(default="", compare=False)


class BadInput(CommandError):
    """A malformed input record; ``where`` says which (line N / item N)."""


def _msgpack() -> Any:
    try:
        import msgpack
    except ImportError:
        raise UsageError(
            "--format msgpack needs the msgpack package: pip install kpax[msgpack]"
        ) from None
    return msgpack


# ------------------------------------------------------------------ output


def _jbytes(b: bytes | None) -> Any:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode("ascii")}


def record_dict(rec: Any, *, binary: bool) -> dict[str, Any]:
    conv = (lambda b: b) if binary else _jbytes
    out = {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "key": conv(rec.key),
        "value": conv(rec.value),
        "headers": [[k, conv(v)] for k, v in (rec.headers or ())],
    }
    count = getattr(rec, "delivery_count", None)  # a share group's record
    if count is not None:
        out["delivery_count"] = count
    return out


class Writer:
    """Writes consumer records to a binary stream in one format."""

    def __init__(self, out: IO[bytes], fmt: str, key_separator: bytes | None, sep: bytes) -> None:
        self.out = out
        self.fmt = fmt
        self.key_sep = key_separator
        self.sep = sep
        self._packer = _msgpack().Packer(use_bin_type=True) if fmt == "msgpack" else None

    def write(self, records: list[Any]) -> None:
        if self.fmt == "raw":
            sep = self.sep
            if self.key_sep is None:
                try:
                    data = sep.join(map(_VALUE, records))  # in C; fails on a null value
                except TypeError:
                    data = sep.join([r.value or b"" for r in records])
            else:
                ks = self.key_sep
                data = sep.join([(r.key or b"") + ks + (r.value or b"") for r in records])
            if records:
                self.out.write(data)  # not data + sep: that would copy the block again
                self.out.write(sep)
        elif self.fmt == "json":
            dumps = json.dumps
            lines = [dumps(record_dict(r, binary=False), ensure_ascii=False) for r in records]
            self.out.write(("\n".join(lines) + "\n").encode("utf-8"))
        else:
            assert self._packer is not None
            pack = self._packer.pack
            self.out.write(b"".join([pack(record_dict(r, binary=True)) for r in records]))


# ------------------------------------------------------------------ input


def _in_bytes(v: Any, field: str, where: str) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, dict) and set(v) == {"base64"}:
        try:
            return base64.b64decode(v["base64"], validate=True)
        except (ValueError, TypeError):
            raise BadInput(f"{where}: {field} has invalid base64") from None
    try:
        return json.dumps(v, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # msgpack ext types, nested bytes...
        raise BadInput(
            f"{where}: {field} of type {type(v).__name__} has no JSON text "
            "(give bytes, a string, or JSON data)"
        ) from None


def _in_headers(h: Any, where: str) -> Headers | None:
    if h is None:
        return None
    if isinstance(h, dict):
        h = list(h.items())
    if not isinstance(h, list):
        raise BadInput(f"{where}: headers must be a list of [key, value] pairs or an object")
    out: Headers = []
    for item in h:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
            raise BadInput(f"{where}: header {item!r} is not a [key, value] pair")
        out.append((item[0], _in_bytes(item[1], f"header {item[0]!r}", where)))
    return out


_FIELDS = {"key", "value", "headers", "partition", "timestamp", "topic", "offset"}


def _in_int(v: Any, name: str, top: str, what: str, where: str) -> int | None:
    """An integer field in 0..eval(top) (None if absent); else BadInput naming the field."""
    if v is None:
        return None
    if type(v) is not int:  # not bool, float (1.7e12), str ("5") or a msgpack Timestamp
        raise BadInput(
            f"{where}: {name} must be an integer ({what}), got {type(v).__name__} {_short(v)}"
        )
    if not 0 <= v <= _LIMITS[top]:
        raise BadInput(f"{where}: {name} {_short(v)} is out of range ({what}, 0 to {top})")
    return v


def _short(v: Any) -> str:
    return _clip(repr(v), 40)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def from_mapping(obj: Any, where: str, partitions: int | None = None) -> InRecord:
    """A record from a JSON object / msgpack map; ``partitions``: the topic's
    partition count, to refuse a ``partition`` it does not have."""
    if not isinstance(obj, dict):
        raise BadInput(
            f"{where}: expected an object with key/value/headers, got {type(obj).__name__}"
        )
    unknown = set(obj) - _FIELDS
    if unknown:
        raise BadInput(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    part = _in_int(obj.get("partition"), "partition", "2**31-1", "a partition number", where)
    ts = _in_int(
        obj.get("timestamp"), "timestamp", "2**63-1", "milliseconds since the epoch", where
    )
    if part is not None and partitions is not None and part >= partitions:
        raise BadInput(
            f"{where}: the topic has no partition {part} (partitions 0..{partitions - 1})"
        )
    return InRecord(
        value=_in_bytes(obj.get("value"), "value", where),
        key=_in_bytes(obj.get("key"), "key", where),
        headers=_in_headers(obj.get("headers"), where),
        partition=part,
        timestamp=ts,
        where=where,
    )


def read_json(
    stream: IO[bytes], errors: list[str], skip_bad: bool, partitions: int | None = None
) -> Iterator[InRecord]:
    """Records from JSON lines; blank lines are skipped. A bad line raises
    BadInput naming its number, or is recorded in *errors* with ``skip_bad``."""
    for n, line in enumerate(stream, 1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise BadInput(f"{where}: malformed JSON ({_clip(str(exc))})") from None
            rec = from_mapping(obj, where, partitions)
        except BadInput as exc:
            if not skip_bad:
                raise
            errors.append(str(exc))
            continue
        yield rec


def read_msgpack(
    stream: IO[bytes], errors: list[str], skip_bad: bool, partitions: int | None = None
) -> Iterator[InRecord]:
    """Records from a msgpack stream of maps (or of bare bytes/str values).

    A map that is not a valid record is skipped with ``skip_bad``; bytes that
    are not msgpack, or an input that ends inside an item (truncated), stop
    the run naming the item: the stream cannot be resynchronised."""
    mp = _msgpack()
    unpacker = mp.Unpacker(raw=False)
    read = getattr(stream, "read1", stream.read)
    fed = consumed = n = 0
    while True:
        data = read(1 << 20)
        if not data:
            if consumed < fed:
                raise BadInput(
                    f"msgpack item {n + 1}: truncated (the input ends {fed - consumed:,} "
                    "bytes into it)"
                )
            return
        try:
            unpacker.feed(data)
        except mp.exceptions.BufferFull:
            raise BadInput(f"msgpack item {n + 1}: larger than msgpack's buffer limit") from None
        fed += len(data)
        while True:
            where = f"msgpack item {n + 1}"
            try:
                obj = unpacker.unpack()
            except mp.exceptions.OutOfData:
                break  # the item continues in the next block (or is truncated)
            except (ValueError, TypeError, mp.exceptions.UnpackException) as exc:
                why = _clip(str(exc)) or type(exc).__name__
                raise BadInput(f"{where}: malformed msgpack ({why})") from None
            n += 1
            consumed = unpacker.tell()
            try:
                if isinstance(obj, (bytes, str)):
                    yield InRecord(value=_in_bytes(obj, "value", where), where=where)
                else:
                    yield from_mapping(obj, where, partitions)
            except BadInput as exc:
                if not skip_bad:
                    raise
                errors.append(str(exc))
