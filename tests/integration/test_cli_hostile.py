"""The `kpax` command under hostile and careless use (real broker, the command as
a subprocess): Ctrl-C while the broker does not answer, summaries that must
match what the topic holds, timeouts given before the subcommand or absurd,
malformed JSON/msgpack items, and times before 1970 or far in the future.

The Ctrl-C test pauses (SIGSTOP) a broker of its own from ``kafka_factory``;
with ``KPAX_TEST_BOOTSTRAP`` (a cluster the tests cannot pause) it is skipped.
"""

from __future__ import annotations

import fcntl
import json
import re
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from kpax.testing.pytest_plugin import create_topic
from tests.integration.test_cli import cli_env, kpax_cmd, ok, one_line_error, run_kpax

pytestmark = pytest.mark.timeout(180)

_OUTCOME = re.compile(r"([\d,]+) of ([\d,]+) records acknowledged")
_UNKNOWN = re.compile(r"([\d,]+) not acknowledged (?:within|when)")
_UNSENT = re.compile(r"([\d,]+) not sent (?:within|when)")


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def _outcome(err: str) -> tuple[int, int, int, int]:
    """(acknowledged, handed to the producer, unknown outcome, never sent) from a
    summary line."""
    m = _OUTCOME.search(err)
    assert m, f"no outcome in {err!r}"
    u = _UNKNOWN.search(err)
    n = _UNSENT.search(err)
    return (
        _num(m.group(1)),
        _num(m.group(2)),
        _num(u.group(1)) if u else 0,
        _num(n.group(1)) if n else 0,
    )


def _unread(pipe: IO[bytes]) -> int:
    """Bytes written to *pipe* that its reader has not read yet."""
    buf = fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", buf)[0])


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _records_in(bootstrap: str, topic: str) -> int:
    with kpax.Admin(bootstrap) as admin:
        parts = admin.describe_topics([topic])[topic].partitions
        tps = [kpax.TopicPartition(topic, p.partition) for p in parts]
        latest = admin.list_offsets(dict.fromkeys(tps, "latest"))
        return sum(latest[tp].offset for tp in tps)


@pytest.fixture
def k(kafka: KafkaCluster) -> Any:
    def call(*args: str, **kw: Any) -> Any:
        return run_kpax(kafka.bootstrap, *args, **kw)

    return call


def test_ctrl_c_with_a_paused_broker_exits_within_timeout(
    kafka_factory: Callable[..., KafkaCluster],
) -> None:
    """Two runs write to their topics; the broker is paused (nothing answers) and
    each gets more input, then Ctrl-C: the first (--timeout 5) exits after about
    5 s, the second (--timeout 120) at a second Ctrl-C. Both summaries bound what
    the topic holds once the broker resumes."""
    cluster = kafka_factory()
    if cluster.backend == "existing":
        pytest.skip("needs a broker the test can pause (not KPAX_TEST_BOOTSTRAP)")
    node = next(iter(cluster.brokers))
    runs = []
    for timeout in ("5", "120"):
        t = create_topic(cluster)
        proc = subprocess.Popen(
            kpax_cmd("produce", t, "--timeout", timeout),
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(cluster.bootstrap),
        )
        runs.append((t, proc))
    paused = False
    results = []
    try:
        for _, proc in runs:
            assert proc.stdin is not None
            proc.stdin.write(b"".join(b"a%d\n" % i for i in range(1000)))
            proc.stdin.flush()
        for t, _ in runs:
            _wait_for("the first records", lambda t=t: _records_in(cluster.bootstrap, t) == 1000)
        cluster.pause_broker(node)
        paused = True
        for _, proc in runs:
            assert proc.stdin is not None
            stdin = proc.stdin
            stdin.write(b"".join(b"b%d\n" % i for i in range(100_000)))
            stdin.flush()
            _wait_for("the command to read its input", lambda s=stdin: _unread(s) == 0)
        # --timeout 5: one Ctrl-C (stdin still open; nothing can be acknowledged)
        t, proc = runs[0]
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)  # before the fix: delivery_timeout_ms, 120 s
        results.append((t, rc, time.monotonic() - started))
        # --timeout 120: Ctrl-C, then again until it exits (a second one ends the wait)
        t, proc = runs[1]
        started = time.monotonic()
        while True:
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                assert time.monotonic() - started < 60, "repeated Ctrl-C did not end the run"
        results.append((t, rc, time.monotonic() - started))
    finally:
        for _, proc in runs:
            if proc.poll() is None:
                proc.kill()
        if paused:
            cluster.resume_broker(node)
    for (t, rc, elapsed), (_, proc), limit in zip(results, runs, (5 + 10, 10), strict=True):
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        assert rc == 130, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        # --timeout (or the second Ctrl-C), plus closing the producer on a busy machine
        assert elapsed < limit, f"exit {elapsed:.1f}s after Ctrl-C: {err}"
        acked, count, unknown, unsent = _outcome(err)
        assert 1000 <= count <= 101_000 and acked + unknown + unsent == count, err
        assert unknown + unsent >= count - 1000 and "outcome unknown" in err
        # whatever the resumed broker still writes, the summary bounds it (records
        # reported as never sent are not written)
        held = _records_in(cluster.bootstrap, t)
        assert acked <= held <= acked + unknown, (held, err)
    assert "when Ctrl-C stopped the wait" in err


def test_summary_counts_what_the_topic_holds(
    kafka: KafkaCluster, k: Any, topic: Any, tmp_path: Path
) -> None:
    """After a run with many records, and after a Ctrl-C in the middle of one:
    the summary's acknowledged count is what the topic holds."""
    t = topic(3)
    n = 500_000
    src = tmp_path / "many.txt"
    src.write_bytes(b"".join(b"k%d record %d\n" % (i % 97, i) for i in range(n)))
    r = ok(k("produce", t, "--file", str(src), "-K", " "))
    assert f"produced {n:,} records" in r.err
    assert _records_in(kafka.bootstrap, t) == n

    t2 = topic(3)
    proc = subprocess.Popen(
        kpax_cmd("produce", t2),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(kafka.bootstrap),
    )
    assert proc.stdin is not None and proc.stderr is not None
    stdin = proc.stdin

    def feed() -> None:  # an endless input, interrupted in the middle
        block = b"".join(b"line %d\n" % i for i in range(10_000))
        try:
            while True:
                stdin.write(block)
        except (OSError, ValueError):  # the command exited (broken pipe)
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        _wait_for("records in the topic", lambda: _records_in(kafka.bootstrap, t2) >= 50_000)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    writer.join(10)
    assert rc == 130 and "Traceback" not in err, err
    acked, count, unknown, unsent = _outcome(err)
    assert unknown == unsent == 0 and acked == count >= 50_000, err
    assert _records_in(kafka.bootstrap, t2) == acked


def test_global_timeout_and_bad_timeouts() -> None:
    """``kpax --timeout S CMD`` bounds the command as ``CMD --timeout S`` does
    (it was ignored: 30 s); nan, inf, huge, zero or negative are usage errors."""
    silent = socket.socket()  # accepts connections (backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    addr = f"127.0.0.1:{silent.getsockname()[1]}"
    try:
        for args in (["--timeout", "2", "meta"], ["--timeout", "2", "topics", "list"]):
            started = time.monotonic()
            r = run_kpax(addr, *args, timeout=60)
            elapsed = time.monotonic() - started
            one_line_error(r, 1, addr)
            assert elapsed < 15, f"{args}: {elapsed:.1f}s with --timeout 2 (default 30)"
    finally:
        silent.close()
    for value in ("nan", "inf", "-inf", "1e12", "0", "-1", "abc"):
        for args in (
            [f"--timeout={value}", "meta"],
            ["meta", f"--timeout={value}"],
            ["produce", "t", "--value", "v", f"--timeout={value}"],
        ):
            r = run_kpax("127.0.0.1:1", *args)
            assert r.rc == 2, (args, r.rc, r.err)
            assert "usage:" in r.err and "--timeout" in r.err and "Traceback" not in r.err


def test_bad_json_and_msgpack_items(kafka: KafkaCluster, k: Any, topic: Any) -> None:
    import msgpack

    t = topic(2)
    # a partition the topic does not have, timestamps that are not int64
    # milliseconds, a value too large: per-item errors that --skip-bad skips
    lines = [
        {"value": "ok1", "partition": 1, "timestamp": 1_700_000_000_000},
        {"value": "p", "partition": 2},
        {"value": "f", "timestamp": 1.7e12},
        {"value": "s", "timestamp": "1700000000000"},
        {"value": "big", "timestamp": 2**63},
        {"value": "b", "timestamp": True},
        {"value": "x" * 2_000_000},
        {"value": "ok2", "partition": 0},
    ]
    stdin = b"".join(json.dumps(d).encode() + b"\n" for d in lines)
    one_line_error(k("produce", t, "--format", "json", stdin=stdin), 1, "line 2", "no partition 2")
    r = k("produce", t, "--format", "json", "--skip-bad", stdin=stdin)
    assert r.rc == 1 and "Traceback" not in r.err, r.err
    for where in ("line 2:", "line 3:", "line 4:", "line 5:", "line 6:"):
        assert f"skipped {where}" in r.err, r.err
    # line 7, too large, is not malformed: not written, failed, as a record the
    # broker refuses as too large (test_too_large_records_fail_and_the_rest_is_written)
    assert "2 of 3 records acknowledged" in r.err and "1 failed: line 7: MESSAGE_TOO_LARGE" in r.err
    got = ok(k("consume", t, "--format", "json")).lines()
    assert sorted(d["value"] for d in got) == ["ok1", "ok1", "ok2"]
    assert {d["timestamp"] for d in got if d["value"] == "ok1"} == {1_700_000_000_000}
    for bad_ts in (1.5, "5", 2**64 - 1):
        one_line_error(
            k("produce", t, "--format", "json", stdin=json.dumps({"timestamp": bad_ts}).encode()),
            1,
            "line 1",
            "timestamp",
        )

    # msgpack: an item cut short at the end is an error naming it (it was dropped, exit 0)
    t2 = topic(1)
    items = [msgpack.packb({"value": b"m%d" % i}) for i in range(3)]
    r = k("produce", t2, "--format", "msgpack", stdin=b"".join(items)[:-2])
    one_line_error(r, 1, "msgpack item 3", "truncated")
    assert "2 of 2 records acknowledged" in r.err
    assert ok(k("consume", t2)).out == b"m0\nm1\n"
    r = k("produce", t2, "--format", "msgpack", "--skip-bad", stdin=items[0] + items[1][:3])
    one_line_error(r, 1, "msgpack item 2", "truncated")
    bad = msgpack.packb({"value": b"x", "timestamp": 1.5}) + msgpack.packb(
        {"value": b"y", "partition": 7}
    )
    r = ok(k("produce", t2, "--format", "msgpack", "--skip-bad", stdin=bad + items[2]))
    assert (
        "msgpack item 1: timestamp" in r.err
        and "msgpack item 2: the topic has no partition 7" in r.err
    )
    one_line_error(k("produce", t2, "--format", "msgpack", stdin=bad), 1, "msgpack item 1")
    assert ok(k("consume", t2)).out == b"m0\nm1\nm0\nm2\n"  # m0: before the cut item


@pytest.mark.parametrize("fmt", ["raw", "json"])
def test_too_large_records_fail_and_the_rest_is_written(
    kafka: KafkaCluster, k: Any, topic: Any, fmt: str
) -> None:
    """One rule for a record too large for the producer (over max_request_size:
    refused before it is sent) and one too large for the topic (over its
    max.message.bytes: refused by the broker): neither is written, every other
    record is, in order, and the run ends with exit 1 and a summary that counts
    both as failed and names the first."""
    t = topic(1, config={"max.message.bytes": "5000"})
    small = [b"r%d" % i for i in range(1000)]
    over_producer, over_topic = b"p" * 30_000, b"t" * 10_000  # max_request_size 20,000
    values = [*small[:300], over_producer, *small[300:600], over_topic, *small[600:]]
    if fmt == "raw":
        stdin = b"".join(v + b"\n" for v in values)
    else:
        stdin = b"".join(json.dumps({"value": v.decode()}).encode() + b"\n" for v in values)
    r = k("produce", t, "--format", fmt, "-X", "max_request_size=20000", stdin=stdin)
    assert r.rc == 1 and "Traceback" not in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert "1,000 of 1,002 records acknowledged" in r.err and "2 failed: line 301: " in r.err
    assert "max_request_size=20000" in r.err, r.err
    assert ok(k("consume", t)).out == b"".join(v + b"\n" for v in small)


def test_times_before_1970_far_future_and_relative(kafka: KafkaCluster, k: Any, topic: Any) -> None:
    t = topic(2)
    ok(k("produce", t, "--format", "json", stdin=b'{"value": "a", "partition": 0}\n'))
    ok(k("produce", t, "--format", "json", stdin=b'{"value": "b", "partition": 1}\n'))
    # a time past every record: start at the end (nothing), not a NOT_LEADER error
    for spec in ("@99999999999999", "@9223372036854775807", "9999-12-31"):
        r = ok(k("consume", t, "--from", spec, "--timeout", "10"))
        assert r.out == b"" and r.err == "", (spec, r.err)
    # beyond int64: a usage error naming it, at once
    r = k("consume", t, "--from", "@99999999999999999999", "--timeout", "10")
    one_line_error(r, 2, "99999999999999999999")
    # before 1970 (or far back): from the start
    for spec in ("1900-01-01", "0001-01-01", "-100000w"):
        r = ok(k("consume", t, "--from", spec))
        assert sorted(r.out.split()) == [b"a", b"b"], (spec, r.err)
    # a relative time after the option, as documented (`--from -1h`, not only `--from=-1h`)
    assert sorted(ok(k("consume", t, "--from", "-1h")).out.split()) == [b"a", b"b"]
    assert ok(k("consume", t, "--from", "-1h", "--to", "-1h")).out == b""
    rows = ok(k("offsets", t, "--time", "-1h", "-o", "json")).json()["partitions"]
    assert [row["offset_at_time"] for row in rows] == [0, 0], rows
    # the consumer's own lookup refuses an out-of-range time naming the partition
    tp = kpax.TopicPartition(t, 0)
    with kpax.Consumer(kafka.bootstrap) as consumer:
        assert consumer.offsets_for_times({tp: 2**63 - 1}) == {tp: None}
        with pytest.raises(ValueError, match=f"{t}.*out of range"):
            consumer.offsets_for_times({tp: 2**63})
