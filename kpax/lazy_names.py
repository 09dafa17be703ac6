"""A package's public names imported on first use (PEP 562).

Role: :func:`lazy_names` gives a package the ``__getattr__`` and ``__dir__``
that import each public name from its module the first time it is read (then
it is a plain global of the package), so that importing one light module of
the package (an option table, say) does not load the rest. Each lazy package
also imports the names under ``TYPE_CHECKING`` and assigns ``__getattr__``
only ``if not TYPE_CHECKING``, so type checkers still report a misspelt name.
(:mod:`kpax.proto`'s packages keep their own copy: that layer imports nothing
else of kpax.)

Imports: the standard library only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``), whose public
    ``names`` map each name to the module it is imported from."""
    namespace = vars(sys.modules[package])

    def load(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted(set(namespace) | set(names))

    return load, listing
