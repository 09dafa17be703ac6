"""Every kpax module says what it may import, and says it truly.

Each module's docstring has an ``Imports:`` line (the layer rule in one line,
for a reader); every kpax module it imports at module level must be named
there -- exactly (``kpax.cluster.request_path``), by a package
(``kpax.cluster``), by ``kpax.x.*`` or by ``kpax.x.{a,b}``. The generated
protocol code is left out (its header says where it comes from).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.unit.test_layering import KPAX, _imports, _module

_TOKEN = re.compile(r"kpax(?:\.[A-Za-z_]\w*)*(?:\.\{[^}]*\}|\.\*)?")


def _declared(text: str) -> list[str]:
    out: list[str] = []
    for token in _TOKEN.findall(text):
        if ".{" in token:
            base, inner = token.split(".{", 1)
            out += [
                f"{base}.{name.strip().rstrip('.*').strip('.')}" for name in inner[:-1].split(",")
            ]
        else:
            out.append(token.removesuffix(".*"))
    return out


def _modules() -> list[Path]:
    return [p for p in sorted(KPAX.rglob("*.py")) if "_generated" not in p.parts]


def test_every_module_has_an_imports_line() -> None:
    missing = []
    for path in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if "Imports:" not in doc:
            missing.append(str(path.relative_to(KPAX.parent)))
    assert not missing, "add an 'Imports:' line to the docstring of:\n" + "\n".join(missing)


def test_imports_lines_name_every_kpax_import() -> None:
    problems = []
    for path in _modules():
        module = _module(path)
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        match = re.search(r"Imports:(.*?)(?:\n\s*\n|\Z)", doc, re.S)
        if match is None:
            continue  # test_every_module_has_an_imports_line
        declared = _declared(match.group(1))
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for target in sorted(_imports(path, module)):
            if target == package or target.startswith(module + "."):
                continue  # its own package, or its own submodules
            if not any(
                target == d or target.startswith(d + ".") or d.startswith(target + ".")
                for d in declared
            ):
                problems.append(f"{module} imports {target}: not in its 'Imports:' line")
    assert not problems, "\n".join(problems)
