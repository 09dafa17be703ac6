"""CRC-32C (RecordBatch v2) and CRC-32 (MessageSet v0/v1) checksums.

Role: ``crc32c(data) -> int`` and ``crc32(data) -> int`` over bytes-like data,
plus which backend computes each (``CRC32C_BACKEND``, ``CRC32_BACKEND``).

Backends:
- CRC-32C: the ``crc32c`` package (hardware SSE4.2/ARMv8 CRC instructions, with
  its own C software fallback) when installed, else ``crcmod``'s predefined
  ``'crc-32c'`` (a table-driven C extension). Both give identical values; the
  ``crc32c`` package measured ~60x faster on this machine (about 25 GB/s against
  0.42 GB/s over 1 MiB; ``bench/proto.py`` prints both), so it wins whenever it
  is installed. :func:`use_backend` switches explicitly.
- CRC-32: ``zlib.crc32`` (the standard library's C implementation; same values as
  crcmod's ``'crc-32'``, about 14x faster than it here, and always present).

Imports: the standard library, crcmod and (optionally) crc32c; nothing of kpax.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import crcmod.predefined

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
try:
    import crc32c as _crc32c_pkg

    _BACKENDS["crc32c"] = _crc32c_pkg.crc32c
except ImportError:  # pragma: no cover - depends on the environment
    pass

#: Name of the CRC-32 backend (always zlib).
CRC32_BACKEND = "zlib"
#: Name of the CRC-32C backend in use ("crc32c" or "crcmod").
CRC32C_BACKEND = "crc32c" if "crc32c" in _BACKENDS else "crcmod"

crc32c: _Crc = _BACKENDS[CRC32C_BACKEND]
"""CRC-32C (Castagnoli) of a bytes-like object, as an unsigned int."""

crc32: _Crc = zlib.crc32
"""CRC-32 (IEEE) of a bytes-like object, as an unsigned int."""


def available_backends() -> dict[str, _Crc]:
    """The CRC-32C functions that can be used here, by name."""
    return dict(_BACKENDS)


def use_backend(name: str) -> None:
    """Switch the CRC-32C backend ("crc32c" or "crcmod") for this process."""
    global crc32c, CRC32C_BACKEND
    if name not in _BACKENDS:
        raise ValueError(f"CRC-32C backend {name!r} is not available here: {sorted(_BACKENDS)}")
    CRC32C_BACKEND = name
    crc32c = _BACKENDS[name]
