"""Client-side partition assignors of the classic consumer group protocol.

Role: the public face of the assignors the group leader runs (``range``,
``roundrobin``, ``sticky``, ``cooperative-sticky``), their value types, and
:func:`get_assignor`, which accepts the short names or the Java class names of
``partition.assignment.strategy`` (e.g.
``org.apache.kafka.clients.consumer.RangeAssignor``). The subscription /
assignment bytes of JoinGroup / SyncGroup are in
:mod:`kpax.consumer.assignors.protocol`.

Imports: kpax.structs and kpax.consumer.assignors.* (protocol.py also uses
kpax.proto.messages; it is not imported here).
"""

from __future__ import annotations

from kpax.consumer.assignors.base import Assignor, MemberAssignment, MemberSubscription
from kpax.consumer.assignors.range import RangeAssignor
from kpax.consumer.assignors.roundrobin import RoundRobinAssignor
from kpax.consumer.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "get_assignor",
]

#: Short protocol name -> assignor class.
ASSIGNORS: dict[str, type[Assignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}

_JAVA_CLASSES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def get_assignor(spec: str | Assignor) -> Assignor:
    """An assignor from a name (``"range"``, a Java class name, ...) or an assignor object."""
    if not isinstance(spec, str):
        if isinstance(spec, Assignor):
            return spec
        raise TypeError(f"partition assignor must be a name or an Assignor, not {spec!r}")
    name = _JAVA_CLASSES.get(spec.strip(), spec.strip().lower())
    cls = ASSIGNORS.get(name)
    if cls is None:
        raise ValueError(
            f"unknown partition assignor {spec!r}: use one of {', '.join(ASSIGNORS)} "
            "(or their Java class names), or pass an Assignor object"
        )
    return cls()
