"""`kpax produce` stopped by a signal while it reads a pipe that stays open.

A million lines are fed through a pipe that is never closed; once the topic holds
part of them, the command gets SIGTERM (``kill``) or SIGINT (Ctrl-C). It must exit
within a few seconds, say how many records were acknowledged, and the topic must
hold exactly those: the first N lines, in order (one partition), nothing
acknowledged lost and nothing reported as produced missing.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.integration.test_cli import cli_env, kpax_cmd
from tests.integration.test_cli_hostile import _outcome, _records_in, _wait_for

pytestmark = pytest.mark.timeout(240)

LINES = 1_000_000


def _read_values(bootstrap: str, topic: str, n: int) -> list[bytes]:
    out: list[bytes] = []
    with kpax.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(topic, 0)])
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(1.0))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_in_the_middle_of_a_million_lines_from_an_open_pipe(
    kafka: KafkaCluster, topic: Any, sig: signal.Signals
) -> None:
    t = topic(1)
    proc = subprocess.Popen(
        kpax_cmd("produce", t),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(kafka.bootstrap),
    )
    assert proc.stdin is not None and proc.stderr is not None
    stdin = proc.stdin

    def feed() -> None:  # a million lines, then the pipe stays open
        try:
            for start in range(0, LINES, 10_000):
                stdin.write(b"".join(b"line %d\n" % i for i in range(start, start + 10_000)))
            stdin.flush()
        except (OSError, ValueError):  # the command exited (broken pipe)
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        _wait_for("records in the topic", lambda: _records_in(kafka.bootstrap, t) >= 100_000)
        signalled = time.monotonic()
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
        took = time.monotonic() - signalled
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(OSError):
            stdin.close()
    writer.join(10)
    assert rc == 130 and "Traceback" not in err, (rc, err)
    assert took < 10, f"exited {took:.1f}s after {sig.name}"
    acked, count, unknown, unsent = _outcome(err)
    assert unknown == unsent == 0 and acked == count >= 100_000, err
    held = _records_in(kafka.bootstrap, t)
    assert held == acked, (held, err)
    values = _read_values(kafka.bootstrap, t, held)
    assert values == [b"line %d" % i for i in range(held)]
