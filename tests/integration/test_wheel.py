"""The distributions: sdist -> wheel -> a fresh venv -> the `kpax` command against a broker.

From a copy of the source tree (nothing is written into the work tree):
``python -m build --sdist``, then ``pip wheel --no-deps`` of that sdist (so the sdist
must carry the C sources, stubs and LICENSE), once with the C compiler and once
with ``CC=/bin/false``. The first wheel is installed into a new venv (its runtime
dependencies come from PyPI): ``kpax --version``, both C extensions loaded, and a
produce/consume round trip through the installed ``kpax`` command. The second
build must name each extension it could not build in one line, and its wheel
must install and do the same round trip in pure Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kpax import __version__
from kpax.testing.base import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = "Scripts" if os.name == "nt" else "bin"
_SKIP = (".venv", ".git", "build", "dist", "*.egg-info", "*.so", "*.pyd", "__pycache__")
_SKIP += (".*_cache", ".hypothesis", "site", "bench", "tests", "docs", "examples")

_PROBE = """
import sys, kpax
from kpax.proto import accel
from kpax.producer import fastpath
print(kpax.__file__)
print(accel.speedups is not None, fastpath.sendpath is not None)
"""


@dataclass
class Built:
    sdist: Path
    wheel: Path  # with the C extensions
    fallback_wheel: Path  # built with CC=/bin/false
    fallback_log: str
    venv_python: Path
    venv_bin: Path
    env: dict[str, str]
    tmp: Path
    timings: dict[str, float]


def _run(
    args: list[str | Path], env: dict[str, str], cwd: Path, **kw: object
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(a) for a in args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        **kw,  # type: ignore[call-overload]
    )
    assert out.returncode == 0, f"{args} exited {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KPAX_"))}
    env.pop("VIRTUAL_ENV", None)
    env.pop("CC", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    timings: dict[str, float] = {}

    t0 = time.monotonic()
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*_SKIP))
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", tmp / "sdist", src], env, tmp)
    (sdist,) = (tmp / "sdist").glob("kpax-*.tar.gz")
    timings["sdist"] = time.monotonic() - t0

    t0 = time.monotonic()
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v"]
    _run([*pip_wheel, "-w", tmp / "wheel", sdist], env, tmp)
    (wheel,) = (tmp / "wheel").glob("kpax-*.whl")
    timings["wheel"] = time.monotonic() - t0

    t0 = time.monotonic()
    no_cc = {**env, "CC": "/bin/false"}
    fallback = _run([*pip_wheel, "-w", tmp / "fallback", sdist], no_cc, tmp)
    (fallback_wheel,) = (tmp / "fallback").glob("kpax-*.whl")
    timings["fallback wheel"] = time.monotonic() - t0

    t0 = time.monotonic()
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", venv], env, tmp)
    venv_bin = venv / BIN
    venv_python = venv_bin / "python"
    _run([venv_python, "-m", "pip", "install", "-q", wheel], env, tmp)
    timings["venv + install"] = time.monotonic() - t0

    yield Built(
        sdist,
        wheel,
        fallback_wheel,
        fallback.stdout + fallback.stderr,
        venv_python,
        venv_bin,
        env,
        tmp,
        timings,
    )
    print("test_wheel timings (s):", {k: round(v, 1) for k, v in timings.items()})


def test_sdist_carries_sources_stubs_and_license(built: Built) -> None:
    with tarfile.open(built.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for need in (
        "LICENSE",
        "setup.py",
        "pyproject.toml",
        "kpax/proto/_speedups.c",
        "kpax/proto/_speedups.pyi",
        "kpax/producer/_sendpath.c",
        "kpax/producer/_sendpath.pyi",
        "kpax/py.typed",
    ):
        assert need in names, f"{need} missing from {built.sdist.name}"
    with zipfile.ZipFile(built.wheel) as whl:
        wnames = whl.namelist()
    assert any(
        n.startswith("kpax/proto/_speedups.") and n.endswith((".so", ".pyd")) for n in wnames
    )
    assert any(
        n.startswith("kpax/producer/_sendpath.") and n.endswith((".so", ".pyd")) for n in wnames
    )
    assert not [n for n in wnames if n.endswith(".c")], "C sources belong in the sdist only"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wnames)


def _round_trip(
    built: Built, kpax_cmd: list[str | Path], env: dict[str, str], bootstrap: str, topic: str
) -> None:
    boot = ["-b", bootstrap]
    _run([*kpax_cmd, "produce", topic, *boot], env, built.tmp, input="one\ntwo\nthree\n")
    got = _run([*kpax_cmd, "consume", topic, *boot, "--count", "3"], env, built.tmp)
    assert got.stdout.splitlines() == ["one", "two", "three"], got.stderr


def test_installed_wheel_runs_with_c_extensions(
    built: Built, kafka: KafkaCluster, topic: object
) -> None:
    out = _run([built.venv_bin / "kpax", "--version"], built.env, built.tmp)
    assert out.stdout.strip() == f"kpax {__version__}"
    probe = _run([built.venv_python, "-c", _PROBE], built.env, built.tmp).stdout.splitlines()
    assert Path(probe[0]).is_relative_to(built.tmp / "venv"), probe  # not the work tree
    assert probe[1] == "True True", f"C extensions loaded (speedups, sendpath): {probe[1]}"
    assert callable(topic)
    _round_trip(built, [built.venv_bin / "kpax"], built.env, kafka.bootstrap, topic())


def test_wheel_without_compiler_warns_installs_and_runs(
    built: Built, kafka: KafkaCluster, topic: object
) -> None:
    for ext in ("kpax.proto._speedups", "kpax.producer._sendpath"):
        line = f"kpax: C extension {ext} not built ("
        assert line in built.fallback_log, f"no warning for {ext}"
    warning = next(s for s in built.fallback_log.splitlines() if "kpax: C extension" in s)
    assert warning.rstrip().endswith("): kpax will run its pure-Python code"), warning
    with zipfile.ZipFile(built.fallback_wheel) as whl:
        assert not [n for n in whl.namelist() if n.endswith((".so", ".pyd"))]
    # Installed beside the first (same venv's dependencies), first on sys.path.
    target = built.tmp / "fallback-install"
    pip = [built.venv_python, "-m", "pip", "install", "-q", "--no-deps", "--target", target]
    _run([*pip, built.fallback_wheel], built.env, built.tmp)
    env = {**built.env, "PYTHONPATH": str(target)}
    probe = _run([built.venv_python, "-c", _PROBE], env, built.tmp).stdout.splitlines()
    assert Path(probe[0]).is_relative_to(target), probe
    assert probe[1] == "False False", probe
    assert callable(topic)
    kpax_cmd: list[str | Path] = [built.venv_python, "-m", "kpax.cli.main"]
    _round_trip(built, kpax_cmd, env, kafka.bootstrap, topic())
