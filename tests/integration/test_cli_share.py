"""`kpax consume TOPIC --share-group G`: records split between members, each printed
record acknowledged (accept, release or reject), misuse refused in one line."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.integration.share_helpers import new_topic, produce, share_group
from tests.integration.test_cli import cli_env, kpax_cmd, ok, one_line_error, run_kpax

pytestmark = [pytest.mark.integration, pytest.mark.kafka4, pytest.mark.timeout(180)]


@pytest.fixture
def setup(kafka: KafkaCluster) -> Any:
    with kpax.Admin(kafka.bootstrap) as admin:
        topic = new_topic(admin, 2)
        group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, [b"v%d" % i for i in range(20)])
    return topic, group


def consume(kafka: KafkaCluster, topic: str, group: str, *args: str) -> list[dict[str, Any]]:
    r = ok(
        run_kpax(
            kafka.bootstrap, "consume", topic, "-G", group, "--format", "json", "--idle", "3", *args
        )
    )
    return r.lines()


def test_members_split_and_accept(kafka: KafkaCluster, setup: Any) -> None:
    topic, group = setup
    first = consume(kafka, topic, group, "--count", "8")
    assert len(first) == 8 and {r["delivery_count"] for r in first} == {1}
    rest = consume(kafka, topic, group)
    keys = [(r["partition"], r["offset"]) for r in first + rest]
    assert len(keys) == len(set(keys)) == 20  # the first 8 were accepted: never again
    assert sorted(r["value"] for r in first + rest) == sorted(f"v{i}" for i in range(20))


def test_release_and_reject(kafka: KafkaCluster, setup: Any) -> None:
    topic, group = setup
    released = consume(kafka, topic, group, "--ack", "release", "--count", "5")
    again = consume(kafka, topic, group, "--ack", "reject")
    assert len(again) == 20
    counts = {(r["partition"], r["offset"]): r["delivery_count"] for r in again}
    assert all(counts[(r["partition"], r["offset"])] == 2 for r in released)
    assert consume(kafka, topic, group) == []  # all rejected: archived


def test_misuse_is_one_line(kafka: KafkaCluster, setup: Any) -> None:
    topic, group = setup
    for args, needle in [
        (("--partition", "0"), "--partition and --share-group"),
        (("--from", "latest"), "share.auto.offset.reset"),
        (("--group", "g"), "--group and --share-group"),
        (("--idle", "0"), "--idle"),
    ]:
        r = run_kpax(kafka.bootstrap, "consume", topic, "-G", group, *args)
        one_line_error(r, 2, needle)


def test_sigterm_exits_143(kafka: KafkaCluster, setup: Any) -> None:
    """kill (SIGTERM) stops a share-group member as Ctrl-C does, with 128 + 15."""
    topic, group = setup
    proc = subprocess.Popen(
        kpax_cmd("consume", topic, "-G", group, "--follow"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(kafka.bootstrap),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(b"v")  # a member, records flowing
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 143 and "interrupted after" in err and "Traceback" not in err, (rc, err)
