"""kpax.admin's layout: one module per domain, none over 800 lines, true "Imports:"
lines, no cycles, and the API reference lists every public member of kpax.aio.Admin.

``AsyncAdmin`` (kpax.admin.client) is assembled from domain mixins; the reference page
(docs/reference/aio.md) lists its members by hand to keep their order, so a new admin
operation must be added there too: this test says so.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kpax.admin
from kpax.admin.client import AsyncAdmin

ROOT = Path(__file__).resolve().parents[2]
ADMIN = Path(kpax.admin.__file__).parent
DOMAINS = ("cluster", "topics", "configs", "offsets", "groups", "share_groups", "acls", "users")


def _kpax_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kpax"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kpax"))
    return found


def _declared(path: Path) -> list[str]:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    match = re.search(r"^Imports:(.*?)(?:\n\n|\Z)", doc, re.S | re.M)
    assert match, f"{path.name}: no 'Imports:' line in its docstring"
    names = re.split(r",|\band\b", match.group(1).replace("\n", " "))
    return [n.strip().rstrip(".") for n in names if n.strip().startswith("kpax")]


def test_no_admin_module_over_800_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in ADMIN.glob("*.py")}
    assert {n: s for n, s in sizes.items() if s > 800} == {}


def test_imports_lines_are_true() -> None:
    for path in sorted(ADMIN.glob("*.py")):
        declared = _declared(path)
        for module in _kpax_imports(path):
            assert any(module == d or module.startswith(d + ".") for d in declared), (
                f"kpax/admin/{path.name} imports {module}; its docstring says {declared}"
            )


def test_domain_modules_import_only_the_base_and_types() -> None:
    for name in DOMAINS:
        admin = {m for m in _kpax_imports(ADMIN / f"{name}.py") if m.startswith("kpax.admin")}
        assert admin <= {"kpax.admin.base", "kpax.admin.types"}, (name, admin)
    base = {m for m in _kpax_imports(ADMIN / "base.py") if m.startswith("kpax.admin")}
    assert base == set()


def test_lower_layers_never_import_the_admin() -> None:
    for package in ("cluster", "broker", "proto", "structs.py", "config.py", "metrics.py"):
        target = ROOT / "kpax" / package
        for path in [target] if target.is_file() else sorted(target.rglob("*.py")):
            bad = {m for m in _kpax_imports(path) if m.startswith("kpax.admin")}
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_every_domain_mixin_is_part_of_the_admin() -> None:
    mixins = {
        c.__module__.rsplit(".", 1)[1]
        for c in AsyncAdmin.__mro__[1:-1]
        if c.__module__.startswith("kpax.admin.")  # (PeerHints: kpax.peer_methods)
    }
    assert mixins == {*DOMAINS, "base"}


def test_reference_page_lists_every_public_member() -> None:
    page = (ROOT / "docs" / "reference" / "aio.md").read_text()
    block = page.split("::: kpax.aio.Admin", 1)[1]
    listed = re.findall(r"^ {8}- (\w+)$", block, re.M)
    public = {n for n in dir(AsyncAdmin) if not n.startswith("_")}
    public |= {n for n in vars(AsyncAdmin("127.0.0.1:1")) if not n.startswith("_")}
    assert sorted(listed) == sorted(public), (
        "docs/reference/aio.md lists kpax.aio.Admin's members by hand (to keep their "
        "order): add the new ones there"
    )
