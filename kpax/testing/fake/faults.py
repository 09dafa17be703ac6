"""Injected faults: which requests they hit and what they do.

Role: the rules of ``fake.inject(...)``. A :class:`Fault` names the requests it
matches -- an API (``"Produce"``; None for any), optionally a broker (node id),
a topic and a partition -- and which of them it hits: the ``nth`` matching
request from now on (1 = the next one), then ``times`` in a row (None: every
one after), each with ``probability`` (drawn from the cluster's seeded
``random.Random``). What it does to a hit request, one of:

- ``error``: answer with this Kafka error instead of applying the request. For
  APIs with per-partition (or per-topic, per-group) results the error goes on
  the matched partitions only and the others are applied; elsewhere the
  response's top-level error code carries it;
- ``drop="before"``: close the connection without applying the request;
- ``drop="after"``: apply it, then close the connection without answering (the
  client cannot know whether it was applied);
- ``delay_ms``: apply it, and answer ``delay_ms`` later (later requests on the
  connection wait behind it, as on a Kafka broker).

A fault may combine ``delay_ms`` with ``error`` or ``drop="after"``.
:func:`touched` finds the (topic, partition) pairs a request names, for the
topic and partition filters.

Imports: kpax.testing.fake.codes, kpax.proto (api, messages) and the standard library.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kpax.proto.api import Struct
from kpax.proto.messages import REQUESTS
from kpax.testing.fake.codes import code_of_name

__all__ = ["DROPS", "Fault", "Faults", "touched"]

DROPS = ("before", "after")
_API_NAMES = {cls.API_NAME for cls in REQUESTS.values()}
_PARTITION_LISTS = ("partitions", "partition_data", "partition_indexes", "partition_indices")
_PARTITION_FIELDS = ("partition_index", "partition", "index")


@dataclass
class Fault:
    """One injected fault (see the module docstring). ``seen`` counts the
    requests it matched while active, ``hits`` those it acted on; a fault whose
    ``times`` are used up is inactive."""

    api: str | None = None
    error: int | None = None
    delay_ms: int = 0
    drop: str | None = None
    nth: int = 1
    times: int | None = 1
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    probability: float = 1.0
    seen: int = 0
    hits: int = 0
    active: bool = True
    _owner: Faults | None = field(default=None, repr=False, compare=False)

    def remove(self) -> None:
        """Stop this fault from hitting any later request."""
        self.active = False

    @property
    def exhausted(self) -> bool:
        return not self.active or (self.times is not None and self.hits >= self.times)


class Faults:
    """The active faults of a cluster, matched in the order they were injected."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rules: list[Fault] = []

    def add(
        self,
        api: str | None = None,
        *,
        error: str | int | None = None,
        delay_ms: int = 0,
        drop: str | None = None,
        nth: int = 1,
        times: int | None = 1,
        broker: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        probability: float = 1.0,
    ) -> Fault:
        if api is not None and api not in _API_NAMES:
            raise ValueError(f"unknown API {api!r} (e.g. 'Produce', 'Fetch', 'JoinGroup')")
        if drop is not None and drop not in DROPS:
            raise ValueError(f"drop must be 'before' or 'after', not {drop!r}")
        if drop == "before" and (error is not None or delay_ms):
            raise ValueError("drop='before' closes the connection: no error or delay with it")
        if error is None and drop is None and not delay_ms:
            raise ValueError("a fault needs an error, a drop or a delay_ms")
        if nth < 1 or (times is not None and times < 1) or delay_ms < 0:
            raise ValueError("nth and times count from 1; delay_ms is not negative")
        if not 0.0 < probability <= 1.0:
            raise ValueError("probability is in (0, 1]")
        fault = Fault(
            api=api,
            error=code_of_name(error) if error is not None else None,
            delay_ms=delay_ms,
            drop=drop,
            nth=nth,
            times=times,
            broker=broker,
            topic=topic,
            partition=partition,
            probability=probability,
            _owner=self,
        )
        self.rules.append(fault)
        return fault

    def clear(self) -> None:
        for f in self.rules:
            f.active = False
        self.rules.clear()

    def match(
        self,
        api: str,
        node_id: int,
        names: Callable[[], set[tuple[str, int | None]]],
    ) -> Fault | None:
        """The fault that hits this request, if any (``names``: what it touches)."""
        self.rules = [f for f in self.rules if not f.exhausted]
        hit: Fault | None = None
        pairs: set[tuple[str, int | None]] | None = None
        for f in self.rules:
            if f.api is not None and f.api != api:
                continue
            if f.broker is not None and f.broker != node_id:
                continue
            if f.topic is not None:
                if pairs is None:
                    pairs = names()
                wanted = (f.topic, f.partition)
                if f.partition is None and not any(t == f.topic for t, _ in pairs):
                    continue
                if f.partition is not None and wanted not in pairs:
                    continue
            f.seen += 1
            if hit is not None or f.seen < f.nth:
                continue
            if f.probability < 1.0 and self.rng.random() >= f.probability:
                continue
            f.hits += 1
            hit = f
        return hit


def touched(
    request: Struct, resolve_id: Callable[[uuid.UUID], str | None]
) -> set[tuple[str, int | None]]:
    """The (topic, partition) pairs a request names, and (topic, None) for each topic."""
    out: set[tuple[str, int | None]] = set()

    def visit(obj: Struct, depth: int) -> None:
        if depth > 4:
            return
        kind = type(obj).__qualname__.rsplit(".", 1)[-1]
        if depth > 0 and "Topic" in kind:
            name = _topic_name(obj, resolve_id)
            if name is not None:
                out.add((name, None))
                for p in _partitions(obj):
                    out.add((name, p))
                return
        for attr in obj._fields():
            value = getattr(obj, attr, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, Struct):
                        visit(item, depth + 1)

    visit(request, 0)
    return out


def _topic_name(obj: Struct, resolve_id: Callable[[uuid.UUID], str | None]) -> str | None:
    for attr in ("name", "topic", "topic_name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    tid = getattr(obj, "topic_id", None)
    if isinstance(tid, uuid.UUID) and tid.int:
        return resolve_id(tid)
    return None


def _partitions(obj: Struct) -> list[int]:
    out: list[int] = []
    for attr in _PARTITION_LISTS:
        items = getattr(obj, attr, None)
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, int):
                out.append(item)
                continue
            for f in _PARTITION_FIELDS:
                value = getattr(item, f, None)
                if isinstance(value, int):
                    out.append(value)
                    break
    return out
