"""The `kpax` command under hostile and careless use (real broker, the command as
a subprocess): timeouts given before the subcommand or absurd, and times
before 1970 or far in the future.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.integration.test_cli import ok, one_line_error, run_kpax

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def k(kafka: KafkaCluster) -> Any:
    def call(*args: str, **kw: Any) -> Any:
        return run_kpax(kafka.bootstrap, *args, **kw)

    return call


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
