"""`kpax consume --group G` waits for the group to give it partitions (real broker).

A member that crashed (SIGKILL) keeps its partitions until its session times
out; a member started at once after it must wait for them, as
kafka-console-consumer does, not fail after ``--timeout`` with "no assignment".
A member to which the group gives no partition (others hold them all) waits
too, saying so on stderr once, and reads once the group hands partitions over.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.integration.test_cli import cli_env, kpax_cmd, run_kpax
from tests.wait import eventually

pytestmark = pytest.mark.timeout(120)

WAITING = "waiting for group"


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with kpax.Producer(bootstrap) as p:
        for v in values:
            p.send(topic, v, partition=0)


def test_a_member_started_right_after_a_crash_gets_the_records(
    kafka: KafkaCluster, topic: Any
) -> None:
    """The dead member's session (10 s) outlives the new member's --timeout (3 s):
    the new member waits for it to expire, then prints the records and exits 0."""
    t = topic(1)
    group = f"g-{t}"
    tp = kpax.TopicPartition(t, 0)
    session = ["-X", "session_timeout_ms=10000", "-X", "heartbeat_interval_ms=1000"]
    first = subprocess.Popen(
        kpax_cmd("consume", t, "--group", group, "--follow", *session),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=cli_env(kafka.bootstrap),
    )
    try:
        with kpax.Admin(kafka.bootstrap) as admin:

            def owns_the_partition() -> bool:
                res = admin.describe_groups([group])
                if group in res.errors:  # not there yet
                    return False
                return [set(m.assignment) for m in res[group].members] == [{tp}]

            eventually(owns_the_partition, timeout=60)
    finally:
        first.kill()  # SIGKILL: no LeaveGroup, the member stays until its session expires
        first.wait()
    _produce(kafka.bootstrap, t, [b"r0", b"r1", b"r2"])
    r = run_kpax(kafka.bootstrap, "consume", t, "--group", group, "--count", "3", "--timeout", "3")
    assert r.rc == 0 and "no assignment" not in r.err and "Traceback" not in r.err, r.err
    assert r.out == b"r0\nr1\nr2\n"


@pytest.mark.parametrize(
    "protocol", ["classic", pytest.param("consumer", marks=pytest.mark.kafka4)]
)
def test_a_member_given_no_partition_waits_and_says_so(
    kafka: KafkaCluster, topic: Any, protocol: str
) -> None:
    """A live member holds the only partition (a sticky assignor keeps it there):
    the command says once that it waits, keeps waiting, and reads the records when
    the holder leaves; it used to exit 0 at once with nothing read."""
    t = topic(1)
    group = f"g-{protocol}-{t}"
    tp = kpax.TopicPartition(t, 0)
    _produce(kafka.bootstrap, t, [b"r0", b"r1", b"r2"])
    conf: dict[str, Any] = {
        "group_id": group,
        "group_protocol": protocol,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    if protocol == "classic":  # the group's protocol: the one both members support
        conf["partition_assignment_strategy"] = ["cooperative-sticky"]
    holder = kpax.Consumer(kafka.bootstrap, **conf)
    proc: subprocess.Popen[bytes] | None = None
    try:
        holder.subscribe([t])
        assert holder.wait_for_assignment(60) == {tp}
        proc = subprocess.Popen(
            kpax_cmd(
                "consume", t, "--group", group, "--count", "3", "-X", f"group_protocol={protocol}"
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(kafka.bootstrap),
        )
        assert proc.stderr is not None
        err: list[str] = []
        stderr = proc.stderr
        reader = threading.Thread(
            target=lambda: err.extend(ln.decode() for ln in stderr), daemon=True
        )
        reader.start()

        def told_it_waits() -> bool:
            holder.poll(0.1)  # the holder takes part in the rebalance the newcomer starts
            assert proc is not None
            if proc.poll() is not None:  # fail at once, not after the wait
                pytest.fail(f"exited {proc.returncode} without waiting: {''.join(err)}")
            return any(WAITING in ln for ln in err)

        eventually(told_it_waits, timeout=60)
        assert holder.assignment() == {tp}  # still the holder's
        holder.close()  # leaves the group: the partition goes to the waiting member
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait(timeout=60)
        reader.join(10)
    finally:
        holder.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == b"r0\nr1\nr2\n"
    assert [WAITING in ln for ln in err].count(True) == 1, err
    assert "Traceback" not in "".join(err)
