"""Compression codecs of Kafka record batches: none, gzip, snappy, lz4, zstd.

Role: ``compress(codec, data, magic=2)`` and ``decompress(codec, data, max_size=...,
magic=2)`` for the codec ids of the batch attributes (0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd), written the way the Java client writes them:

- gzip: a gzip member (zlib, level 6 like java.util.zip's default). Decoding
  accepts concatenated members, as GZIPInputStream does.
- snappy: the xerial "snappy-java" stream framing (``\\x82SNAPPY\\x00``, version 1,
  compatible 1, then ``[u32 length][raw snappy block]`` of up to 32 KiB input each),
  which is what Kafka's Java client writes for every magic (it wraps
  ``org.xerial.snappy.SnappyOutputStream``). Decoding accepts the xerial framing
  and plain raw snappy (librdkafka and some old clients write raw).
- lz4: the LZ4 frame format as Kafka's KafkaLZ4BlockOutputStream writes it
  (64 KiB independent blocks, no block/content checksum). For magic 0 the frame
  header checksum is computed over the magic bytes too, reproducing the old
  Kafka bug KAFKA-3160; on decode that checksum is ignored for magic 0 and
  verified otherwise, like the Java client. Blocks are decoded one by one, so a
  frame with linked blocks (which Java cannot read either) is only accepted when
  small enough for a whole-frame decode to be safe.
- zstd: one zstd frame (cramjam); decoded with ``zstandard``'s streaming reader
  in bounded reads.

Decompression bombs: every decoder enforces ``max_size`` while it produces
output (snappy checks each block's declared length before decoding, lz4 bounds
each block to the frame's block size, gzip and zstd read in bounded steps), so
a small bad batch cannot allocate more than about ``max_size`` plus one block.
Exceeding it raises DecompressionLimitError (a CorruptRecordError), any malformed
input CorruptRecordError, both naming the codec.

lz4 frames are written by kpax.proto._speedups' own block compressor when the C
accelerator is built (the same frame layout; blocks that would not shrink are
stored), else around cramjam's. Their independent blocks are read by its block
decoder (``lz4_decode_blocks``: the whole block loop in one call, straight into
the output, the GIL kept below 256 KiB of frame), else block by block with
cramjam, which releases the GIL for every block: on a sync consumer's I/O
thread, each of a response's hundreds of small blocks then waited to take the
GIL back from the application's thread.

Imports: the standard library, cramjam, zstandard, kpax.proto.{accel,errors}.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Final

import cramjam

from kpax.proto.accel import speedups
from kpax.proto.errors import (
    ConfigError,
    CorruptRecordError,
    DecompressionLimitError,
    UnsupportedCodecError,
)

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "LZ4_FRAME_HEADER",
    "codec_id",
    "compress",
    "decompress",
]

CODEC_NONE: Final = 0
CODEC_GZIP: Final = 1
CODEC_SNAPPY: Final = 2
CODEC_LZ4: Final = 3
CODEC_ZSTD: Final = 4

#: Codec names by id (the names of the Java client's compression.type).
CODEC_NAMES: Final[tuple[str, ...]] = ("none", "gzip", "snappy", "lz4", "zstd")
_IDS: Final[dict[str, int]] = {name: i for i, name in enumerate(CODEC_NAMES)}

#: Default cap on the decompressed size of one batch (64 MiB) for direct callers of
#: this layer; the consumer passes its own (``max_decompressed_batch_bytes``).
DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024

GZIP_LEVEL: Final = 6
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_LZ4_BLOCK: Final = 64 * 1024
_LZ4_BLOCK_SIZES: Final = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LZ4_MAX_RATIO: Final = 256
_U32LE = struct.Struct("<I")
_U32BE = struct.Struct(">I")


def codec_id(name: str | None) -> int:
    """The codec id of a compression name (None, "none", "gzip", "snappy", "lz4", "zstd")."""
    if name is None:
        return CODEC_NONE
    try:
        return _IDS[name.lower()]
    except (KeyError, AttributeError):
        raise ConfigError(
            f"unknown compression type {name!r}: expected one of {', '.join(CODEC_NAMES)}"
        ) from None


# ------------------------------------------------------------------ xxhash32


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _xxh32_short(data: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: enough for an LZ4 frame descriptor."""
    assert len(data) < 16
    h = (_P5 + len(data)) & _M32
    i = 0
    n = len(data)
    while i + 4 <= n:
        h = (h + _U32LE.unpack_from(data, i)[0] * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# ------------------------------------------------------------------ compress


def _lz4_frame_header(broken_checksum: bool) -> bytes:
    """Magic, descriptor (version 01, independent blocks, 64 KiB blocks) and its
    checksum byte; v0 message sets checksum the magic too (Kafka's old bug)."""
    descriptor = b"\x60\x40"
    hc_input = _LZ4_MAGIC + descriptor if broken_checksum else descriptor
    return _LZ4_MAGIC + descriptor + bytes(((_xxh32_short(hc_input) >> 8) & 0xFF,))


_LZ4_HEADERS: Final = (_lz4_frame_header(False), _lz4_frame_header(True))
_LZ4_END: Final = b"\x00\x00\x00\x00"
#: The LZ4 frame header kpax writes for record format v1 and v2 (no block or
#: content checksums, 64 KiB independent blocks).
LZ4_FRAME_HEADER: Final = _LZ4_HEADERS[False]


def _lz4_compress(data: bytes, broken_checksum: bool) -> bytes:
    if speedups is not None:
        # C: its own block compressor, keeping the GIL for batch-sized data (the
        # producer seals a batch in the caller's thread: a release there hands
        # the GIL to the I/O thread mid-seal, which cost more than compressing)
        frame: bytes = speedups.lz4_frame(data, _LZ4_HEADERS[broken_checksum])
        return frame
    return _lz4_compress_py(data, broken_checksum)


def _lz4_compress_py(data: bytes, broken_checksum: bool) -> bytes:
    """The pure-Python frame around cramjam's block compressor (the reference)."""
    out = [_LZ4_HEADERS[broken_checksum]]
    view = memoryview(data)
    for start in range(0, len(data), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) >= len(chunk):
            out.append(_U32LE.pack(len(chunk) | 0x80000000))
            out.append(chunk)  # type: ignore[arg-type]  # (join takes any buffer)
        else:
            out.append(_U32LE.pack(len(block)))
            out.append(block)  # type: ignore[arg-type]
    out.append(_LZ4_END)
    return b"".join(out)


def _snappy_compress(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out.append(_U32BE.pack(len(block)))
        out.append(block)
    return b"".join(out)


def compress(codec: int, data: bytes, *, magic: int = 2) -> bytes:
    """Compress ``data`` with codec id ``codec`` as the Java client would for ``magic``."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == CODEC_SNAPPY:
        return _snappy_compress(data)
    if codec == CODEC_LZ4:
        return _lz4_compress(data, broken_checksum=magic == 0)
    if codec == CODEC_ZSTD:
        if magic < 2:
            raise ConfigError("zstd compression needs record format v2 (magic 2)")
        return bytes(cramjam.zstd.compress(data, level=3))
    raise ConfigError(f"unknown compression codec id {codec}")


# ---------------------------------------------------------------- decompress


def _too_big(codec: str, max_size: int) -> DecompressionLimitError:
    return DecompressionLimitError(
        f"{codec} data decompresses to more than the cap of {max_size} bytes "
        "(corrupt batch or decompression bomb)"
    )


def _gzip_decompress(data: bytes, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest = data
    while True:
        d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
        try:
            chunk = d.decompress(rest, max_size + 1 - total)
        except zlib.error as e:
            raise CorruptRecordError(f"gzip data is corrupt: {e}") from None
        total += len(chunk)
        parts.append(chunk)
        if total > max_size or d.unconsumed_tail:
            raise _too_big("gzip", max_size)
        if not d.eof:
            raise CorruptRecordError(f"gzip data is truncated ({len(data)} bytes in)")
        rest = d.unused_data
        if not rest.startswith(b"\x1f\x8b"):
            break
    return b"".join(parts)


def _snappy_raw(block: bytes | memoryview, budget: int, max_size: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:
        raise CorruptRecordError(f"snappy block header is corrupt: {e}") from None
    if size > budget:
        raise _too_big("snappy", max_size)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as e:
        raise CorruptRecordError(f"snappy data is corrupt: {e}") from None


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_raw(data, max_size, max_size)
    if len(data) < 16:
        raise CorruptRecordError(f"xerial snappy header truncated ({len(data)} bytes)")
    view = memoryview(data)
    parts: list[bytes] = []
    total = 0
    pos = 16
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError(f"xerial snappy block length truncated at byte {pos}")
        (size,) = _U32BE.unpack_from(data, pos)
        pos += 4
        if size > end - pos:
            raise CorruptRecordError(
                f"xerial snappy block at byte {pos - 4} claims {size} bytes, {end - pos} remain"
            )
        block = _snappy_raw(view[pos : pos + size], max_size - total, max_size)
        total += len(block)
        parts.append(block)
        pos += size
    return b"".join(parts)


def _lz4_decompress(data: bytes, max_size: int, magic: int) -> bytes:
    end = len(data)
    if end < 7 or not data.startswith(_LZ4_MAGIC):
        raise CorruptRecordError("lz4 data does not start with an LZ4 frame header")
    flg = data[4]
    bd = data[5]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"lz4 frame version {flg >> 6} is not supported (flags {flg:#x})")
    max_block = _LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
    if max_block is None:
        raise CorruptRecordError(f"lz4 frame has an invalid block size code ({bd:#x})")
    pos = 6
    if flg & 0x08:
        pos += 8  # content size
    if flg & 0x01:
        pos += 4  # dictionary id
    if pos >= end:
        raise CorruptRecordError("lz4 frame header truncated")
    if magic != 0:
        expect = (_xxh32_short(data[4:pos]) >> 8) & 0xFF
        if data[pos] != expect:
            raise CorruptRecordError(
                f"lz4 frame header checksum mismatch ({data[pos]:#x} != {expect:#x})"
            )
    pos += 1
    if not flg & 0x20:  # linked blocks: decode the frame whole when that is safe
        if end * _LZ4_MAX_RATIO > max_size:
            raise CorruptRecordError(
                "lz4 frame with linked blocks is too large to decode safely (Kafka writes "
                "independent blocks)"
            )
        fixed: bytes = data
        if magic == 0:
            hc = (_xxh32_short(data[4 : pos - 1]) >> 8) & 0xFF
            fixed = data[: pos - 1] + bytes((hc,)) + data[pos:]
        try:
            out = bytes(cramjam.lz4.decompress(fixed))
        except Exception as e:
            raise CorruptRecordError(f"lz4 data is corrupt: {e}") from None
        if len(out) > max_size:
            raise _too_big("lz4", max_size)
        return out
    block_checksum = 4 if flg & 0x10 else 0
    if speedups is not None:  # the block loop in C, the GIL kept for small frames
        blocks: bytes | None = speedups.lz4_decode_blocks(
            data, pos, max_block, block_checksum, max_size
        )
        if blocks is None:
            raise _too_big("lz4", max_size)
        return blocks
    view = memoryview(data)
    scratch = bytearray(max_block)
    result = bytearray()
    while True:
        if pos + 4 > end:
            raise CorruptRecordError(f"lz4 frame truncated at byte {pos} (no end mark)")
        (size,) = _U32LE.unpack_from(data, pos)
        pos += 4
        if size == 0:
            break
        raw = size & 0x80000000
        size &= 0x7FFFFFFF
        if size > max_block or size > end - pos:
            raise CorruptRecordError(
                f"lz4 block at byte {pos - 4} has a bad size {size} (max {max_block}, "
                f"{end - pos} bytes remain)"
            )
        if raw:
            result += view[pos : pos + size]
        else:
            try:
                n = cramjam.lz4.decompress_block_into(
                    view[pos : pos + size], scratch, output_len=max_block
                )
            except Exception as e:
                raise CorruptRecordError(f"lz4 block at byte {pos - 4} is corrupt: {e}") from None
            result += memoryview(scratch)[:n]
        if len(result) > max_size:
            raise _too_big("lz4", max_size)
        pos += size + block_checksum
    return bytes(result)


def _zstd_decompress(data: bytes, max_size: int) -> bytes:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        raise UnsupportedCodecError(
            "zstd batches need the 'zstandard' package (pip install zstandard)"
        ) from None
    try:
        hint = zstandard.frame_content_size(data)
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"zstd frame header is corrupt: {e}") from None
    if hint > max_size:
        raise _too_big("zstd", max_size)
    step = hint + 1 if hint >= 0 else max(4 * len(data), 1 << 16)
    parts: list[bytes] = []
    total = 0
    try:
        reader = _ZSTD_DCTX(zstandard).stream_reader(data, read_across_frames=True)
        while True:
            chunk = reader.read(min(step, max_size + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > max_size:
                raise _too_big("zstd", max_size)
            parts.append(chunk)
            step = min(step * 2, 1 << 24)
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"zstd data is corrupt: {e}") from None
    return b"".join(parts)


_dctx_cache: list[Any] = []


def _ZSTD_DCTX(zstandard: Any) -> Any:
    """One ZstdDecompressor per process (they are reusable for sequential use)."""
    if not _dctx_cache:
        _dctx_cache.append(zstandard.ZstdDecompressor())
    return _dctx_cache[0]


def decompress(
    codec: int,
    data: bytes | memoryview,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    magic: int = 2,
) -> bytes:
    """Decompress ``data`` of codec id ``codec``; at most ``max_size`` bytes of output.

    Raises CorruptRecordError for corrupt data or an unknown codec id, and
    DecompressionLimitError (a CorruptRecordError) for output above ``max_size``.
    """
    data = bytes(data)
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_GZIP:
        return _gzip_decompress(data, max_size)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == CODEC_LZ4:
        return _lz4_decompress(data, max_size, magic)
    if codec == CODEC_ZSTD:
        return _zstd_decompress(data, max_size)
    raise CorruptRecordError(f"unknown compression codec id {codec} in batch attributes")
