"""Codecs: round trips, the formats other clients write, and the decompressed-size cap."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
import zstandard

from kpax.proto import compression as c
from kpax.proto.errors import ConfigError, CorruptRecordError

SAMPLES = [b"", b"x", b"hello kafka " * 1000, os.urandom(70_000) + b"\0" * 200_000]
CODECS = [c.CODEC_GZIP, c.CODEC_SNAPPY, c.CODEC_LZ4, c.CODEC_ZSTD]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_round_trip(codec: int, magic: int) -> None:
    if codec == c.CODEC_ZSTD and magic < 2:
        with pytest.raises(ConfigError):
            c.compress(codec, b"x", magic=magic)
        return
    for data in SAMPLES:
        assert c.decompress(codec, c.compress(codec, data, magic=magic), magic=magic) == data


def test_codec_names() -> None:
    assert [c.codec_id(n) for n in (None, "none", "gzip", "snappy", "lz4", "ZSTD")] == [
        0, 0, 1, 2, 3, 4,
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="unknown compression type 'brotli'"):
        c.codec_id("brotli")
    with pytest.raises(CorruptRecordError, match="codec id 6"):
        c.decompress(6, b"abc")


def test_snappy_writes_xerial_and_reads_raw() -> None:
    data = b"abc" * 50_000
    out = c.compress(c.CODEC_SNAPPY, data)
    assert out.startswith(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    assert c.decompress(c.CODEC_SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_reads_frames_of_other_writers() -> None:
    data = os.urandom(1000) * 100
    # cramjam/liblz4 default frame: linked blocks, checksums
    assert c.decompress(c.CODEC_LZ4, bytes(cramjam.lz4.compress(data))) == data


def test_lz4_kafka_3160_header_checksum() -> None:
    data = b"legacy" * 100
    v0 = c.compress(c.CODEC_LZ4, data, magic=0)
    v1 = c.compress(c.CODEC_LZ4, data, magic=1)
    assert v0[:6] == v1[:6] and v0[6] != v1[6]  # only the header checksum differs
    assert v0[7:] == v1[7:]
    assert c.decompress(c.CODEC_LZ4, v0, magic=0) == data
    with pytest.raises(CorruptRecordError, match="header checksum"):
        c.decompress(c.CODEC_LZ4, v0, magic=1)


def test_gzip_concatenated_members() -> None:
    assert c.decompress(c.CODEC_GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def _bombs() -> dict[int, bytes]:
    zeros = b"\0" * (8 << 20)
    return {
        c.CODEC_GZIP: c.compress(c.CODEC_GZIP, zeros),
        c.CODEC_SNAPPY: c.compress(c.CODEC_SNAPPY, zeros),
        c.CODEC_LZ4: c.compress(c.CODEC_LZ4, zeros),
        c.CODEC_ZSTD: c.compress(c.CODEC_ZSTD, zeros),
    }


@pytest.mark.parametrize("codec", CODECS)
def test_cap_enforced(codec: int) -> None:
    bomb = _bombs()[codec]
    assert len(bomb) < (1 << 20)
    with pytest.raises(CorruptRecordError, match="more than the cap of 1048576"):
        c.decompress(codec, bomb, max_size=1 << 20)
    assert len(c.decompress(codec, bomb, max_size=8 << 20)) == 8 << 20


def test_zstd_cap_without_content_size() -> None:
    # a streaming writer does not record the content size: the reads must stop at the cap
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * (32 << 20))
    assert zstandard.frame_content_size(bomb) == -1
    with pytest.raises(CorruptRecordError, match="more than the cap"):
        c.decompress(c.CODEC_ZSTD, bomb, max_size=1 << 20)


def test_raw_snappy_lying_header() -> None:
    # raw snappy starts with the uncompressed length: a huge claim is refused before allocating
    lie = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\0" * 10
    with pytest.raises(CorruptRecordError, match="more than the cap"):
        c.decompress(c.CODEC_SNAPPY, lie)


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_is_corrupt(codec: int) -> None:
    good = c.compress(codec, b"some data " * 100)
    for bad in (b"", b"\x00", good[: len(good) // 2], os.urandom(64), good[:4] + os.urandom(40)):
        try:
            c.decompress(codec, bad)
        except CorruptRecordError:
            pass
