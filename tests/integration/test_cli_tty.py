"""The `kpax` command's progress indicator: drawn on stderr when it is a terminal
(a pseudo-terminal here), never when stderr is a pipe, and erased at the end.

Both runs go on until the indicator is drawn (a second after the command
starts): produce reads a pipe whose second half is written once its first half
is on the topic and the indicator is on the terminal; consume waits for the end
of its --count, produced once it wrote the first records and drew the indicator.
"""

from __future__ import annotations

import os
import pty
import select
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


class _Terminal:
    """The terminal side of the command's stderr: what it has drawn so far."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = ""

    def drawn(self, text: str, wait: float = 0.1) -> bool:
        """Whether ``text`` is among what the command drew (reading for up to ``wait``)."""
        deadline = time.monotonic() + wait
        while text not in self.seen:
            ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                return False
            try:
                self.seen += os.read(self.fd, 65536).decode(errors="replace")
            except OSError:  # EIO: the command's side is closed
                return False
        return True

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        """Read what the command draws until ``text`` is among it."""
        assert self.drawn(text, timeout), f"{text!r} not drawn: {self.seen!r}"

    def rest(self) -> str:
        return self.seen + _read_all(self.fd)


def _tty_run(kafka: KafkaCluster, args: list[str], feed: Any) -> tuple[int, str]:
    """Run the command with stderr on a pseudo-terminal (stdout a pipe);
    ``feed(proc, terminal)`` drives it."""
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
        terminal = _Terminal(master)
        feed(proc, terminal)
        assert proc.stdout is not None
        proc.stdout.read()
        rc = proc.wait(60)
        return rc, terminal.rest()
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def test_progress_on_a_terminal_only(kafka: KafkaCluster, topic: Any) -> None:
    t = topic(partitions=1)
    tp = kpax.TopicPartition(t, 0)

    lines = 3000

    def slow_lines(proc: subprocess.Popen[bytes], terminal: _Terminal) -> None:
        nonlocal lines
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"line-%05d\n" % i for i in range(lines)))
        proc.stdin.flush()
        with kpax.Admin(kafka.bootstrap) as admin:  # the command is producing
            eventually(lambda: admin.list_offsets({tp: "latest"})[tp].offset == lines, 60)
        # The indicator is drawn as records flow, once the command has run a second:
        # keep them flowing until it is on the terminal.
        deadline = time.monotonic() + 60
        while not terminal.drawn("\rproducing "):
            assert time.monotonic() < deadline, f"no indicator: {terminal.seen!r}"
            proc.stdin.write(b"".join(b"line-%05d\n" % i for i in range(lines, lines + 100)))
            proc.stdin.flush()
            lines += 100
        proc.stdin.close()

    rc, err = _tty_run(kafka, ["produce", t], slow_lines)
    assert rc == 0, err
    assert "\rproducing " in err and " records " in err, repr(err)
    assert "\r\x1b[K" in err  # erased before the summary
    assert f"produced {lines:,} records" in err, repr(err)

    want = lines + 1000

    def produce_second_half(proc: subprocess.Popen[bytes], terminal: _Terminal) -> None:
        assert proc.stdout is not None
        for _ in range(lines):  # the command is consuming: the first records are out
            assert proc.stdout.readline()
        with kpax.Producer(kafka.bootstrap) as p:
            # It draws as records come, once it has run a second: send a few at a
            # time until the indicator is on the terminal, then the rest.
            i = lines
            deadline = time.monotonic() + 60
            while i < want - 10 and not terminal.drawn("\rconsuming ["):
                assert time.monotonic() < deadline, f"no indicator: {terminal.seen!r}"
                for _ in range(10):
                    p.send(t, b"late-%d" % i)
                    i += 1
                p.flush()
            for j in range(i, want):
                p.send(t, b"late-%d" % j)
        assert proc.stdin is not None
        proc.stdin.close()

    rc, err = _tty_run(kafka, ["consume", t, "--count", str(want), "--follow"], produce_second_half)
    assert rc == 0, err
    assert "\rconsuming [" in err and f"/{want} " in err, repr(err)  # progress to --count

    # stderr a pipe: no indicator, only the summary (none at all for consume)
    proc = subprocess.run(
        kpax_cmd("consume", t, "--count", str(want)),
        capture_output=True,
        env=cli_env(kafka.bootstrap),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.count(b"\n") == want
    assert b"\r" not in proc.stderr and b"consuming" not in proc.stderr, proc.stderr
