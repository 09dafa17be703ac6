"""The user data bytes of the Java sticky assignors, byte-compatible with Java.

Role: ``StickyAssignor`` sends its previous assignment (and, from schema v1,
its generation) in the subscription user data; ``CooperativeStickyAssignor``
sends only its generation. These are not Kafka API messages (no JSON spec:
Java writes them with fixed ``Schema`` objects), so they are encoded here:

* sticky v1: ``[topic: string, partitions: [int32]]`` then ``generation: int32``;
  v0 is the same without the generation (Java reads v1, falls back to v0).
* cooperative: ``generation: int32``.

Strings are int16-length UTF-8, arrays int32-count, all big-endian, no
version prefix. Like Java, unreadable user data is treated as "no previous
assignment" rather than failing the whole group's rebalance.

Imports: kpax.structs and the standard library.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kpax.structs import TopicPartition

__all__ = [
    "decode_cooperative_generation",
    "decode_sticky_user_data",
    "encode_cooperative_generation",
    "encode_sticky_user_data",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_sticky_user_data(assignment: Iterable[TopicPartition], generation: int) -> bytes:
    """Java's ``StickyAssignor.serializeTopicPartitionAssignment`` (schema v1)."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, partitions in by_topic.items():
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None] | None:
    """(previous assignment, generation or None for schema v0), or None if unreadable."""
    try:
        view = memoryview(data)
        (count,) = _I32.unpack_from(view, 0)
        if count < 0:
            return None
        pos = 4
        out: list[TopicPartition] = []
        for _ in range(count):
            (n,) = _I16.unpack_from(view, pos)
            pos += 2
            if n < 0 or pos + n > len(view):
                return None
            topic = bytes(view[pos : pos + n]).decode()
            pos += n
            (m,) = _I32.unpack_from(view, pos)
            pos += 4
            if m < 0:
                return None
            out.extend(TopicPartition(topic, p) for p in struct.unpack_from(f">{m}i", view, pos))
            pos += 4 * m
        if pos == len(view):
            return out, None
        if pos + 4 == len(view):
            return out, _I32.unpack_from(view, pos)[0]
        return None
    except (struct.error, UnicodeDecodeError):
        return None


def encode_cooperative_generation(generation: int) -> bytes:
    """Java's ``CooperativeStickyAssignor.subscriptionUserData``: the generation."""
    return _I32.pack(generation)


def decode_cooperative_generation(data: bytes) -> int | None:
    """The generation in cooperative-sticky user data, or None if unreadable."""
    if len(data) < 4:
        return None
    return int(_I32.unpack_from(data, 0)[0])
