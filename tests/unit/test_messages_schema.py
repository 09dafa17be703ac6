"""Value builders for protocol messages, driven by the generated schema table.

Both the hypothesis strategies (round-trip tests) and a fast ``random``-based
builder (fuzz corpus) read :data:`kpax.proto.messages._generated._schema.SCHEMA`,
the field table tools/gen_proto.py writes next to the classes, so the tests need
no spec files at run time. The tests at the bottom check the table against the
classes themselves.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from hypothesis import strategies as st

import kpax.proto.messages as messages
from kpax.proto.api import Data, Message, Request, Response
from kpax.proto.messages._generated._schema import SCHEMA

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


def all_messages() -> list[type[Message]]:
    out: list[type[Message]] = []
    for name in sorted(messages.__all__):
        obj = getattr(messages, name)
        if isinstance(obj, type) and issubclass(obj, Message):
            out.append(obj)
    return out


def responses() -> list[type[Response]]:
    return [c for c in all_messages() if issubclass(c, Response)]


def versions(cls: type[Message]) -> list[int]:
    return list(range(cls.MIN_VERSION, cls.MAX_VERSION + 1))


def resolve(qual: str) -> type[Any]:
    top, *rest = qual.split(".")
    obj: Any = getattr(messages, top)
    for part in rest:
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _in(r: Any, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def present(qual: str, v: int, flexible: bool) -> list[tuple[Any, ...]]:
    return [row for row in SCHEMA[qual] if _in(row[2], v)]


def known_tags(qual: str) -> set[int]:
    return {row[4] for row in SCHEMA[qual] if row[4] is not None}


# ------------------------------------------------------------ hypothesis


def _elem_strategy(base: str, struct: str | None, v: int, flexible: bool) -> st.SearchStrategy[Any]:
    if struct is not None:
        return strategy(struct, v, flexible)
    if base == "bool":
        return st.booleans()
    if base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        return st.integers(lo, hi)
    if base == "float64":
        return st.floats(allow_nan=False)
    if base == "string":
        return TEXT
    if base == "uuid":
        return st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
    if base in ("bytes", "records"):
        return st.binary(max_size=12)
    raise AssertionError(base)


def strategy(qual: str, v: int, flexible: bool) -> st.SearchStrategy[Any]:
    """Instances of class ``qual`` with every field valid in version ``v`` drawn."""
    cls = resolve(qual)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for attr, typ, _vers, nullable, _tag, _tagged, struct, *_ in present(qual, v, flexible):
        if typ.startswith("[]"):
            s: st.SearchStrategy[Any] = st.lists(
                _elem_strategy(typ[2:], struct, v, flexible), max_size=3
            )
        else:
            s = _elem_strategy(typ, struct, v, flexible)
        if _in(nullable, v):
            s = st.one_of(st.none(), s)
        kwargs[attr] = s
    if flexible:
        taken = known_tags(qual)
        kwargs["unknown_tags"] = st.one_of(
            st.none(),
            st.dictionaries(
                st.integers(0, 300).filter(lambda t: t not in taken),
                st.binary(max_size=6),
                min_size=1,
                max_size=2,
            ),
        )
    return st.builds(cls, **kwargs)


# ---------------------------------------------------------------- random


def _rand_elem(
    base: str,
    struct: str | None,
    v: int,
    flexible: bool,
    rng: random.Random,
    depth: int,
    unknown: bool,
) -> Any:
    if struct is not None:
        return random_instance(struct, v, flexible, rng, depth + 1, unknown=unknown)
    if base == "bool":
        return rng.random() < 0.5
    if base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        return rng.choice((lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)))
    if base == "float64":
        return rng.uniform(-1e9, 1e9)
    if base == "string":
        return "".join(rng.choice("abcxyz-é€") for _ in range(rng.randint(0, 6)))
    if base == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if base in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 24))
    raise AssertionError(base)


def random_instance(
    qual: str,
    v: int,
    flexible: bool,
    rng: random.Random,
    depth: int = 0,
    *,
    unknown: bool = True,
) -> Any:
    """A random instance of ``qual`` valid in version ``v`` (fast, for fuzz corpora)."""
    cls = resolve(qual)
    kwargs: dict[str, Any] = {}
    for attr, typ, _vers, nullable, _tag, _tagged, struct, *_ in present(qual, v, flexible):
        if _in(nullable, v) and rng.random() < 0.15:
            kwargs[attr] = None
            continue
        if typ.startswith("[]"):
            n = rng.randint(0, 3 if depth < 3 else 0)
            kwargs[attr] = [
                _rand_elem(typ[2:], struct, v, flexible, rng, depth, unknown) for _ in range(n)
            ]
        else:
            kwargs[attr] = _rand_elem(typ, struct, v, flexible, rng, depth, unknown)
    if unknown and flexible and rng.random() < 0.2:
        taken = known_tags(qual)
        tag = rng.choice([t for t in range(40) if t not in taken])
        kwargs["unknown_tags"] = {tag: rng.randbytes(rng.randint(0, 5))}
    return cls(**kwargs)


# ------------------------------------------------------------------ tests


def test_every_api_is_generated_and_paired() -> None:
    reqs = messages.REQUESTS
    assert len(reqs) == 91  # 95 APIs in the Kafka 4.4 specs, 4 with validVersions "none"
    for key, cls in reqs.items():
        assert issubclass(cls, Request)
        assert key == cls.API_KEY
        assert cls.RESPONSE.REQUEST is cls
        assert key == cls.RESPONSE.API_KEY
        assert cls.__name__.removesuffix("Request") == cls.API_NAME
        assert messages.RESPONSES[key] is cls.RESPONSE
    assert messages.MetadataRequest.API_KEY == 3
    assert messages.MetadataRequest.API_NAME == "Metadata"
    assert messages.FetchResponse.FLEXIBLE_VERSION == 12
    assert messages.ProduceRequest.MIN_VERSION == 3
    assert messages.ConsumerProtocolSubscription.FLEXIBLE_VERSION is None
    for name in ("ControlledShutdownRequest", "LeaderAndIsrRequest", "StopReplicaRequest"):
        assert not hasattr(messages, name)


def test_data_types_and_headers_are_generated() -> None:
    for name in (
        "RequestHeader",
        "ResponseHeader",
        "ConsumerProtocolSubscription",
        "ConsumerProtocolAssignment",
        "LeaderChangeMessage",
        "VotersRecord",
        "EndTxnMarker",
    ):
        assert issubclass(getattr(messages, name), Data)


def test_schema_matches_classes() -> None:
    for qual, rows in SCHEMA.items():
        cls = resolve(qual)
        assert tuple(r[0] for r in rows) == cls.__slots__, qual
        obj = cls()
        for attr, *_ in rows:
            assert hasattr(obj, attr)
