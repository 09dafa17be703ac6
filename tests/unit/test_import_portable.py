"""`import kpax`, the `kpax` command and the pytest plugin on any OS, and cheaply.

The pytest plugin (opt-in: ``pytest_plugins = ["kpax.testing.pytest_plugin"]``) is
imported at every pytest start of a project that uses it, so importing it must cost
a few milliseconds and load neither the client (asyncio, the generated protocol
code) nor the broker machinery (kpax.testing.local, jars, containers). And none of
these imports may need what Windows lacks: ``fcntl`` or ``signal.SIGPIPE``. Each
check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

# Imported by the plugin module: the time it adds to a pytest start-up, and what it loads.
_PLUGIN_PROBE = """
import json, sys, time
import pytest
before = set(sys.modules)
t0 = time.perf_counter()
import kpax.testing.pytest_plugin
dt = time.perf_counter() - t0
print(json.dumps({"ms": dt * 1000, "new": sorted(set(sys.modules) - before)}))
"""

_HEAVY = (
    "asyncio",
    "ssl",
    "socket",
    "subprocess",
    "kpax.aio",
    "kpax.producer",
    "kpax.consumer",
    "kpax.admin",
    "kpax.broker",
    "kpax.proto",
    "kpax.testing.local",
    "kpax.testing.jars",
    "kpax.testing.containers",
    "kpax.testing.backends",
    "testcontainers",
    "docker",
)


def _probe() -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PLUGIN_PROBE], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_pytest_plugin_import_is_cheap_and_light() -> None:
    # The best of three runs: the machine may be busy; the import itself takes ~2 ms
    # (it took ~0.9-2.7 s when the plugin imported kpax.testing and the client eagerly).
    runs = [_probe() for _ in range(3)]
    best = min(float(r["ms"]) for r in runs)  # type: ignore[arg-type]
    new = runs[0]["new"]
    assert isinstance(new, list)
    heavy = [m for m in new if any(m == h or m.startswith(h + ".") for h in _HEAVY)]
    assert not heavy, f"importing the pytest plugin loads {heavy}"
    assert best < 20.0, f"importing the pytest plugin took {best:.1f} ms (new modules: {new})"


def test_import_kpax_is_lazy() -> None:
    code = (
        "import sys, kpax\n"
        "assert 'asyncio' not in sys.modules and 'kpax.producer' not in sys.modules\n"
        "from kpax import Producer, TopicPartition\n"
        "assert kpax.Producer is Producer and kpax.aio.Producer is not None\n"
        "assert all(getattr(kpax, n) is not None for n in kpax.__all__)\n"
        "assert set(kpax.__all__) <= set(dir(kpax))\n"
        "import kpax.testing as t\n"
        "assert 'kpax.testing.local' not in sys.modules\n"
        "assert all(getattr(t, n) is not None for n in t.__all__)\n"
        "try:\n"
        "    kpax.NoSuchName\n"
        "except AttributeError as e:\n"
        "    assert 'NoSuchName' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# As on Windows: no fcntl module, no SIGPIPE (nor SIGKILL, SIGSTOP, SIGCONT, SIGHUP).
_NO_POSIX = """
import signal, sys
sys.modules["fcntl"] = None  # `import fcntl` raises ImportError
for name in ("SIGPIPE", "SIGKILL", "SIGSTOP", "SIGCONT", "SIGHUP"):
    delattr(signal, name)
import kpax
from kpax import Producer, Consumer, Admin, aio
import kpax.testing
import kpax.testing.pytest_plugin
import kpax.testing.base, kpax.testing.local, kpax.testing.backends  # the kafka fixture's
import kpax.cli.main
for argv in (["--version"], ["--help"], ["topics", "--help"]):
    try:
        kpax.cli.main.main(argv)
    except SystemExit as exc:
        assert exc.code == 0, (argv, exc.code)
print("ok")
"""


def test_imports_without_fcntl_and_sigpipe() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _NO_POSIX], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("kpax ")  # --version
    assert out.stdout.rstrip().endswith("ok")


def test_cli_main_without_sigpipe_runs_a_command() -> None:
    # main() itself (not only --help, which exits in argparse) with no SIGPIPE: a usage
    # error from a subcommand comes back as exit 2, and the signal handlers are restored.
    code = (
        "import signal, sys\n"
        "del signal.SIGPIPE\n"
        "import kpax.cli.main as m\n"
        "before = signal.getsignal(signal.SIGINT)\n"
        "rc = m.main(['offsets', 'orders', '--time', 'not-a-time', '-b', '127.0.0.1:1'])\n"
        "assert signal.getsignal(signal.SIGINT) is before\n"
        "print(rc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2", (out.stdout, out.stderr)


def test_subpackages_are_attributes_of_kpax_as_before() -> None:
    """``import kpax`` then ``kpax.errors.X`` (no import of kpax.errors first)
    works, as it did when kpax imported its subpackages eagerly."""
    code = (
        "import kpax\n"
        "assert kpax.errors.OffsetOutOfRangeError.retriable is not None\n"
        "assert kpax.structs.TopicPartition('t', 0).partition == 0\n"
        "assert kpax.aio.Producer\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
