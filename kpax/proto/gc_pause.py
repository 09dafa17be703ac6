"""Pausing Python's cyclic GC while many objects that cannot form a cycle are made.

Role: :class:`gc_paused`, the one way the record decoders (kpax.proto.records)
and the consumer's buffer and chunk decoder (kpax.consumer) pause the cyclic
GC. Building a batch's records allocates thousands of tuples, bytes and ints,
none of which can be part of a reference cycle; every few hundred allocations
start a young-generation pass that walks them all again, which costs more than
building them. The GC is paused only if it was enabled, and enabled again on
leaving (also on an error).

Imports: the standard library only.
"""

from __future__ import annotations

import gc
from types import TracebackType

__all__ = ["gc_paused"]


class gc_paused:
    """``with gc_paused(when):`` -- the cyclic GC paused inside (when ``when``)."""

    __slots__ = ("_paused",)

    def __init__(self, when: bool = True) -> None:
        self._paused = when and gc.isenabled()

    def __enter__(self) -> None:
        if self._paused:
            gc.disable()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._paused:
            gc.enable()
