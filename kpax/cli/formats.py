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
from dataclasses import dataclass
from operator import attrgetter
from typing import IO, Any

from kpax.cli.errors import CommandError, UsageError

FORMATS = ("raw", "json", "msgpack")
_VALUE = attrgetter("value")
Headers = list[tuple[str, bytes | None]]


@dataclass
class InRecord:
    value: bytes | None
    key: bytes | None = None
    headers: Headers | None = None
    partition: int | None = None
    timestamp: int | None = None


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
    return {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "key": conv(rec.key),
        "value": conv(rec.value),
        "headers": [[k, conv(v)] for k, v in (rec.headers or ())],
    }


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
    return json.dumps(v, separators=(",", ":")).encode("utf-8")


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


def from_mapping(obj: Any, where: str) -> InRecord:
    if not isinstance(obj, dict):
        raise BadInput(
            f"{where}: expected an object with key/value/headers, got {type(obj).__name__}"
        )
    unknown = set(obj) - _FIELDS
    if unknown:
        raise BadInput(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    part, ts = obj.get("partition"), obj.get("timestamp")
    for name, v in (("partition", part), ("timestamp", ts)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise BadInput(f"{where}: {name} must be a non-negative integer, got {v!r}")
    return InRecord(
        value=_in_bytes(obj.get("value"), "value", where),
        key=_in_bytes(obj.get("key"), "key", where),
        headers=_in_headers(obj.get("headers"), where),
        partition=part,
        timestamp=ts,
    )


def read_json(stream: IO[bytes], errors: list[str], skip_bad: bool) -> Iterator[InRecord]:
    """Records from JSON lines; blank lines are skipped. A bad line raises
    BadInput naming its number, or is recorded in *errors* with ``skip_bad``."""
    for n, line in enumerate(stream, 1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadInput(f"{where}: malformed JSON ({exc})") from None
            rec = from_mapping(obj, where)
        except BadInput as exc:
            if not skip_bad:
                raise
            errors.append(str(exc))
            continue
        yield rec


def read_msgpack(stream: IO[bytes], errors: list[str], skip_bad: bool) -> Iterator[InRecord]:
    """Records from a msgpack stream of maps (or of bare bytes/str values)."""
    mp = _msgpack()
    unpacker = mp.Unpacker(stream, raw=False)
    n = 0
    while True:
        n += 1
        where = f"msgpack item {n}"
        try:
            obj = next(unpacker)
        except StopIteration:
            return
        except (ValueError, mp.exceptions.ExtraData, mp.exceptions.FormatError) as exc:
            raise BadInput(f"{where}: malformed msgpack ({exc})") from None
        try:
            if isinstance(obj, (bytes, str)):
                yield InRecord(value=_in_bytes(obj, "value", where))
            else:
                yield from_mapping(obj, where)
        except BadInput as exc:
            if not skip_bad:
                raise
            errors.append(str(exc))
