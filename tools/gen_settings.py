#!/usr/bin/env python3
"""Generate each client's Settings fields from its options' one declaration.

Usage: ``tools/gen_settings.py [--check]`` (from the repository root; ``make
check-generated`` runs it with ``--check``).

Each option is declared once, as ``Annotated[<type>, Option(default, check,
doc)]`` in its client's config TypedDict (:class:`kpax.producer.options.
ProducerConfig`, :class:`kpax.consumer.options.ConsumerConfig`,
:class:`kpax.consumer.share.options.ShareConsumerConfig`). This writes, for
each, a module holding one frozen dataclass with a field per option the
client's components read, in declaration order, typed as the option's value
once resolved (:func:`kpax.config.resolved_type`: the Option's ``resolved=``,
else its check's return annotation, else the declared type), with the
option's doc as the field's comment. The hand-written Settings class
(``ProducerSettings``...) subclasses it and adds only behaviour: cross-option
checks and derived values in ``from_config``, properties.

Which options a Settings carries: every option of the client's TypedDict but
the connection options (:class:`kpax.broker.options.ConnectionConfig`: the
broker layer's own ``ConnectionOptions`` takes those), except the ones the
client's components read themselves, named by :class:`kpax.config.Timeouts`
(``request_timeout_ms``, ``retry_backoff_ms``...).

Output is deterministic; ``--check`` compares instead of writing and exits 1
naming the stale files.

Imports: kpax.config, kpax.broker.options and the clients' options modules
(kpax.producer.options, kpax.consumer.options, kpax.consumer.share.options),
to read the declarations.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kpax.broker.options import ConnectionConfig  # noqa: E402
from kpax.config import Option, Timeouts, resolved_type  # noqa: E402

#: The connection options a client's components read themselves (their Settings carry them).
CLIENT_READ_CONNECTION_OPTIONS = frozenset(Timeouts.__annotations__)


@dataclass(frozen=True)
class Target:
    """One generated module: the TypedDict it is made from and what it holds."""

    #: ``module:TypedDict`` of the declarations.
    config: str
    #: The generated module's path, from the repository root.
    path: str
    #: The generated dataclass's name.
    class_name: str
    #: The hand-written Settings that subclasses it (``module:Class``), for the docs.
    settings: str
    #: Who reads it, for the module docstring ("the producer").
    client: str


TARGETS = (
    Target(
        "kpax.producer.options:ProducerConfig",
        "kpax/producer/settings_fields.py",
        "ProducerSettingsFields",
        "kpax.producer.options:ProducerSettings",
        "the producer",
    ),
    Target(
        "kpax.consumer.options:ConsumerConfig",
        "kpax/consumer/settings_fields.py",
        "ConsumerSettingsFields",
        "kpax.consumer.options:ConsumerSettings",
        "the consumer",
    ),
    Target(
        "kpax.consumer.share.options:ShareConsumerConfig",
        "kpax/consumer/share/settings_fields.py",
        "ShareSettingsFields",
        "kpax.consumer.share.options:ShareSettings",
        "the share consumer",
    ),
)


def settings_fields(config_type: type) -> list[tuple[str, Any, Option]]:
    """``(name, resolved type, Option)`` of each option a client's Settings
    carries (module docstring), in declaration order."""
    connection = set(get_type_hints(ConnectionConfig))
    out = []
    for name, hint in get_type_hints(config_type, include_extras=True).items():
        if name in connection and name not in CLIENT_READ_CONNECTION_OPTIONS:
            continue
        found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Option)]
        if len(found) != 1:
            raise TypeError(
                f"{config_type.__name__}.{name}: declare the option as "
                "Annotated[<type>, Option(default, check, doc)]"
            )
        out.append((name, resolved_type(found[0], hint.__origin__), found[0]))
    return out


def type_source(tp: Any, imports: set[tuple[str, str]]) -> str:
    """``tp`` as source text; the names it needs are added to ``imports``
    (``(module, name)``)."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        imports.add(("typing", "Any"))
        return "Any"
    if tp is Ellipsis:
        return "..."
    if isinstance(tp, list):
        return "[" + ", ".join(type_source(a, imports) for a in tp) + "]"
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return " | ".join(type_source(a, imports) for a in get_args(tp))
    if origin is not None:
        args = ", ".join(type_source(a, imports) for a in get_args(tp))
        return f"{type_source(origin, imports)}[{args}]"
    if isinstance(tp, type):
        if tp.__module__ != "builtins":
            imports.add((tp.__module__, tp.__qualname__))
        return tp.__qualname__
    raise TypeError(f"cannot write the type {tp!r} as source")


def _imports_source(imports: set[tuple[str, str]]) -> tuple[str, list[str]]:
    """The import statements (isort's order: standard library, then kpax) and
    the kpax modules among them."""
    by_module: dict[str, set[str]] = {}
    for module, name in imports:
        by_module.setdefault(module, set()).add(name)
    by_module.setdefault("dataclasses", set()).add("dataclass")
    stdlib = sorted(m for m in by_module if not m.startswith("kpax"))
    ours = sorted(m for m in by_module if m.startswith("kpax"))
    blocks = [
        "\n".join(f"from {m} import {', '.join(sorted(by_module[m]))}" for m in group)
        for group in (stdlib, ours)
        if group
    ]
    return "\n\n".join(blocks), ours


def generate(config_type: type, class_name: str, settings: str, client: str) -> str:
    """The source of the module holding ``class_name``: the frozen dataclass
    of the Settings fields of ``config_type`` (a client's config TypedDict)."""
    imports: set[tuple[str, str]] = set()
    body = []
    for name, tp, option in settings_fields(config_type):
        for line in textwrap.wrap(option.doc, width=100 - len("    #: ")):
            body.append(f"    #: {line}")
        body.append(f"    {name}: {type_source(tp, imports)}")
    import_lines, ours = _imports_source(imports)
    source = f"{config_type.__module__}.{config_type.__qualname__}"
    settings_module, settings_class = settings.split(":")
    imports_doc = ", ".join(ours) + " and the standard library" if ours else "the standard library"
    role = textwrap.fill(
        f"Role: the frozen dataclass base of :class:`{settings_module}.{settings_class}`: "
        f"a field per option of :class:`{source}` the client's components read, in "
        "declaration order, typed as the option's value once resolved "
        "(:func:`kpax.config.resolved_type`). The subclass adds only behaviour "
        "(``from_config``, properties).",
        width=88,
    )
    return f'''# Generated by tools/gen_settings.py (do not edit): `python tools/gen_settings.py`
# writes it again from {source};
# `make check-generated` fails if it is stale.
"""The fields of {client}'s typed settings, one per option it reads (generated).

{role}

Imports: {imports_doc}.
"""

from __future__ import annotations

{import_lines}


@dataclass(frozen=True)
class {class_name}:
    """{client[0].upper()}{client[1:]}'s options as its components read them
    (generated from :class:`{source}`)."""

{chr(10).join(body)}
'''


def _load(spec: str) -> Any:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def expected() -> dict[Path, str]:
    """Every generated file's path and the text it must hold."""
    return {
        ROOT / t.path: generate(_load(t.config), t.class_name, t.settings, t.client)
        for t in TARGETS
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(
            "stale generated files (run `python tools/gen_settings.py`): " + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
