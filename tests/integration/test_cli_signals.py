"""`kpax produce` stopped by a signal while it reads a pipe that stays open.

A million lines are fed through a pipe that is never closed; once the topic holds
part of them, the command gets SIGTERM (``kill``) or SIGINT (Ctrl-C). It must exit
within a few seconds with 143 (128 + 15) after SIGTERM and 130 after Ctrl-C, say
how many records were acknowledged, and the topic must hold exactly those: the
first N lines, in order (one partition), nothing acknowledged lost and nothing
reported as produced missing. `kpax consume --group --follow` stopped by
SIGTERM stops as cleanly as after Ctrl-C (what it printed committed, the group
left) and exits 143 too.
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
from tests.integration.test_cli import cli_env, kpax_cmd, ok, run_kpax
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
    assert rc == 128 + sig and "Traceback" not in err, (rc, err)
    assert took < 10, f"exited {took:.1f}s after {sig.name}"
    acked, count, unknown, unsent = _outcome(err)
    assert unknown == unsent == 0 and acked == count >= 100_000, err
    held = _records_in(kafka.bootstrap, t)
    assert held == acked, (held, err)
    values = _read_values(kafka.bootstrap, t, held)
    assert values == [b"line %d" % i for i in range(held)]


def test_sigterm_stops_a_group_consumer_cleanly_with_143(kafka: KafkaCluster, topic: Any) -> None:
    t = topic(1)
    group = f"g-{t}"
    ok(run_kpax(kafka.bootstrap, "produce", t, stdin=b"a\nb\n"))
    proc = subprocess.Popen(
        kpax_cmd("consume", t, "--group", group, "--follow"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(kafka.bootstrap),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"a\n" and proc.stdout.readline() == b"b\n"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 143 and "interrupted after 2 records" in err and "Traceback" not in err, (rc, err)
    with kpax.Admin(kafka.bootstrap) as admin:  # committed what it printed, left the group
        assert admin.list_group_offsets(group)[kpax.TopicPartition(t, 0)].offset == 2
        assert admin.describe_groups([group])[group].is_empty
