"""RecordBatch v2 (magic 2): the batch header, the record encoder and decoder.

Role: the hot paths of the record format. ``encode_records`` turns columns
(timestamps, keys, values, headers) into the records section of a batch and
``assemble_batch`` puts the 61-byte header and the CRC-32C in front of it;
``parse_records`` turns a records section back into one tuple
``(offset, timestamp, key, value, headers)`` per record; ``RecordBatchV2`` is
the decoded batch that the public ``decode_batches`` yields.

Two implementations of each loop: ``encode_records``, ``parse_records`` and
``parse_rows`` (the same with a row template, a fixed timestamp and a minimum
offset) are the C accelerator's (kpax.proto._speedups) when it is built, else
the pure-Python ``_py_*`` functions below, which stay the reference: same
inputs, outputs and errors (tests/unit/test_records_speedups.py holds them
together). With the accelerator, ``encode_batch`` does ``encode_records`` and
``assemble_batch`` of an uncompressed batch in one buffer (the producer
seals its batches with it); the record copy and the CRC release the GIL only
for batches of 256 KiB or more (a release costs more than a smaller copy).

Pure-Python hot-path design (measured with bench/proto.py):
- encoding is column-at-a-time with C-level iteration only: varints come from
  the lookup table ``ZZ_ENC`` via ``map(list.__getitem__, ...)``, each record
  body is one ``b"".join`` over a ``zip`` of the columns, and the batch is one
  more join over interleaved length prefixes and bodies. No Python-level loop
  runs per record unless a record needs it (null keys, headers, big values,
  timestamps far apart).
- decoding is one Python loop per batch with the 1- and 2-byte varints inlined
  through the tables ``ZZ_DEC1``/``ZZ_DEC2``; each record costs two slices and
  one tuple. Malformed input surfaces as IndexError (caught once per batch) or a
  failed length check, both reported as CorruptRecordError with the byte offset.

Batch layout (big-endian): baseOffset i64, batchLength i32, partitionLeaderEpoch
i32, magic i8, crc u32 (CRC-32C of everything after it), attributes i16,
lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64, producerId i64,
producerEpoch i16, baseSequence i32, recordCount i32, then the records
(compressed as one stream when the codec is not none).

Imports: the standard library and
kpax.proto.{accel,errors,crc,compression,gc_pause,varint,records.control}.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Any, Final, NamedTuple, TypeVar

from kpax.proto import crc as _crc
from kpax.proto import varint as _varint
from kpax.proto.accel import speedups
from kpax.proto.compression import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from kpax.proto.errors import CorruptRecordError
from kpax.proto.gc_pause import gc_paused
from kpax.proto.records.control import ControlRecord
from kpax.proto.varint import ZZ_TABLE_SIZE, decode_varint, encode_varint

_speedups: Any = speedups
_FIRST = itemgetter(0)

__all__ = [
    "HEADER",
    "HEADER_SIZE",
    "DecodedRecord",
    "Header",
    "RecordBatchV2",
    "RecordTuple",
    "assemble_batch",
    "encode_headers",
    "encode_batch",
    "encode_batch_lz4",
    "encode_records",
    "parse_records",
]

Header = tuple[str, bytes | None]
#: (offset, timestamp, key, value, headers) -- the bulk decoder's per-record row.
RecordTuple = tuple[int, int, bytes | None, bytes | None, Sequence[Header]]

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
_CRC_START: Final = 21  # attributes onwards
_CRC_AT: Final = 17
_U32 = struct.Struct(">I")
_NO_HEADERS: tuple[Header, ...] = ()

ATTR_CODEC_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20

_A0: list[bytes] = []  # record attributes byte + timestamp delta varint (built on first use)


def _a0() -> list[bytes]:
    if not _A0:
        _A0.extend(b"\x00" + v for v in _varint.ZZ_ENC)
    return _A0


# ------------------------------------------------------------------ encoding


def encode_headers(headers: Sequence[Header] | None) -> bytes:
    """The headers section of one record (count varint + key/value pairs)."""
    if not headers:
        return b"\x00"
    parts = [encode_varint(len(headers))]
    for hkey, hval in headers:
        kb = hkey.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(hval)))
            parts.append(hval)
    return b"".join(parts)


def _len_varints(
    blobs: Sequence[bytes | None],
) -> tuple[list[bytes], Sequence[bytes | None]]:
    """(length varints, data) of a key or value column; None encodes as length -1."""
    if None in blobs:
        lens = [encode_varint(len(b)) if b is not None else b"\x01" for b in blobs]
        return lens, [b if b is not None else b"" for b in blobs]
    try:
        return list(map(_varint.ZZ_ENC.__getitem__, map(len, blobs))), blobs  # type: ignore[arg-type]
    except IndexError:
        return [encode_varint(len(b)) for b in blobs], blobs  # type: ignore[arg-type]


def _py_encode_records(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Sequence[Header] | None] | None,
    base_timestamp: int,
) -> bytes:
    """The records section (uncompressed) of a v2 batch, offset deltas 0..n-1."""
    n = len(values)
    # attributes byte + timestamp delta
    if timestamps.count(base_timestamp) == n:
        tdv: Any = repeat(b"\x00\x00", n)
    else:
        deltas = [t - base_timestamp for t in timestamps]
        if min(deltas) >= 0 and max(deltas) < ZZ_TABLE_SIZE:
            tdv = map(_a0().__getitem__, deltas)
        else:
            tdv = [b"\x00" + encode_varint(d) for d in deltas]
    enc = _varint.ZZ_ENC
    odv = enc[:n] if n <= ZZ_TABLE_SIZE else [encode_varint(i) for i in range(n)]
    klv, kdata = _len_varints(keys)
    vlv, vdata = _len_varints(values)
    hv: Any = (
        map(encode_headers, headers) if headers is not None and any(headers) else repeat(b"\x00", n)
    )
    bodies = list(map(b"".join, zip(tdv, odv, klv, kdata, vlv, vdata, hv, strict=False)))
    try:
        lens = list(map(enc.__getitem__, map(len, bodies)))
    except IndexError:
        lens = [encode_varint(len(b)) for b in bodies]
    out: list[bytes] = [b""] * (2 * n)
    out[::2] = lens
    out[1::2] = bodies
    return b"".join(out)


def assemble_batch(
    records: bytes,
    *,
    count: int,
    base_offset: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Header + CRC-32C in front of an (already compressed) records section."""
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        header,
        0,
        base_offset,
        HEADER_SIZE - 12 + len(records),
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc32c = _crc.crc32c
    checksum = crc32c(records, crc32c(memoryview(header)[_CRC_START:]))
    _U32.pack_into(header, _CRC_AT, checksum)
    return b"".join((header, records))


# ------------------------------------------------------------------ decoding


def _parse_headers(buf: bytes, pos: int, where: int) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(buf, pos)
    if count < 0 or count > len(buf) - pos:
        raise CorruptRecordError(f"record at byte {where} has a bad header count {count}")
    out: list[Header] = []
    for _ in range(count):
        kl, pos = decode_varint(buf, pos)
        if kl < 0 or pos + kl > len(buf):
            raise CorruptRecordError(f"record at byte {where} has a bad header key length {kl}")
        try:
            hkey = buf[pos : pos + kl].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(
                f"record at byte {where} has a header key that is not UTF-8"
            ) from None
        pos += kl
        vl, pos = decode_varint(buf, pos)
        if vl < -1 or pos + vl > len(buf):
            raise CorruptRecordError(f"record at byte {where} has a bad header value length {vl}")
        if vl == -1:
            out.append((hkey, None))
        else:
            out.append((hkey, buf[pos : pos + vl]))
            pos += vl
    return tuple(out), pos


def _py_parse_records(  # noqa: PLR0917 - hot path, positional on purpose
    buf: bytes, pos: int, end: int, count: int, base_offset: int, base_timestamp: int
) -> list[RecordTuple]:
    """Decode ``count`` records from ``buf[pos:end]`` into (offset, ts, key, value, headers).

    The section must hold exactly ``count`` records. Raises CorruptRecordError.
    """
    d1 = _varint.ZZ_DEC1
    d2 = _varint.ZZ_DEC2
    nohdr = _NO_HEADERS
    out: list[RecordTuple] = []
    append = out.append
    start = pos
    # Only tuples of bytes and ints are made here, never a cycle: pausing the cyclic
    # GC for a large batch saves its young-generation passes over them (~6%).
    with gc_paused(count > 256):
        try:
            for _ in range(count):
                start = pos
                # record length
                b = buf[pos]
                if b < 0x80:
                    pos += 1
                    rec_end = pos + d1[b]
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        pos += 2
                        rec_end = pos + d2[c][b]
                    else:
                        ln, pos = decode_varint(buf, pos)
                        rec_end = pos + ln
                if rec_end > end or rec_end < pos + 6:
                    raise CorruptRecordError(
                        f"record at byte {start} has a bad length {rec_end - pos} "
                        f"({end - pos} bytes remain)"
                    )
                # attributes (unused), timestamp delta
                b = buf[pos + 1]
                if b < 0x80:
                    ts = base_timestamp + d1[b]
                    pos += 2
                else:
                    c = buf[pos + 2]
                    if c < 0x80:
                        ts = base_timestamp + d2[c][b]
                        pos += 3
                    else:
                        ts, pos = decode_varint(buf, pos + 1)
                        ts += base_timestamp
                # offset delta
                b = buf[pos]
                if b < 0x80:
                    off = base_offset + d1[b]
                    pos += 1
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        off = base_offset + d2[c][b]
                        pos += 2
                    else:
                        off, pos = decode_varint(buf, pos)
                        off += base_offset
                # key
                b = buf[pos]
                if b < 0x80:
                    kl = d1[b]
                    pos += 1
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        kl = d2[c][b]
                        pos += 2
                    else:
                        kl, pos = decode_varint(buf, pos)
                if kl >= 0:
                    key: bytes | None = buf[pos : pos + kl]
                    pos += kl
                elif kl == -1:
                    key = None
                else:
                    raise CorruptRecordError(f"record at byte {start} has a bad key length {kl}")
                # value
                b = buf[pos]
                if b < 0x80:
                    vl = d1[b]
                    pos += 1
                else:
                    c = buf[pos + 1]
                    if c < 0x80:
                        vl = d2[c][b]
                        pos += 2
                    else:
                        vl, pos = decode_varint(buf, pos)
                if vl >= 0:
                    value: bytes | None = buf[pos : pos + vl]
                    pos += vl
                elif vl == -1:
                    value = None
                else:
                    raise CorruptRecordError(f"record at byte {start} has a bad value length {vl}")
                # headers
                headers: Sequence[Header]
                if buf[pos]:
                    headers, pos = _parse_headers(buf, pos, start)
                else:
                    headers = nohdr
                    pos += 1
                if pos != rec_end:
                    raise CorruptRecordError(
                        f"record at byte {start}: its fields end at byte {pos}, its length "
                        f"says {rec_end}"
                    )
                append((off, ts, key, value, headers))
        except IndexError:
            raise CorruptRecordError(
                f"record at byte {start} runs past the end of its batch (byte {end})"
            ) from None
    if pos != end:
        raise CorruptRecordError(
            f"batch declares {count} records but {end - pos} bytes remain after them "
            f"(at byte {pos})"
        )
    return out


def _py_parse_rows(  # noqa: PLR0917 - same arguments as the C version
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    template: tuple[Any, ...] | None = None,
    slots: tuple[int, int, int, int, int] | None = None,
    timestamp: int | None = None,
    min_offset: int | None = None,
) -> list[Any]:
    """parse_records with the C version's options (see _speedups.pyi), in Python."""
    rows: list[Any] = _py_parse_records(buf, pos, end, count, base_offset, base_timestamp)
    if min_offset is not None and rows and min(map(_FIRST, rows)) < min_offset:
        rows = [r for r in rows if r[0] >= min_offset]
    if timestamp is not None:
        rows = [(r[0], timestamp, r[2], r[3], r[4]) for r in rows]
    if template is None:
        return rows
    assert slots is not None
    if not rows:
        return []
    # columns of the rows, the template's own values elsewhere: zipped and built in C
    columns: list[Any] = [repeat(v) for v in template]
    for i, col in zip(slots, zip(*rows, strict=True), strict=True):
        columns[i] = col
    return list(map(partial(tuple.__new__, type(template)), zip(*columns, strict=False)))


def _py_scan_records(  # noqa: PLR0917 - same arguments as the C version
    buf: bytes, pos: int, end: int, count: int, base_offset: int, min_offset: int | None = None
) -> int:
    """scan_records (see _speedups.pyi) in Python: parse_records' checks, the count kept."""
    rows = _py_parse_rows(buf, pos, end, count, base_offset, 0, None, None, None, min_offset)
    return len(rows)


#: Set KPAX_PURE_PYTHON=1 to run without the C accelerator (tests compare both).
SPEEDUPS: Final = _speedups is not None
encode_records = _py_encode_records if _speedups is None else _speedups.encode_records
#: A whole uncompressed batch in one C call (records, header, CRC; the copy and
#: the CRC without the GIL from 256 KiB), or None without the C module: encode_records +
#: assemble_batch then, the same bytes.
encode_batch: Any = None if _speedups is None else _speedups.encode_batch
#: The same for an lz4 batch (records, their LZ4 frame, header, CRC: one C call,
#: no intermediate Python objects), or None without the C module.
encode_batch_lz4: Any = None if _speedups is None else _speedups.encode_batch_lz4
parse_records = _py_parse_records if _speedups is None else _speedups.parse_records
#: parse_records with a row template, the timestamp override and min_offset (see _speedups.pyi).
parse_rows = _py_parse_rows if _speedups is None else _speedups.parse_records
#: parse_records' checks without building the records: how many are at or after min_offset.
scan_records = _py_scan_records if _speedups is None else _speedups.scan_records

_TupleT = TypeVar("_TupleT", bound=tuple[Any, ...])


def _py_untrack(t: _TupleT) -> _TupleT:
    return t


#: The cyclic GC stops tracking a tuple whose items cannot lead back to it (C), or
#: nothing (Python): see checked_rows.
untrack: Callable[[_TupleT], _TupleT] = _py_untrack if _speedups is None else _speedups.untrack


class DecodedRecord(NamedTuple):
    """One record of a decoded batch (the friendly iterator's item): a named tuple,
    so a whole batch of them is built by the record loop itself."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header]


#: Where parse_rows puts offset, timestamp, key, value and headers in a DecodedRecord.
_DECODED_SLOTS: Final = (0, 1, 3, 4, 5)
_DECODED_TEMPLATES: Final = tuple(DecodedRecord(0, 0, tt, None, None, ()) for tt in (0, 1))


class RecordBatchV2:
    """A decoded RecordBatch v2 header; its records are decoded on demand.

    Iterate for :class:`DecodedRecord` objects (:class:`ControlRecord` objects in
    a control batch), or call :meth:`tuples` / :meth:`columns` for the bulk paths.
    """

    __slots__ = (
        "_buf",
        "_end",
        "_max_size",
        "_start",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "checked",
        "count",
        "crc",
        "decompressed_size",
        "last_offset_delta",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
    )

    magic = 2
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    def __init__(self, buf: bytes, pos: int, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            _magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.count,
        ) = HEADER.unpack_from(buf, pos)
        self._buf = buf
        self._start = pos + HEADER_SIZE
        self._end = pos + 12 + self.batch_length
        self._max_size = max_size
        #: Bytes the records section decompressed to (0 until decoded, or uncompressed).
        self.decompressed_size = 0
        #: (min_offset, how many records are at or after it) when the records were
        #: scanned already (decode_batches' ``check_records``), else None.
        self.checked: tuple[int | None, int] | None = None
        if self.count < 0:
            raise CorruptRecordError(
                f"batch at offset {self.base_offset} (byte {pos}) has a negative record count"
            )
        if self.attributes & ATTR_CODEC_MASK > 4:
            raise CorruptRecordError(
                f"batch at offset {self.base_offset} (byte {pos}) has unknown compression codec "
                f"id {self.attributes & ATTR_CODEC_MASK}"
            )

    # -- header views
    @property
    def first_timestamp(self) -> int:
        return self.base_timestamp

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> str:
        return CODEC_NAMES[self.attributes & ATTR_CODEC_MASK]

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def size_in_bytes(self) -> int:
        return 12 + self.batch_length

    def __len__(self) -> int:
        return int(self.count)

    def compute_crc(self) -> int:
        """The CRC-32C of the batch as it is (compare with ``crc``)."""
        return _crc.crc32c(
            memoryview(self._buf)[self._start - HEADER_SIZE + _CRC_START : self._end]
        )

    def validate_crc(self) -> None:
        actual = self.compute_crc()
        if actual != self.crc:
            raise self._error(
                CorruptRecordError(
                    f"fails its CRC-32C check (stored {self.crc:#010x}, computed {actual:#010x})"
                ),
                sep=" ",
            )

    def _error(self, e: CorruptRecordError, sep: str = ": ") -> CorruptRecordError:
        """``e`` (of the same class) naming this batch, with its offset range."""
        err = type(e)(f"batch at offset {self.base_offset}{sep}{e.message}")
        err.offset = self.base_offset
        err.next_offset = self.next_offset
        return err

    # -- records
    def _section(self) -> tuple[bytes, int, int]:
        """(buffer, start, end) of the records section, decompressed if need be."""
        codec = self.attributes & ATTR_CODEC_MASK
        if not codec:
            return self._buf, self._start, self._end
        try:
            buf = decompress(
                codec, memoryview(self._buf)[self._start : self._end], max_size=self._max_size
            )
        except CorruptRecordError as e:
            raise self._error(e) from None
        self.decompressed_size = len(buf)
        return buf, 0, len(buf)

    def tuples(self) -> list[RecordTuple]:
        """Every record as ``(offset, timestamp, key, value, headers)``: the fastest path."""
        return self.rows()

    def rows(
        self,
        template: tuple[Any, ...] | None = None,
        slots: tuple[int, int, int, int, int] | None = None,
        min_offset: int | None = None,
    ) -> list[Any]:
        """The records as plain 5-tuples, or as copies of ``template`` (a tuple or
        NamedTuple) with offset, timestamp, key, value and headers put at the indexes
        ``slots``; offsets below ``min_offset`` skipped. LOG_APPEND_TIME batches give
        every record the batch's max timestamp (as Java does)."""
        buf, start, end = self._section()
        ts = self.max_timestamp if self.attributes & ATTR_TIMESTAMP_TYPE else None
        try:
            return parse_rows(
                buf,
                start,
                end,
                self.count,
                self.base_offset,
                self.base_timestamp,
                template,
                slots,
                ts,
                min_offset,
            )
        except CorruptRecordError as e:
            raise self._error(e) from None

    def checked_rows(
        self,
        template: tuple[Any, ...],
        slots: tuple[int, int, int, int, int],
        min_offset: int | None = None,
    ) -> tuple[int, tuple[Any, ...]]:
        """What :meth:`rows` would return, checked now and built later: (how many rows,
        the arguments of ``parse_rows`` that build them). The batch is decompressed
        and every record checked (the same CorruptRecordError as :meth:`rows`), but no
        record object is made: ``parse_rows(*args)`` makes them where they are read."""
        checked = self.checked
        if checked is not None and checked[0] == min_offset:  # scanned when framed
            buf, start, end, n = self._buf, self._start, self._end, checked[1]
        else:
            buf, start, end = self._section()
            try:
                n = scan_records(buf, start, end, self.count, self.base_offset, min_offset)
            except CorruptRecordError as e:
                raise self._error(e) from None
        ts = self.max_timestamp if self.attributes & ATTR_TIMESTAMP_TYPE else None
        args = (buf, start, end, self.count, self.base_offset, self.base_timestamp)
        # Kept until the records are read (milliseconds): untracked, the cyclic GC
        # does not walk them in its older generations (bytes, ints, the template).
        return n, untrack((*args, template, slots, ts, min_offset))

    def columns(
        self,
    ) -> tuple[
        list[int], list[int], list[bytes | None], list[bytes | None], list[Sequence[Header]]
    ]:
        """(offsets, timestamps, keys, values, headers) lists, e.g. for Arrow arrays."""
        rows = self.tuples()
        if not rows:
            return [], [], [], [], []
        o, t, k, v, h = zip(*rows, strict=True)
        return list(o), list(t), list(k), list(v), list(h)

    def __iter__(self) -> Iterator[Any]:
        if self.attributes & ATTR_CONTROL:
            for off, ts, key, value, _h in self.tuples():
                yield ControlRecord.decode(off, ts, key, value)
            return
        yield from self.rows(_DECODED_TEMPLATES[self.timestamp_type], _DECODED_SLOTS)

    def __repr__(self) -> str:
        return (
            f"RecordBatchV2(base_offset={self.base_offset}, count={self.count}, "
            f"compression={self.compression!r}, control={self.is_control}, "
            f"transactional={self.is_transactional})"
        )
