"""Seeded simulations (kpax.testing.sim): which seeds a run takes.

``SEEDS`` in the environment: ``N`` runs seeds 0..N-1, ``A:B`` seeds A..B-1,
``A,B,C`` those seeds (one seed: ``SEEDS=17,``). Unset, each file runs its
own default. A run depends on nothing else but ``PYTHONHASHSEED`` (the Makefile
sets 0), so a failing seed fails again the same way.
"""

from __future__ import annotations

import os


def seeds(default: int) -> list[int]:
    """The seeds to run (see the module docstring)."""
    spec = os.environ.get("SEEDS", "").strip()
    if not spec:
        return list(range(default))
    if "," in spec:
        return [int(s) for s in spec.split(",") if s.strip()]
    if ":" in spec:
        a, b = spec.split(":", 1)
        return list(range(int(a), int(b)))
    return list(range(int(spec)))
