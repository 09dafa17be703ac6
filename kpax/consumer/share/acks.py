"""Share-group acknowledgements: the types, and offsets turned into the wire's batches.

Role: pure functions and small data classes, no I/O. :class:`AcknowledgeType`
is what the application passes to ``acknowledge`` (the Java client's ids:
ACCEPT 1, RELEASE 2, REJECT 3, RENEW 4); ``GAP`` (0) is what the consumer
itself sends for acquired offsets that hold no record the application can
see (control records, compacted away). :func:`ack_batches` turns one
partition's ``{offset: type}`` into the AcknowledgementBatches of ShareFetch
and ShareAcknowledge: consecutive offsets form one batch; a batch whose
offsets share one type carries that type once, else one type per offset.

:class:`HandOut` is the bookkeeping behind implicit acknowledgement and
``close``: the records the last poll handed to the application, as
``(chunk, start, end)`` slices of the acquired chunks, and how many of them
the application has moved past. A poll or a commit accepts them all (the
application asked for more, or said it is done); an iterator that stops
part-way through a batch gives back the records it never handed out;
``close`` accepts only what was moved past and releases the rest.

Imports: the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

__all__ = [
    "GAP",
    "AcknowledgeType",
    "HandOut",
    "ack_batches",
    "parse_ack_type",
    "split_slices",
]

#: The acknowledge type of an acquired offset with no record to show.
GAP = 0


class AcknowledgeType(enum.IntEnum):
    """How a share consumer acknowledges a record it was given."""

    #: Processed: the record is done for the group.
    ACCEPT = 1
    #: Not processed: deliver it again (to any member), counting the delivery.
    RELEASE = 2
    #: Not processable: never deliver it again (archived).
    REJECT = 3
    #: Still processing: extend the acquisition lock; acknowledge it again later.
    RENEW = 4

    def __str__(self) -> str:
        return self.name.lower()


def parse_ack_type(value: object) -> AcknowledgeType:
    """``value`` as an :class:`AcknowledgeType`: the member itself, its name in any
    case ("accept") or its id (1-4); ValueError naming the choices otherwise."""
    if isinstance(value, AcknowledgeType):
        return value
    if isinstance(value, str):
        try:
            return AcknowledgeType[value.strip().upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return AcknowledgeType(value)
        except ValueError:
            pass
    choices = ", ".join(t.name for t in AcknowledgeType)
    raise ValueError(f"unknown acknowledge type {value!r}: one of {choices}")


def ack_batches(acks: Mapping[int, int]) -> list[tuple[int, int, list[int]]]:
    """``{offset: type}`` as ``(first_offset, last_offset, types)`` batches in offset
    order: one batch per run of consecutive offsets; ``types`` holds one type
    when the whole run has it, else one type per offset of the run."""
    out: list[tuple[int, int, list[int]]] = []
    first = last = -2
    types: list[int] = []
    for offset in sorted(acks):
        kind = acks[offset]
        if offset == last + 1:
            last = offset
            types.append(kind)
            continue
        if types:
            out.append(_batch(first, last, types))
        first = last = offset
        types = [kind]
    if types:
        out.append(_batch(first, last, types))
    return out


def _batch(first: int, last: int, types: list[int]) -> tuple[int, int, list[int]]:
    kind = types[0]
    if all(t == kind for t in types):
        return first, last, [kind]
    return first, last, types


class _Record(Protocol):
    @property
    def offset(self) -> int: ...


class _Chunk(Protocol):
    """Acquired records of one partition from one broker (the fetcher's ``Chunk``)."""

    @property
    def node(self) -> int: ...
    @property
    def tp(self) -> Hashable: ...
    @property
    def records(self) -> Sequence[_Record]: ...


C = TypeVar("C", bound=_Chunk)

#: ``(node, partition, {offset: type})``: acknowledgements for one broker's partition.
NodeAcks = tuple[int, Hashable, dict[int, int]]


def split_slices(
    slices: Sequence[tuple[C, int, int]], count: int
) -> tuple[list[tuple[C, int, int]], list[tuple[C, int, int]]]:
    """``slices`` (``(chunk, start, end)``, in order) cut after their first ``count``
    records: (the slices of those, the slices of the rest); empty slices are left out."""
    head: list[tuple[C, int, int]] = []
    tail: list[tuple[C, int, int]] = []
    left = max(count, 0)
    for chunk, start, end in slices:
        if left >= end - start:
            head.append((chunk, start, end))
            left -= end - start
        elif left > 0:
            head.append((chunk, start, start + left))
            tail.append((chunk, start + left, end))
            left = 0
        else:
            tail.append((chunk, start, end))
    return head, tail


class HandOut(Generic[C]):
    """The records the last poll handed to the application and how many it moved past
    (see the module docstring). Sans I/O: the client queues what :meth:`settle`
    returns and puts back in its buffer what :meth:`iterated` returns."""

    def __init__(self) -> None:
        #: ``(chunk, start, end)``: ``chunk.records[start:end]`` were handed out, in order.
        self.slices: list[tuple[C, int, int]] = []
        #: How many of them (from the first) the application has moved past.
        self.moved = 0

    def __len__(self) -> int:
        return sum(end - start for _, start, end in self.slices)

    def handed(self, slices: list[tuple[C, int, int]]) -> None:
        """A poll returned ``slices`` (what an earlier poll returned is settled)."""
        self.slices = slices
        self.moved = 0

    def iterated(self, handed: int) -> list[tuple[C, int, int]]:
        """An iterator gave the application only the first ``handed`` records of the
        last poll, one at a time: it moved past all but the last of them (still in
        its hand). Returns the slices of the records it never handed out (they go
        back to the buffer, to be returned first by the next poll)."""
        self.slices, rest = split_slices(self.slices, handed)
        self.moved = max(min(handed, len(self)) - 1, 0)
        return rest

    def take(self) -> list[tuple[C, int, int]]:
        """Every slice handed out, forgotten here (explicit mode: the application
        acknowledges them itself)."""
        slices, self.slices, self.moved = self.slices, [], 0
        return slices

    def settle(self, processed: int | None = None) -> list[NodeAcks]:
        """Implicit mode: the acknowledgements of what was handed out, forgotten here:
        ACCEPT for the first ``processed`` records (all of them when None: a poll or
        a commit), RELEASE for the rest (``close``: the record in the application's
        hand, a last poll's records it never moved past)."""
        count = len(self) if processed is None else processed
        accepted, released = split_slices(self.take(), count)
        out: list[NodeAcks] = []
        accept, release = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)
        for kind, part in ((accept, accepted), (release, released)):
            for chunk, start, end in part:
                offsets = [r.offset for r in chunk.records[start:end]]
                out.append((chunk.node, chunk.tp, dict.fromkeys(offsets, kind)))
        return out
