"""Record formats: round trips over every codec and magic, batch attributes,
concatenation, partial trailing batches, the builder and producer-state rewrite."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.proto import crc
from kpax.proto.errors import ConfigError, CorruptRecordError
from kpax.proto.records import (
    ABORT,
    COMMIT,
    BatchBuilder,
    ControlRecord,
    Record,
    RecordBatchV2,
    decode_batches,
    encode_batch,
    encode_columns,
    rewrite_producer_state,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
blob = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40)))
ts = st.integers(min_value=0, max_value=2**41)


@st.composite
def record_lists(draw: st.DrawFn, magic: int) -> list[Record]:
    n = draw(st.integers(min_value=1, max_value=40))
    base = draw(ts)
    recs = []
    for _ in range(n):
        recs.append(
            Record(
                draw(blob),
                key=draw(blob),
                headers=draw(st.lists(header, max_size=3)) if magic == 2 else None,
                timestamp=base + draw(st.integers(min_value=-5000, max_value=100_000)),
            )
        )
    return recs


def _expected_ts(magic: int, tstype: int, codec: str, recs: list[Record]) -> list[int]:
    if magic == 0:
        return [-1] * len(recs)
    # LOG_APPEND_TIME: v2 records and v1 inner records take the batch/wrapper timestamp
    if tstype == 1 and (magic == 2 or codec != "none"):
        return [max(r.timestamp for r in recs if r.timestamp is not None)] * len(recs)
    return [r.timestamp if r.timestamp is not None else -1 for r in recs]


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(magic: int, codec: str, data: st.DataObject) -> None:
    if codec == "zstd" and magic < 2:
        with pytest.raises(ConfigError):
            encode_batch([Record(b"v")], compression=codec, magic=magic)
        return
    recs = data.draw(record_lists(magic))
    base_offset = data.draw(st.integers(min_value=0, max_value=2**40))
    tstype = data.draw(st.sampled_from([0, 1])) if magic > 0 else 0
    txn = data.draw(st.booleans()) if magic == 2 else False
    pid = data.draw(st.integers(min_value=0, max_value=2**40)) if txn else -1
    raw = encode_batch(
        recs,
        base_offset=base_offset,
        compression=codec,
        magic=magic,
        timestamp_type=tstype,
        transactional=txn,
        producer_id=pid,
        producer_epoch=3 if txn else -1,
        base_sequence=7 if txn else -1,
        partition_leader_epoch=9 if magic == 2 else -1,
    )
    batches = list(decode_batches(raw, allow_partial=False))
    out = [r for b in batches for r in b]
    n = len(recs)
    assert [r.offset for r in out] == list(range(base_offset, base_offset + n))
    assert [r.key for r in out] == [r.key for r in recs]
    assert [r.value for r in out] == [r.value for r in recs]
    assert [r.timestamp for r in out] == _expected_ts(magic, tstype, codec, recs)
    assert [list(r.headers) for r in out] == [list(r.headers or ()) for r in recs]
    last = batches[-1]
    assert last.last_offset == base_offset + n - 1
    assert all(b.magic == magic and b.compression == codec for b in batches)
    if magic == 2:
        (b,) = batches
        assert len(b) == n and b.base_offset == base_offset and b.last_offset_delta == n - 1
        assert b.timestamp_type == tstype and b.is_transactional == txn and not b.is_control
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (
            (pid, 3, 7) if txn else (-1, -1, -1)
        )
        assert b.partition_leader_epoch == 9
        assert b.base_timestamp == recs[0].timestamp
        assert b.max_timestamp == max(r.timestamp for r in recs if r.timestamp is not None)
        assert b.crc == b.compute_crc() == crc.crc32c(raw[21:])
        offs, tss, keys, vals, hdrs = b.columns()
        assert offs == [r.offset for r in out] and vals == [r.value for r in out]
        assert tss == [r.timestamp for r in out] and keys == [r.key for r in out]
        assert hdrs == [r.headers for r in out]
        assert b.tuples() == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out]
    elif codec == "none":
        assert len(batches) == n
    else:
        assert len(batches) == 1 and len(batches[0]) == n


@given(st.lists(st.tuples(st.sampled_from(CODECS), st.integers(1, 20)), min_size=1, max_size=6))
@settings(max_examples=30, deadline=None)
def test_concatenated_batches_and_partial_tail(specs: list[tuple[str, int]]) -> None:
    chunks = []
    offset = 0
    for codec, n in specs:
        recs = [Record(b"v%d" % (offset + i), key=None, timestamp=1000 + i) for i in range(n)]
        chunks.append(encode_batch(recs, base_offset=offset, compression=codec))
        offset += n
    data = b"".join(chunks)
    assert [r.offset for b in decode_batches(data) for r in b] == list(range(offset))
    # every cut inside the last batch yields the whole batches before it
    whole = sum(n for _, n in specs[:-1])
    for cut in (1, 12, 17, 61, len(chunks[-1]) - 1):
        part = data[: len(data) - len(chunks[-1]) + min(cut, len(chunks[-1]) - 1)]
        assert sum(len(b) for b in decode_batches(part)) == whole
        with pytest.raises(CorruptRecordError, match="data ends inside a batch"):
            list(decode_batches(part, allow_partial=False))


def test_memoryview_input_and_empty() -> None:
    raw = encode_batch([Record(b"a", key=b"k", timestamp=5)])
    assert [r.value for b in decode_batches(memoryview(b"xx" + raw)[2:]) for r in b] == [b"a"]
    assert list(decode_batches(b"")) == []
    assert encode_batch([]) == b""


def test_no_timestamp_uses_base_timestamp() -> None:
    raw = encode_batch([Record(b"a"), Record(b"b", timestamp=10)], base_timestamp=7)
    assert [r.timestamp for b in decode_batches(raw) for r in b] == [7, 10]
    raw = encode_batch([Record(b"a")])
    assert [r.timestamp for b in decode_batches(raw) for r in b] == [-1]


def test_control_batch() -> None:
    raw = encode_batch(
        [ControlRecord(ABORT, 42, timestamp=1000)],
        base_offset=77,
        producer_id=5,
        producer_epoch=1,
        transactional=True,
    )
    (b,) = decode_batches(raw)
    assert b.is_control and b.is_transactional and b.producer_id == 5
    (rec,) = b
    assert isinstance(rec, ControlRecord)
    assert (rec.type, rec.coordinator_epoch, rec.version, rec.offset, rec.timestamp) == (
        ABORT, 42, 0, 77, 1000,
    )  # fmt: skip
    raw2 = encode_batch([ControlRecord(COMMIT, 1)], transactional=True, producer_id=5)
    assert next(iter(next(decode_batches(raw2)))).is_commit


def test_legacy_headers_refused() -> None:
    with pytest.raises(ConfigError, match="headers need record format v2"):
        encode_batch([Record(b"v", headers=[("h", b"x")])], magic=1)


def test_legacy_v1_relative_inner_offsets() -> None:
    recs = [Record(b"%d" % i, timestamp=100 + i) for i in range(5)]
    raw = encode_batch(recs, base_offset=1000, compression="gzip", magic=1)
    # wrapper offset is the last inner offset; inner offsets are 0..4
    assert struct.unpack_from(">q", raw)[0] == 1004
    (b,) = decode_batches(raw)
    assert [r.offset for r in b] == [1000, 1001, 1002, 1003, 1004]
    assert b.base_offset == 1000 and b.last_offset == 1004 and b.max_timestamp == 104
    raw0 = encode_batch(recs, base_offset=1000, compression="lz4", magic=0)
    assert [r.offset for b in decode_batches(raw0) for r in b] == [1000, 1001, 1002, 1003, 1004]


def test_builder() -> None:
    b = BatchBuilder(compression="lz4", magic=2, batch_size=1024)
    assert b.append(10, b"k", b"x" * 5000) == 0  # the first record always fits
    assert b.append(11, b"k", b"x") is None
    b = BatchBuilder(batch_size=1024)
    n = 0
    while (off := b.append(1000 + n, None, b"v" * 100, [("h", b"1")])) is not None:
        assert off == n
        n += 1
    assert n == b.record_count and 5 < n < 10
    raw = b.build(producer_id=9, producer_epoch=2, base_sequence=40, base_offset=0)
    assert len(raw) <= b.size_estimate <= 1024
    (batch,) = decode_batches(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 40)
    assert [r.offset for r in batch] == list(range(n))
    assert raw == encode_columns(
        [1000 + i for i in range(n)],
        [None] * n,
        [b"v" * 100] * n,
        [[("h", b"1")]] * n,
        producer_id=9,
        producer_epoch=2,
        base_sequence=40,
    )


def test_rewrite_producer_state() -> None:
    raw = encode_batch([Record(b"v", timestamp=1)], producer_id=1, producer_epoch=0)
    new = rewrite_producer_state(raw, 1, 1, 17)
    (b,) = decode_batches(new)  # CRC is validated
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1, 1, 17)
    assert new == encode_batch(
        [Record(b"v", timestamp=1)], producer_id=1, producer_epoch=1, base_sequence=17
    )
    with pytest.raises(CorruptRecordError):
        rewrite_producer_state(raw[:-1], 1, 1, 1)


def test_bad_crc() -> None:
    raw = bytearray(encode_batch([Record(b"value", timestamp=1)]))
    raw[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        list(decode_batches(bytes(raw)))
    # without validation the mismatch is not checked
    assert len(list(decode_batches(bytes(raw), validate_crc=False))) == 1
    legacy = bytearray(encode_batch([Record(b"value", timestamp=1)], magic=1))
    legacy[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC-32"):
        list(decode_batches(bytes(legacy)))


def test_bad_headers() -> None:
    raw = bytearray(encode_batch([Record(b"v", timestamp=1)]))
    raw[16] = 3
    with pytest.raises(CorruptRecordError, match="unknown magic 3"):
        list(decode_batches(bytes(raw)))
    raw[16] = 2
    struct.pack_into(">i", raw, 8, -5)
    with pytest.raises(CorruptRecordError, match="bad length -5"):
        list(decode_batches(bytes(raw)))
    raw = bytearray(encode_batch([Record(b"v", timestamp=1)]))
    struct.pack_into(">h", raw, 21, 7)  # codec 7
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 7"):
        list(decode_batches(bytes(raw), validate_crc=False))


def test_decompression_bomb_in_batch() -> None:
    raw = encode_batch([Record(b"\0" * (4 << 20), timestamp=1)], compression="gzip")
    assert len(raw) < 10_000
    (b,) = decode_batches(raw, max_decompressed_size=1 << 20)
    with pytest.raises(CorruptRecordError, match=r"batch at offset 0: gzip .* cap"):
        list(b)


def test_large_values_and_varints() -> None:
    recs = [
        Record(b"x" * 70_000, key=b"k" * 20_000, timestamp=2**40),
        Record(b"", key=b"", timestamp=0),
        Record(None, key=None, timestamp=2**40 + 10**9, headers=[("é", b"y" * 9000)]),
    ]
    raw = encode_batch(recs, base_offset=2**50)
    out = list(next(decode_batches(raw)))
    assert [(r.key, r.value, r.timestamp) for r in out] == [
        (r.key, r.value, r.timestamp) for r in recs
    ]
    assert out[2].headers == (("é", b"y" * 9000),)
    raw = encode_batch([Record(b"v", timestamp=i) for i in range(20_000)])
    assert [r.offset for r in next(decode_batches(raw))] == list(range(20_000))


def test_batch_object_header_only() -> None:
    raw = encode_batch([Record(b"a", timestamp=3), Record(b"b", timestamp=9)], base_offset=4)
    b = RecordBatchV2(raw, 0)
    assert (b.first_timestamp, b.max_timestamp, b.next_offset, b.size_in_bytes) == (
        3, 9, 6, len(raw),
    )  # fmt: skip
