"""The records consumers return: :class:`ConsumerRecord`, :class:`ShareConsumerRecord`.

Role: a named tuple (cheap to build in bulk from the decoders' columns:
``map(partial(tuple.__new__, ConsumerRecord), zip(...))`` builds records in C,
with no Python call per record). With the C accelerator, both types are adopted
by it as soon as they are made (``adopt_record``): their fields are read as
directly as ``__slots__`` attributes and freed records are kept for reuse;
they stay NamedTuples in every other way.

Imports: the standard library, kpax.proto.accel.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kpax.proto.accel import speedups

__all__ = ["ConsumerRecord", "ShareConsumerRecord"]


class ConsumerRecord(NamedTuple):
    """One record read from a partition.

    ``timestamp_type`` is 0 (create time), 1 (log append time) or -1 (none);
    ``headers`` a tuple of ``(str, bytes | None)`` pairs; ``leader_epoch`` the
    partition leader epoch the record was written in (-1 if unknown). ``key``
    and ``value`` are bytes (or None) unless deserializers are configured.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int


class ShareConsumerRecord(NamedTuple):
    """One record a share consumer acquired: the fields of :class:`ConsumerRecord`
    plus ``delivery_count``, how many times the share group has delivered it
    (1 the first time; more after a release, a lock timeout or a member's end)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int
    delivery_count: int


def _adopt_subclass(cls: type[tuple[Any, ...]]) -> None:
    """A subclass's instances get the item slots their fields are read from."""
    assert speedups is not None
    speedups.adopt_record(cls, len(cls._fields))  # type: ignore[attr-defined]


if speedups is not None:  # cheaper to build, read and free (see adopt_record in _speedups.c)
    for _cls in (ConsumerRecord, ShareConsumerRecord):
        speedups.adopt_record(_cls, len(_cls._fields))
        _cls.__init_subclass__ = classmethod(_adopt_subclass)  # type: ignore[assignment,method-assign]
