"""The `kpax` command's progress indicator: drawn on stderr when it is a terminal
(a pseudo-terminal here), never when stderr is a pipe, and erased at the end.

Both runs last over a second (the indicator's first draw) because their input
arrives slowly: produce reads a pipe fed in two halves, consume waits for the
second half of its --count to be produced.
"""

from __future__ import annotations

import os
import pty
import subprocess
import time
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.integration.test_cli import cli_env, kpax_cmd

pytestmark = pytest.mark.timeout(120)


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def _tty_run(kafka: KafkaCluster, args: list[str], feed: Any) -> tuple[int, str]:
    """Run the command with stderr on a pseudo-terminal; ``feed(proc)`` drives it."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            kpax_cmd(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=slave,
            env=cli_env(kafka.bootstrap),
        )
        os.close(slave)
        slave = -1
        feed(proc)
        rc = proc.wait(60)
        return rc, _read_all(master)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def test_progress_on_a_terminal_only(kafka: KafkaCluster, topic: Any) -> None:
    t = topic(partitions=1)

    def slow_lines(proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"line-%05d\n" % i for i in range(3000)))
        proc.stdin.flush()
        time.sleep(1.6)
        proc.stdin.write(b"".join(b"line-%05d\n" % i for i in range(3000, 6000)))
        proc.stdin.close()

    rc, err = _tty_run(kafka, ["produce", t], slow_lines)
    assert rc == 0, err
    assert "\rproducing " in err and " records " in err, repr(err)
    assert "\r\x1b[K" in err  # erased before the summary
    assert "produced 6,000 records" in err, repr(err)

    def produce_second_half(proc: subprocess.Popen[bytes]) -> None:
        time.sleep(1.6)
        with kpax.Producer(kafka.bootstrap) as p:
            for i in range(6000, 6100):
                p.send(t, b"late-%d" % i)
        assert proc.stdin is not None
        proc.stdin.close()

    rc, err = _tty_run(kafka, ["consume", t, "--count", "6100", "--follow"], produce_second_half)
    assert rc == 0, err
    assert "\rconsuming [" in err and "6100/6100" in err, repr(err)

    # stderr a pipe: no indicator, only the summary (none at all for consume)
    proc = subprocess.run(
        kpax_cmd("consume", t, "--count", "6100"),
        capture_output=True,
        env=cli_env(kafka.bootstrap),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.count(b"\n") == 6100
    assert b"\r" not in proc.stderr and b"consuming" not in proc.stderr, proc.stderr
