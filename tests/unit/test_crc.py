"""CRC-32C and CRC-32: known check values, and every backend agrees."""

from __future__ import annotations

import os

import crcmod.predefined

from kpax.proto import crc


def test_check_values() -> None:
    assert crc.crc32c(b"123456789") == 0xE3069283
    assert crc.crc32(b"123456789") == 0xCBF43926
    assert crc.crc32c(b"") == 0


def test_backends_agree_and_continue() -> None:
    data = os.urandom(10_000)
    values = {name: f(data) for name, f in crc.available_backends().items()}
    assert set(values.values()) == {crc.crc32c(data)}
    assert crc.crc32(data) == crcmod.predefined.mkPredefinedCrcFun("crc-32")(data)
    # incremental form used by the batch encoder
    assert crc.crc32c(data[5000:], crc.crc32c(data[:5000])) == crc.crc32c(data)
    assert crc.crc32c(memoryview(data)[1:]) == crc.crc32c(data[1:])


def test_use_backend() -> None:
    before = crc.CRC32C_BACKEND
    try:
        crc.use_backend("crcmod")
        assert crc.CRC32C_BACKEND == "crcmod"
        assert crc.crc32c(b"123456789") == 0xE3069283
    finally:
        crc.use_backend(before)
    first = next(b for b in ("kpax", "crc32c", "crcmod") if b in crc.available_backends())
    assert first == crc.CRC32C_BACKEND


def test_the_accelerator_crc_at_every_length_and_alignment() -> None:
    """kpax's C CRC-32C (hardware instruction and table fallback) against crcmod,
    for lengths 0-80 at offsets 0-7 (the head/body/tail split of both loops)."""
    from kpax.proto.accel import speedups

    if speedups is None:
        assert "kpax" not in crc.available_backends()
        return
    ref = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    data = os.urandom(200)
    for off in range(8):
        for n in range(81):
            chunk = memoryview(data)[off : off + n]
            want = ref(bytes(chunk))
            assert speedups.crc32c(chunk) == want, (off, n)
            assert speedups.crc32c_software(chunk) == want, (off, n)
    big = os.urandom(1 << 20)
    assert speedups.crc32c(big) == speedups.crc32c_software(big) == ref(big)
    assert speedups.crc32c(big[7:], speedups.crc32c(big[:7])) == ref(big)


def test_the_hardware_crc_joins_its_three_streams_right() -> None:
    """The hardware CRC runs three streams over blocks of 3 x 4096 and 3 x 256 bytes
    and joins them: lengths at and around those blocks' edges, at every alignment,
    continued from a non-zero value, against crcmod."""
    from kpax.proto.accel import speedups

    if speedups is None:
        return
    ref = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    data = os.urandom(3 * 4096 * 2 + 3 * 256 * 3 + 64)
    edges = [3 * 256, 3 * 4096, 3 * 4096 + 3 * 256, 2 * 3 * 4096 + 2 * 3 * 256]
    lengths = sorted({e + d for e in edges for d in (-9, -8, -1, 0, 1, 7, 8, 9, 255, 256)})
    for off in range(8):
        for n in lengths:
            chunk = bytes(data[off : off + n])
            assert speedups.crc32c(chunk) == ref(chunk), (off, n)
            head = ref(data[:5])
            assert speedups.crc32c(chunk, head) == ref(data[:5] + chunk), (off, n)
