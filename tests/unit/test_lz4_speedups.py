"""kpax's own LZ4 block compressor (kpax.proto._speedups.lz4_frame) against
the reference: every frame it writes decodes, with liblz4 (the ``lz4``
package) and with kpax's decoder, to the input; the frame is laid out as the
cramjam-based reference writes it; and it compresses about as well."""

from __future__ import annotations

import random

import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.proto import compression as c
from kpax.proto.accel import speedups

pytestmark = pytest.mark.skipif(speedups is None, reason="C accelerator not built")


def _check(data: bytes) -> bytes:
    frame = c._lz4_compress(data, False)
    assert lz4.frame.decompress(frame) == data
    assert c.decompress(c.CODEC_LZ4, frame) == data
    return frame


# Inputs that exercise matches: few distinct bytes, repeats, runs longer than
# the 15 + 255*k length encodings, block boundaries (64 KiB).
_repetitive = st.builds(
    lambda alphabet, n, reps: bytes(random.Random(n).randrange(alphabet) for _ in range(n)) * reps,
    st.integers(1, 256),
    st.integers(0, 600),
    st.integers(1, 5),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=2000), _repetitive))
def test_every_frame_decodes_to_its_input(data: bytes) -> None:
    _check(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"a",
        bytes(12),
        bytes(13),
        bytes(65536),
        bytes(65537),
        b"x" * 300_000,  # several blocks, long match lengths
        random.Random(7).randbytes(70_000),  # incompressible: stored blocks
        b"ab" * 40 + random.Random(8).randbytes(65_000) + b"ab" * 40,
    ],
    ids=lambda d: f"{len(d)}B",
)
def test_edges(data: bytes) -> None:
    _check(data)


def test_incompressible_blocks_are_stored_as_the_reference_stores_them() -> None:
    data = random.Random(9).randbytes(100_000)
    assert c._lz4_compress(data, False) == c._lz4_compress_py(data, False)
    assert c._lz4_compress(data, True) == c._lz4_compress_py(data, True)  # KAFKA-3160 header


def test_compresses_records_about_as_well_as_liblz4() -> None:
    recs = b"".join(
        b'{"id": %d, "user": "user%d", "ts": 1700000000%03d}' % (i, i % 97, i % 1000)
        for i in range(2000)
    )
    ours, ref = len(c._lz4_compress(recs, False)), len(c._lz4_compress_py(recs, False))
    assert ours <= ref * 1.1, (ours, ref)


# ------------------------------------------------------------------ the C block decoder


def _python_loop(frame: bytes, max_size: int = 1 << 26) -> bytes:
    """The pure-Python block loop (cramjam per block): the reference."""
    saved = c.speedups
    c.speedups = None
    try:
        return c.decompress(c.CODEC_LZ4, frame, max_size=max_size)
    finally:
        c.speedups = saved


def _liblz4_frame(data: bytes, block_size: int, checksums: bool) -> bytes:
    return lz4.frame.compress(
        data,
        block_size=block_size,
        block_linked=False,
        block_checksum=checksums,
        content_checksum=checksums,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.binary(max_size=3000), _repetitive),
    st.sampled_from([lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB]),
    st.booleans(),
)
def test_the_c_block_decoder_reads_what_liblz4_and_kpax_write(
    data: bytes, block_size: int, checksums: bool
) -> None:
    for frame in (_liblz4_frame(data, block_size, checksums), c._lz4_compress(data, False)):
        assert c.decompress(c.CODEC_LZ4, frame) == data == _python_loop(frame)


def test_large_frames_decode_with_the_gil_released() -> None:
    rnd = random.Random(7)
    data = b"".join(rnd.choice([b"abc" * 50, rnd.randbytes(40)]) for _ in range(20_000))
    assert len(data) > 1 << 20
    for frame in (
        _liblz4_frame(data, lz4.frame.BLOCKSIZE_MAX64KB, True),
        c._lz4_compress(data, False),
    ):
        assert len(frame) >= 256 * 1024  # (the C loop releases the GIL from 256 KiB)
        assert c.decompress(c.CODEC_LZ4, frame) == data


def test_the_c_block_decoder_keeps_the_size_cap() -> None:
    data = b"x" * 100_000 + bytes(range(256)) * 100
    frame = c._lz4_compress(data, False)
    assert c.decompress(c.CODEC_LZ4, frame, max_size=len(data)) == data
    assert c.decompress(c.CODEC_LZ4, frame, max_size=2**63 - 1) == data  # no overflow
    for cap in (len(data) - 1, 70_000, 65_536, 1000, 0):
        with pytest.raises(c.DecompressionLimitError):
            c.decompress(c.CODEC_LZ4, frame, max_size=cap)
        with pytest.raises(c.DecompressionLimitError):
            _python_loop(frame, max_size=cap)


@settings(max_examples=1500, deadline=None)
@given(st.data())
def test_corrupt_frames_raise_corrupt_record_error_only(data: st.DataObject) -> None:
    """Fuzzed frames: bytes changed, cut, or inserted. The C decoder returns bytes or
    raises CorruptRecordError (or the size cap's error), never reads or writes out
    of bounds; where the cramjam loop also decodes the frame, both agree."""
    plain = data.draw(st.one_of(st.binary(min_size=1, max_size=800), _repetitive))
    frame = bytearray(
        data.draw(
            st.sampled_from(
                [
                    c._lz4_compress(plain, False),
                    _liblz4_frame(plain, lz4.frame.BLOCKSIZE_MAX64KB, True),
                ]
            )
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(7, max(7, len(frame) - 1)))
        kind = data.draw(st.sampled_from(["set", "cut", "insert"]))
        if kind == "set" and at < len(frame):
            frame[at] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del frame[at:]
        else:
            frame[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    cap = data.draw(st.sampled_from([1 << 20, len(plain), 64]))
    try:
        got = c.decompress(c.CODEC_LZ4, bytes(frame), max_size=cap)
    except (c.CorruptRecordError, c.DecompressionLimitError):
        return
    assert len(got) <= cap
    try:
        ref = _python_loop(bytes(frame), max_size=cap)
    except (c.CorruptRecordError, c.DecompressionLimitError):
        return
    assert got == ref
