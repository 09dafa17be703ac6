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
