"""Every public method and property of kpax's public classes has a docstring
(the reference pages are built from them), and the clients show no internals:
what the faces and the group code call on a core is underscored."""

from __future__ import annotations

import inspect
from typing import Any

import kpax
import kpax.admin
import kpax.aio
import kpax.errors


def _public_classes() -> list[type]:
    seen: dict[int, type] = {}
    for module in (kpax, kpax.aio, kpax.admin):
        for name in getattr(module, "__all__", dir(module)):
            obj = getattr(module, name, None)
            if (
                inspect.isclass(obj)
                and obj.__module__.startswith("kpax")
                and not issubclass(obj, BaseException)
            ):
                seen[id(obj)] = obj
    return sorted(seen.values(), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _undocumented(cls: type) -> list[str]:
    out = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((c for c in cls.__mro__ if name in c.__dict__), None)
        if owner is None or not owner.__module__.startswith("kpax"):
            continue
        raw: Any = owner.__dict__[name]
        if isinstance(raw, property):
            fn = raw.fget
        elif isinstance(raw, (staticmethod, classmethod)):
            fn = raw.__func__
        elif inspect.isfunction(raw):
            fn = raw
        else:
            continue  # (attributes, enum members, named tuple fields)
        if not (fn.__doc__ or "").strip():
            out.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    return out


def test_every_public_method_has_a_docstring() -> None:
    missing = [m for cls in _public_classes() for m in _undocumented(cls)]
    assert not missing, f"{len(missing)} public methods without a docstring: {missing}"


def test_the_clients_publish_no_internals() -> None:
    internals = {
        "try_append", "plan_many", "try_fill", "memory_full_error", "new_appender",
        "wait_and_append", "wait_and_fill", "poll_tick", "call_listener", "fail",
        "freeze_partitions", "add_partitions", "remove_partitions", "assigned_partitions",
        "processed_offsets", "consumed_offsets", "wait_processed", "on_committed",
        "forget_committed",
    }  # fmt: skip
    for cls in (kpax.Producer, kpax.Consumer, kpax.aio.Producer, kpax.aio.Consumer):
        assert not internals & set(dir(cls)), cls
