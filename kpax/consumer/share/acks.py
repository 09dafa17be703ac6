"""Share-group acknowledgements: the types, and offsets turned into the wire's batches.

Role: pure functions and small data classes, no I/O. :class:`AcknowledgeType`
is what the application passes to ``acknowledge`` (the Java client's ids:
ACCEPT 1, RELEASE 2, REJECT 3, RENEW 4); ``GAP`` (0) is what the consumer
itself sends for acquired offsets that hold no record the application can
see (control records, compacted away). :func:`ack_batches` turns one
partition's ``{offset: type}`` into the AcknowledgementBatches of ShareFetch
and ShareAcknowledge: consecutive offsets form one batch; a batch whose
offsets share one type carries that type once, else one type per offset.

Imports: the standard library.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["GAP", "AcknowledgeType", "ack_batches", "parse_ack_type"]

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
