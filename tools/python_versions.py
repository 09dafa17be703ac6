"""kpax's wheel on each supported Python: built, installed, and a round trip run with it.

``make test-pythons`` (part of ``make test``): for each version given (the
``PYVERSIONS`` of the Makefile, the versions pyproject.toml's classifiers
declare), find its interpreter (``python3.X`` on PATH, else the newest
``~/.pyenv/versions/3.X.*``), then

1. a venv ``.venv-py3X`` with the build requirements and kpax's runtime
   dependencies, made again when pyproject.toml, setup.py, the C sources or the
   interpreter change (a fingerprint in the venv says which it was made for);
2. kpax's wheel built by that interpreter (``pip wheel --no-build-isolation``:
   the C extensions compiled for it) and installed into the venv, again only
   when a file that goes into the wheel changed;
3. ``tools/wheel_smoke.py`` run by the venv's interpreter, from outside the
   source tree, against one local broker started here for all versions: the C
   extensions loaded, every module importing, a produce/consume round trip.

Every version is run even if one fails; a missing interpreter is a failure
that says how to get it. Prints one line per version and the time each step
took; exit 1 if any failed.

Imports: the standard library; kpax.testing (the local broker).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, a kpax dependency there
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parents[1]
#: What the venv is made from: a change makes it anew.
VENV_INPUTS = (
    "pyproject.toml",
    "setup.py",
    "kpax/proto/_speedups.c",
    "kpax/producer/_sendpath.c",
    "kpax/proto/_varint.h",
)
#: Suffixes of the files that go into the wheel (pyproject.toml's package data too).
WHEEL_SUFFIXES = (".py", ".pyi", ".c", ".h", ".typed", ".xml", ".json")


class Failed(Exception):
    """A step failed; the message says which and why."""


def find_python(version: str) -> str:
    """The interpreter of *version* ("3.12"), or Failed saying where it was looked for."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"

    def patch(path: str) -> tuple[int, ...]:
        m = re.search(rf"/{re.escape(version)}\.(\d+)/", path)
        return (int(m.group(1)),) if m else (-1,)

    on_path = shutil.which(f"python{version}")
    candidates = [on_path] if on_path else []
    candidates += sorted(
        glob.glob(f"{pyenv}/{version}.*/bin/python{version}"), key=patch, reverse=True
    )
    for candidate in candidates:
        try:
            out = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if out == version:
            return candidate
    raise Failed(
        f"no Python {version} interpreter (looked for python{version} on PATH and in "
        f"{pyenv}/{version}.*): install it (`pyenv install {version}`, or your OS's "
        f"python{version} package), or leave it out: make test PYVERSIONS='...'"
    )


def _digest(paths: list[Path], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for path in sorted(paths):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def wheel_inputs() -> list[Path]:
    return [
        p
        for p in (ROOT / "kpax").rglob("*")
        if p.is_file() and p.suffix in WHEEL_SUFFIXES and "__pycache__" not in p.parts
    ] + [ROOT / name for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")]


def _run(what: str, cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, cwd=cwd)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise Failed(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _clean_env() -> dict[str, str]:
    """The environment without what would make a venv's Python import the source tree."""
    return {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }


def prepare(version: str, python: str, timings: dict[str, float]) -> Path:
    """The venv of *version* with this tree's wheel installed; its interpreter."""
    venv = ROOT / f".venv-py{version.replace('.', '')}"
    vpy = venv / "bin" / "python"
    env = _clean_env()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    stamp = venv / ".kpax-fingerprint"
    fingerprint = _digest([ROOT / n for n in VENV_INPUTS], extra=str(Path(python).resolve()))
    t = time.monotonic()
    if not vpy.exists() or not stamp.is_file() or stamp.read_text() != fingerprint:
        shutil.rmtree(venv, ignore_errors=True)
        _run(f"python{version} -m venv", [python, "-m", "venv", str(venv)], env=env)
        requirements = [
            *pyproject["build-system"]["requires"],
            *pyproject["project"]["dependencies"],
        ]
        _run(
            f"installing {' '.join(requirements)}",
            [str(vpy), "-m", "pip", "install", "-q", *requirements],
            env=env,
        )
        stamp.write_text(fingerprint)
        timings["venv"] = time.monotonic() - t
    t = time.monotonic()
    wheel_stamp = venv / ".kpax-wheel"
    wheel_print = _digest(wheel_inputs())
    if not wheel_stamp.is_file() or wheel_stamp.read_text() != wheel_print:
        out = venv / "wheel"
        shutil.rmtree(out, ignore_errors=True)
        _run(
            f"building the wheel with Python {version}",
            [
                str(vpy),
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(out),
                str(ROOT),
            ],
            env=env,
            cwd=ROOT,
        )
        wheels = sorted(out.glob("kpax-*.whl"))
        if len(wheels) != 1:
            raise Failed(f"the wheel build gave {[w.name for w in wheels]}, not one kpax wheel")
        tag = f"cp{version.replace('.', '')}"
        if f"-{tag}-{tag}-" not in wheels[0].name:
            raise Failed(f"{wheels[0].name}: not a {tag} wheel with C extensions")
        _run(
            "installing the wheel",
            [
                str(vpy),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--force-reinstall",
                str(wheels[0]),
            ],
            env=env,
        )
        wheel_stamp.write_text(wheel_print)
        timings["wheel"] = time.monotonic() - t
    return vpy


def smoke(vpy: Path, bootstrap: str, timings: dict[str, float]) -> str:
    t = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kpax-wheel-smoke-") as cwd:
        proc = subprocess.run(
            [str(vpy), str(ROOT / "tools" / "wheel_smoke.py"), "--bootstrap", bootstrap],
            cwd=cwd,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    timings["round trip"] = time.monotonic() - t
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise Failed(f"tools/wheel_smoke.py failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", help="e.g. 3.10 3.11 3.12 3.13")
    args = parser.parse_args(argv)
    from kpax.testing import start_kafka

    started = time.monotonic()
    failed: list[str] = []
    cluster = None
    try:
        for version in args.versions:
            timings: dict[str, float] = {}
            try:
                python = find_python(version)
                vpy = prepare(version, python, timings)
                if cluster is None:
                    t = time.monotonic()
                    cluster = start_kafka(1, backend="local")
                    timings["broker start"] = time.monotonic() - t
                line = smoke(vpy, cluster.bootstrap, timings)
            except Failed as exc:
                failed.append(version)
                print(f"=== Python {version}: FAILED: {exc}", flush=True)
                continue
            took = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
            print(f"=== {line} [{took}]", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    total = time.monotonic() - started
    if failed:
        print(f"test-pythons: failed on Python {' '.join(failed)} ({total:.0f}s)")
        return 1
    print(f"test-pythons: kpax's wheel works on Python {' '.join(args.versions)} ({total:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
