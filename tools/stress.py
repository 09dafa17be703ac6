"""Run the test suite several times in a row while a CPU hog keeps one core busy.

``make test-stress`` (``python tools/stress.py --runs 3``): the suite must not
flake on a busy machine. A busy-looping process, pinned to CPU 0 when
``os.sched_setaffinity`` exists, takes one of the machine's cores for the whole
time; the suite (``pytest tests``, or the paths given after ``--``) runs
``--runs`` times back to back. Each run's outcome and duration is printed, then
a summary; the exit status is 1 if any run failed.

Imports: the standard library only (it runs the suite; it does not import kpax).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time

_HOG = """
import os
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {0})
while True:
    pass
"""


def start_hog() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _HOG])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/stress.py", description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("pytest_args", nargs="*", default=["tests"], help="passed to pytest")
    a = ap.parse_args(argv)
    hog = start_hog()
    results: list[tuple[int, float]] = []
    try:
        for i in range(1, a.runs + 1):
            print(f"== stress run {i}/{a.runs} (CPU hog pid {hog.pid} on one core)", flush=True)
            started = time.monotonic()
            rc = subprocess.call([sys.executable, "-m", "pytest", "-q", *a.pytest_args])
            took = time.monotonic() - started
            results.append((rc, took))
            print(f"== stress run {i}: exit {rc} after {took / 60:.1f} min", flush=True)
    finally:
        hog.send_signal(signal.SIGKILL)
        hog.wait()
    print("\nstress summary:")
    for i, (rc, took) in enumerate(results, 1):
        print(f"  run {i}: {'passed' if rc == 0 else f'FAILED (exit {rc})'} in {took / 60:.1f} min")
    return 0 if results and all(rc == 0 for rc, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
