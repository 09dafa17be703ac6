"""Record batches cross between kpax and the record code of kafka-python and
aiokafka (its C extension): theirs decode in kpax, kpax's decode in theirs,
for RecordBatch v2 and MessageSet v0/v1 and every codec each library supports."""

from __future__ import annotations

import aiokafka.codec
import aiokafka.record.default_records as aio_default
import aiokafka.record.legacy_records as aio_legacy
import kafka.codec
import pytest
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from kpax.proto.records import Record, decode_batches, encode_batch

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _supported(mod: object) -> list[str]:
    checks = {"gzip": "has_gzip", "snappy": "has_snappy", "lz4": "has_lz4", "zstd": "has_zstd"}
    return ["none"] + [c for c, f in checks.items() if getattr(mod, f)()]


LIBS = {
    "kafka-python": (KpDefaultBuilder, KpLegacyBuilder, KpMemoryRecords, _supported(kafka.codec)),
    "aiokafka": (
        aio_default.DefaultRecordBatchBuilder,
        aio_legacy.LegacyRecordBatchBuilder,
        AioMemoryRecords,
        _supported(aiokafka.codec),
    ),
}
CASES = [
    (lib, magic, codec)
    for lib, (_, _, _, codecs) in LIBS.items()
    for magic in (0, 1, 2)
    for codec in codecs
    if not (codec == "zstd" and magic < 2)
    # kafka-python writes magic-0 lz4 (KAFKA-3160 header) only with the xxhash package
    and not (lib == "kafka-python" and magic == 0 and codec == "lz4" and kafka.codec.xxhash is None)
    # aiokafka refuses lz4 in magic 0 both ways ("not supported for broker version 0.8/0.9")
    and not (lib == "aiokafka" and magic == 0 and codec == "lz4")
]


def _records(magic: int) -> list[Record]:
    out = []
    for i in range(50):
        out.append(
            Record(
                None if i % 7 == 3 else b"value-%d-" % i + b"x" * (i * 13),
                key=None if i % 5 == 0 else b"key-%d" % i,
                headers=[("trace", b"t%d" % i), ("empty", None)] if magic == 2 and i % 2 else [],
                timestamp=1_700_000_000_000 + i * 7,
            )
        )
    return out


def _expected(magic: int, base: int, recs: list[Record]) -> list[tuple[object, ...]]:
    return [
        (
            base + i,
            r.timestamp if magic > 0 else None,
            r.key,
            r.value,
            [(k, v) for k, v in (r.headers or [])],
        )
        for i, r in enumerate(recs)
    ]


def _their_build(lib: str, magic: int, codec: str, base: int, recs: list[Record]) -> bytes:
    default_cls, legacy_cls, _, _ = LIBS[lib]
    cid = CODEC_IDS[codec]
    if magic == 2:
        builder = default_cls(
            magic=2,
            compression_type=cid,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=10**8,
        )
        for i, r in enumerate(recs):
            builder.append(
                i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers or [])
            )
        data = bytearray(builder.build())
        data[0:8] = base.to_bytes(8, "big")  # base offset is outside the CRC
        return bytes(data)
    builder = legacy_cls(magic=magic, compression_type=cid, batch_size=10**8)
    for i, r in enumerate(recs):
        builder.append(base + i, timestamp=r.timestamp, key=r.key, value=r.value)
    data = bytearray(builder.build())
    if codec != "none":
        # producers leave the wrapper offset at 0; the broker sets it to the last inner offset
        data[0:8] = (base + len(recs) - 1).to_bytes(8, "big")
    return bytes(data)


def _their_read(lib: str, data: bytes) -> list[tuple[object, ...]]:
    _, _, mr_cls, _ = LIBS[lib]
    mr = mr_cls(data)
    out = []
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            hdrs = list(getattr(r, "headers", []) or [])
            ts = r.timestamp if r.timestamp not in (None, -1) else None
            out.append((r.offset, ts, r.key, r.value, [(k, v) for k, v in hdrs]))
    return out


@pytest.mark.parametrize(("lib", "magic", "codec"), CASES)
def test_theirs_decode_in_kpax(lib: str, magic: int, codec: str) -> None:
    recs = _records(magic)
    base = 500 if magic == 2 else 0  # producers write legacy sets from offset 0
    data = _their_build(lib, magic, codec, base, recs)
    batches = list(decode_batches(data, allow_partial=False))
    got = [
        (
            r.offset,
            r.timestamp if magic > 0 else None,
            r.key,
            r.value,
            list(r.headers),
        )
        for b in batches
        for r in b
    ]
    assert got == _expected(magic, base, recs)
    assert {b.compression for b in batches} == {codec}


@pytest.mark.parametrize(("lib", "magic", "codec"), CASES)
def test_kpax_decodes_in_theirs(lib: str, magic: int, codec: str) -> None:
    recs = _records(magic)
    data = encode_batch(recs, base_offset=1000, compression=codec, magic=magic)
    assert _their_read(lib, data) == _expected(magic, 1000, recs)


def test_cases_cover_every_codec() -> None:
    # aiokafka supports every codec here; kafka-python lacks snappy without python-snappy
    assert {c for lib, _, c in CASES if lib == "aiokafka"} == set(CODEC_IDS)
    assert {c for lib, m, c in CASES if lib == "kafka-python" and m == 2} >= {
        "none",
        "gzip",
        "zstd",
    }
