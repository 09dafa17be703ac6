"""The embedded consumer protocol: subscription and assignment bytes.

Role: the bytes a consumer puts in JoinGroup metadata
(``ConsumerProtocolSubscription``) and the leader puts in SyncGroup
assignments (``ConsumerProtocolAssignment``): an int16 version, then the
message body of that version (kpax.proto.messages). Written as the Java
client's ``ConsumerProtocol`` does, so Java and kpax members share a group:
subscription topics and owned partitions sorted, assignment partitions
grouped by topic in order of first appearance. Read like Java too: a version
newer than kpax knows is read with the newest known schema (later versions
only append fields), and bytes after the known fields are ignored.

Bad bytes raise :class:`kpax.proto.errors.ProtocolError` naming what failed.

Imports: kpax.proto, kpax.structs and kpax.consumer.assignors.base.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kpax.consumer.assignors.base import MemberAssignment, MemberSubscription, java_string_key
from kpax.proto.errors import ProtocolError
from kpax.proto.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kpax.structs import TopicPartition

__all__ = [
    "ASSIGNMENT_VERSION",
    "SUBSCRIPTION_VERSION",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

#: The newest versions kpax writes (and Java 3.x/4.x writes by default).
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.MAX_VERSION
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.MAX_VERSION

_I16 = struct.Struct(">h")


def _check_version(version: int, highest: int, what: str) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"{what} version must be 0..{highest}, got {version}")


def _read_version(data: bytes | bytearray | memoryview, what: str, highest: int) -> tuple[int, int]:
    """(version found, version to read it with)."""
    if len(data) < 2:
        raise ProtocolError(
            f"cannot decode {what}: {len(data)} byte(s), too short for its int16 version"
        )
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        raise ProtocolError(f"cannot decode {what}: unsupported version {version}")
    return version, min(version, highest)


def _grouped(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def encode_subscription(sub: MemberSubscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """JoinGroup protocol metadata for *sub* (fields newer than *version* are left out)."""
    _check_version(version, SUBSCRIPTION_VERSION, "ConsumerProtocolSubscription")
    owned = sorted(
        set(sub.owned_partitions), key=lambda tp: (java_string_key(tp.topic), tp.partition)
    )
    msg = ConsumerProtocolSubscription(
        topics=sorted(sub.topics, key=java_string_key),
        user_data=sub.user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
            for t, ps in _grouped(owned).items()
        ],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    body = msg.encode(version)
    return _I16.pack(version) + body


def decode_subscription(data: bytes | bytearray | memoryview) -> MemberSubscription:
    """A member's JoinGroup metadata (``group_instance_id`` is not in these bytes: None)."""
    what = "ConsumerProtocolSubscription"
    _, read_as = _read_version(data, what, ConsumerProtocolSubscription.MAX_VERSION)
    msg, _ = ConsumerProtocolSubscription.decode_from(data, 2, read_as)
    return MemberSubscription(
        topics=list(msg.topics),
        user_data=None if msg.user_data is None else bytes(msg.user_data),
        owned_partitions=[
            TopicPartition(t.topic, p) for t in msg.owned_partitions for p in t.partitions
        ],
        generation_id=msg.generation_id,
        rack_id=msg.rack_id or None,
    )


def encode_assignment(assignment: MemberAssignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    """SyncGroup assignment bytes for one member."""
    _check_version(version, ASSIGNMENT_VERSION, "ConsumerProtocolAssignment")
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
            for t, ps in _grouped(assignment.partitions).items()
        ],
        user_data=assignment.user_data,
    )
    body = msg.encode(version)
    return _I16.pack(version) + body


def decode_assignment(data: bytes | bytearray | memoryview) -> MemberAssignment:
    """A member's assignment from SyncGroup. Empty bytes (the leader sent this
    member nothing) decode to an empty assignment."""
    if len(data) == 0:
        return MemberAssignment([])
    what = "ConsumerProtocolAssignment"
    _, read_as = _read_version(data, what, ConsumerProtocolAssignment.MAX_VERSION)
    msg, _ = ConsumerProtocolAssignment.decode_from(data, 2, read_as)
    return MemberAssignment(
        partitions=[
            TopicPartition(t.topic, p) for t in msg.assigned_partitions for p in t.partitions
        ],
        user_data=None if msg.user_data is None else bytes(msg.user_data),
    )
