"""The `kpax` command's progress indicator: drawn on stderr when it is a terminal
(a pseudo-terminal here), never when stderr is a pipe, and erased at the end.

Both runs last over a second (the indicator's first draw) after the command is
seen working: produce reads a pipe whose second half is written a second after
its first half is on the topic; consume waits for the end of its --count,
produced a second after it wrote the first records.
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
from tests.wait import eventually

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
    """Run the command with stderr on a pseudo-terminal (stdout a pipe);
    ``feed(proc)`` drives it."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            kpax_cmd(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=cli_env(kafka.bootstrap),
        )
        os.close(slave)
        slave = -1
        feed(proc)
        assert proc.stdout is not None
        proc.stdout.read()
        rc = proc.wait(60)
        return rc, _read_all(master)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


# The indicator is first drawn once the command has run for a second: each run
# below waits until the command is working (its first records are out), then
# keeps it going for longer than that second before letting it finish.
_INDICATOR_DELAY = 1.2


def test_progress_on_a_terminal_only(kafka: KafkaCluster, topic: Any) -> None:
    t = topic(partitions=1)
    tp = kpax.TopicPartition(t, 0)

    def slow_lines(proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"line-%05d\n" % i for i in range(3000)))
        proc.stdin.flush()
        with kpax.Admin(kafka.bootstrap) as admin:  # the command is producing
            eventually(lambda: admin.list_offsets({tp: "latest"})[tp].offset == 3000, 60)
        time.sleep(_INDICATOR_DELAY)
        proc.stdin.write(b"".join(b"line-%05d\n" % i for i in range(3000, 6000)))
        proc.stdin.close()

    rc, err = _tty_run(kafka, ["produce", t], slow_lines)
    assert rc == 0, err
    assert "\rproducing " in err and " records " in err, repr(err)
    assert "\r\x1b[K" in err  # erased before the summary
    assert "produced 6,000 records" in err, repr(err)

    def produce_second_half(proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for _ in range(6000):  # the command is consuming: the first 6,000 are out
            assert proc.stdout.readline()
        time.sleep(_INDICATOR_DELAY)
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
