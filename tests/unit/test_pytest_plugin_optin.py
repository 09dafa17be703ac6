"""The pytest plugin is opt-in: with kpax installed, another project's pytest run gets
kpax's fixtures and markers only when it asks for them (``-p`` or ``pytest_plugins``).

Each case runs pytest in a subprocess, with this interpreter (the venv kpax is
installed in), on a one-test project in a temporary directory. The test asks for
the ``topic`` fixture, which starts no broker until it is called.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = "kpax.testing.pytest_plugin"
PROBE = "def test_probe(topic):\n    assert callable(topic)\n"


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_probe.py").write_text(PROBE, encoding="utf-8")
    return tmp_path


def test_installed_kpax_registers_no_fixture_or_marker(project: Path) -> None:
    run = _pytest(project, "-q")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "fixture 'topic' not found" in run.stdout, run.stdout
    markers = _pytest(project, "--markers")
    assert "kafka4" not in markers.stdout and "multibroker" not in markers.stdout


def test_dash_p_turns_the_plugin_on(project: Path) -> None:
    run = _pytest(project, "-q", "-p", PLUGIN)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "@pytest.mark.kafka4" in _pytest(project, "--markers", "-p", PLUGIN).stdout


def test_pytest_plugins_in_conftest_turns_the_plugin_on(project: Path) -> None:
    (project / "conftest.py").write_text(f"pytest_plugins = [{PLUGIN!r}]\n", encoding="utf-8")
    run = _pytest(project, "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "@pytest.mark.kafka4" in _pytest(project, "--markers").stdout
