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
