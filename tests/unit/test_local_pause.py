"""LocalCluster.pause_broker returns only once the broker's every thread is stopped.

kill(SIGSTOP) returns when the signal is queued; a busy JVM's network thread
could still answer a request before it is next scheduled (a clean-clone run once
got an ApiVersions answer from a "paused" broker). A child process with many
busy threads stands in for the JVM.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpax.testing import local
from kpax.testing.local import LocalCluster, _Node, _thread_states

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs procfs")

_BUSY = """
import sys, threading
def spin():
    while True:
        pass
for _ in range(24):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def busy_child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(
        [sys.executable, "-c", _BUSY, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    yield child
    child.kill()
    child.wait()


def _cluster_of(child: subprocess.Popen[bytes], tmp_path: Path) -> LocalCluster:
    cluster = LocalCluster(brokers=1)
    cluster.nodes = {1: _Node(1, {}, tmp_path, pid=child.pid, proc=child)}
    return cluster


def test_pause_returns_with_every_thread_stopped_and_resume_with_none(
    busy_child: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    cluster = _cluster_of(busy_child, tmp_path)
    for _ in range(20):
        cluster.pause_broker(1)
        states = _thread_states(busy_child.pid)
        assert states and len(states) >= 25
        assert set(states) <= {"T", "t"}, states
        cluster.resume_broker(1)
        states = _thread_states(busy_child.pid)
        assert states and not set(states) & {"T", "t"}, states


def test_a_process_that_does_not_stop_is_named_in_bounded_time(
    busy_child: subprocess.Popen[bytes],
) -> None:
    with pytest.raises(TimeoutError, match=f"process {busy_child.pid}: not every thread stopped"):
        local.wait_threads(busy_child.pid, stopped=True, timeout=0.05)


def test_a_gone_process_is_not_waited_for() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    local.wait_threads(child.pid, stopped=True, timeout=5.0)  # returns at once
