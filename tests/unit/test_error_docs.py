"""Every error docs/reference/errors.md names imports from where it says: the
names of its tree from ``kpax.errors`` (each a subclass of its parent in the
tree), its ``:::`` reference entries, and every ``kpax.errors.X`` / ``kpax.X``
error named anywhere under docs/."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import kpax.errors
from kpax.errors import KafkaError

DOCS = Path(__file__).resolve().parents[2] / "docs"
ERRORS_MD = DOCS / "reference" / "errors.md"


def _resolve(dotted: str) -> Any:
    """``kpax.errors.LogTruncationError`` -> the object (the longest importable
    module prefix, then attributes)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def _tree() -> list[tuple[int, str]]:
    """(depth, name) of each class in the first code block (the tree)."""
    text = ERRORS_MD.read_text(encoding="utf-8")
    block = text.split("```", 2)[1]
    out = []
    for line in block.splitlines():
        m = re.match(r"^([│ ]*)[├└]── (\w+)", line)
        if m:
            out.append((len(m.group(1)) // 4 + 1, m.group(2)))
        elif line.strip() == "KafkaError":
            out.append((0, "KafkaError"))
    return out


def test_the_tree_imports_from_kpax_errors_with_its_parents() -> None:
    tree = _tree()
    names = [name for _, name in tree]
    assert len(names) > 20 and "NoOffsetForPartitionError" in names
    missing = [name for name in names if not hasattr(kpax.errors, name)]
    assert not missing, f"docs/reference/errors.md names these, kpax.errors lacks them: {missing}"
    stack: list[tuple[int, str]] = []
    for depth, name in tree:
        while stack and stack[-1][0] >= depth:
            stack.pop()
        cls = getattr(kpax.errors, name)
        assert isinstance(cls, type) and issubclass(cls, KafkaError), name
        if stack:
            parent = getattr(kpax.errors, stack[-1][1])
            assert issubclass(cls, parent), f"{name} is drawn under {stack[-1][1]}"
        stack.append((depth, name))


def test_every_reference_entry_imports() -> None:
    targets = re.findall(r"^::: ([\w.]+)", ERRORS_MD.read_text(encoding="utf-8"), re.M)
    assert len(targets) > 20
    for target in targets:
        _resolve(target)


def test_every_error_the_docs_qualify_imports_from_there() -> None:
    """``kpax.errors.X`` and ``kpax.X`` anywhere under docs/ (X an error class)."""
    seen = set()
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for dotted in re.findall(r"\bkpax\.(?:errors\.)?[A-Z]\w*Error\b", text):
            seen.add(dotted)
            obj = _resolve(dotted)
            assert issubclass(obj, KafkaError), f"{page.name}: {dotted}"
    assert "kpax.errors.TopicAlreadyExistsError" in seen
