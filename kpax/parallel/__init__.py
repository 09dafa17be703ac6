"""kpax.parallel: process records concurrently beyond the partition count, in key order.

Role: ``kpax.ParallelConsumer`` (:mod:`~kpax.parallel.sync`) and
``kpax.aio.ParallelConsumer`` (:mod:`~kpax.parallel.client`), built on the
consumer's public API. The core is sans-I/O and deterministic
(:mod:`~kpax.parallel.codec`, :mod:`~kpax.parallel.offsets`,
:mod:`~kpax.parallel.schedule`, :mod:`~kpax.parallel.engine`: no asyncio, no
threads, time as an input); :mod:`~kpax.parallel.driver` runs it on asyncio.
See docs/parallel-consumer.md.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.parallel.client, kpax.parallel.sync, kpax.lazy_names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

if TYPE_CHECKING:
    from kpax.parallel.client import AsyncParallelConsumer
    from kpax.parallel.sync import ParallelConsumer

__all__ = [
    "AsyncParallelConsumer",
    "ParallelConsumer",
]

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "AsyncParallelConsumer": "kpax.parallel.client",
    "ParallelConsumer": "kpax.parallel.sync",
}


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
