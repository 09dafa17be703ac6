"""CRC-32C (RecordBatch v2) and CRC-32 (MessageSet v0/v1) checksums.

Role: ``crc32c(data) -> int`` and ``crc32(data) -> int`` over bytes-like data,
plus which backend computes each (``CRC32C_BACKEND``, ``CRC32_BACKEND``).

Backends (CRC-32C):
- ``kpax``: kpax's own C accelerator (kpax.proto._speedups, via kpax.proto.accel)
  when it is built: the CPU's SSE4.2 crc32 instruction, else slicing-by-8 tables.
  It is the default when present: about as fast as the ``crc32c`` package on
  batch-sized inputs, and it spares the ~30 ms that importing that package costs
  (it loads importlib.metadata), which every short-lived ``kpax`` command pays.
- ``crc32c``: the ``crc32c`` package (hardware SSE4.2/ARMv8 instructions, with its
  own C software fallback), when installed; imported only when kpax's own is not
  built, or when asked for (:func:`available_backends`, :func:`use_backend`).
- ``crcmod``: crcmod's predefined ``'crc-32c'`` (a table-driven C extension), the
  dependency the project started from and the last resort. All give identical
  values; ``bench/proto.py`` prints each one's speed (crcmod ~0.42 GB/s, the
  hardware ones 10-25 GB/s over 1 MiB here).
CRC-32 is ``zlib.crc32`` (the standard library's C implementation; same values as
crcmod's ``'crc-32'``, about 14x faster than it here, and always present).

Imports: the standard library, crcmod, kpax.proto.accel and (optionally) crc32c.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import crcmod.predefined

from kpax.proto.accel import speedups

__all__ = [
    "CRC32C_BACKEND",
    "CRC32_BACKEND",
    "available_backends",
    "crc32",
    "crc32c",
    "use_backend",
]

_Crc = Callable[..., int]

_crcmod_crc32c: _Crc = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

_BACKENDS: dict[str, _Crc] = {"crcmod": _crcmod_crc32c}
if speedups is not None:
    _BACKENDS["kpax"] = speedups.crc32c


def _load_crc32c_package() -> None:
    if "crc32c" in _BACKENDS:
        return
    try:
        import crc32c as _crc32c_pkg
    except ImportError:  # pragma: no cover - depends on the environment
        return
    _BACKENDS["crc32c"] = _crc32c_pkg.crc32c


if "kpax" not in _BACKENDS:
    _load_crc32c_package()

#: Name of the CRC-32 backend (always zlib).
CRC32_BACKEND = "zlib"
#: Name of the CRC-32C backend in use ("kpax", "crc32c" or "crcmod").
CRC32C_BACKEND: str = next(b for b in ("kpax", "crc32c", "crcmod") if b in _BACKENDS)

crc32c: _Crc = _BACKENDS[CRC32C_BACKEND]
"""CRC-32C (Castagnoli) of a bytes-like object, as an unsigned int."""

crc32: _Crc = zlib.crc32
"""CRC-32 (IEEE) of a bytes-like object, as an unsigned int."""


def available_backends() -> dict[str, _Crc]:
    """The CRC-32C functions that can be used here, by name."""
    _load_crc32c_package()
    return dict(_BACKENDS)


def use_backend(name: str) -> None:
    """Switch the CRC-32C backend ("kpax", "crc32c" or "crcmod") for this process."""
    global crc32c, CRC32C_BACKEND
    if name == "crc32c":
        _load_crc32c_package()
    if name not in _BACKENDS:
        raise ValueError(f"CRC-32C backend {name!r} is not available here: {sorted(_BACKENDS)}")
    CRC32C_BACKEND = name
    crc32c = _BACKENDS[name]
