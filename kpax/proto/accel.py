"""The optional C accelerator, loaded once: ``speedups`` is the module or None.

Role: kpax.proto._speedups (built from _speedups.c when kpax is installed with a
C compiler at hand) holds C versions of the RecordBatch v2 record loops and of
CRC-32C. Every user of it keeps a pure-Python equivalent that gives the same
results; ``KPAX_PURE_PYTHON=1`` in the environment (read once, at import) makes
kpax use those even when the accelerator is built.

Imports: the standard library; kpax.proto._speedups when present.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["PURE_PYTHON_REQUESTED", "speedups"]

#: True when KPAX_PURE_PYTHON asked for the pure-Python code paths.
PURE_PYTHON_REQUESTED = os.environ.get("KPAX_PURE_PYTHON", "") not in ("", "0")

speedups: ModuleType | None = None
if not PURE_PYTHON_REQUESTED:
    try:
        from kpax.proto import _speedups as speedups
    except ImportError:  # built without a compiler: the pure-Python code paths
        speedups = None
