"""The share consumer when things go wrong: a member SIGKILLed holding records, a
broker restarted while members poll, authorization failures, brokers without
share groups."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable

import pytest

import kpax
from kpax.admin import AclBinding, AclOperation, ResourceType
from kpax.testing.jars import DEFAULT_KAFKA_VERSION
from tests.integration.share_helpers import (
    SHORT_LOCK_MS,
    new_topic,
    produce,
    read_until,
    share_group,
)
from tests.wait import eventually

pytestmark = pytest.mark.integration

HOLDER = textwrap.dedent(
    """
    import sys, time
    import kpax
    bootstrap, group, topic, want = sys.argv[1:5]
    c = kpax.ShareConsumer(bootstrap, group_id=group, share_acknowledgement_mode="explicit")
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < int(want) and time.monotonic() < deadline:
        got += c.poll(0.5)
    print("HELD", " ".join(str(r.offset) for r in got), flush=True)
    time.sleep(600)
    """
)


def read_all_through(
    bootstrap: str, group: str, topic: str, total: int, fault: Callable[[], None]
) -> set[bytes]:
    """Read ``total`` records in share group ``group``, calling ``fault()`` once a
    third of them is read; retriable errors a poll reports are expected, others fail."""
    seen: set[bytes] = set()
    done = False
    with kpax.ShareConsumer(
        bootstrap, group_id=group, max_poll_records=100, request_timeout_ms=10000
    ) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 180
        while len(seen) < total:
            assert time.monotonic() < deadline, f"{len(seen)} of {total} records read"
            try:
                recs = c.poll(0.5)
            except kpax.KafkaError as exc:
                assert exc.retriable, exc
                continue
            seen.update(r.value for r in recs)
            if not done and len(seen) >= total // 3:
                fault()
                done = True
    assert done
    return seen


@pytest.mark.kafka4
def test_a_member_killed_holding_records_loses_them_when_the_lock_ends(kafka) -> None:  # type: ignore[no-untyped-def]
    with kpax.Admin(kafka.bootstrap) as admin:
        topic = new_topic(admin, 1)
        group, lock_ms = share_group(admin, lock_ms=SHORT_LOCK_MS)
    produce(kafka.bootstrap, topic, [b"%d" % i for i in range(30)])
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, kafka.bootstrap, group, topic, "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("HELD"), line
        held = sorted(int(x) for x in line.split()[1:])
        assert held == list(range(30))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as other:
            other.subscribe([topic])
            again = read_until(other, lambda got: len(got) >= 30, timeout=lock_ms / 1000 + 60)
        assert sorted(r.offset for r in again) == held
        assert {r.delivery_count for r in again} == {2}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.kafka4
def test_broker_restart_while_polling_loses_no_record(kafka_factory) -> None:  # type: ignore[no-untyped-def]
    cluster = kafka_factory()
    total = 3000
    with kpax.Admin(cluster.bootstrap) as admin:
        topic = new_topic(admin, 3)
        group, _ = share_group(admin)
    produce(cluster.bootstrap, topic, [b"%d" % i for i in range(total)])
    node = next(iter(cluster.brokers))
    seen = read_all_through(
        cluster.bootstrap, group, topic, total, lambda: cluster.restart_broker(node)
    )
    assert seen == {b"%d" % i for i in range(total)}


@pytest.fixture(scope="module")
def secured(kafka_factory):  # type: ignore[no-untyped-def]
    return kafka_factory(
        sasl=True,
        config={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    )


def _alice(cluster, group: str) -> kpax.ShareConsumer:  # type: ignore[no-untyped-def]
    return kpax.ShareConsumer(
        cluster.listener("SASL_PLAINTEXT"),
        group_id=group,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=cluster.sasl_users["alice"],
        default_api_timeout_ms=5000,
    )


@pytest.mark.kafka4
def test_authorization_failures_name_the_group_and_topic(secured) -> None:  # type: ignore[no-untyped-def]
    topic = f"share-auth-{uuid.uuid4().hex[:6]}"
    readable_group = f"sg-ok-{uuid.uuid4().hex[:6]}"
    with kpax.Admin(secured.bootstrap) as a:
        a.create_topics([kpax.NewTopic(topic, 1, 1)]).raise_for_errors()
        a.create_acls(
            [AclBinding(ResourceType.GROUP, readable_group, "User:alice", AclOperation.READ)]
        ).raise_for_errors()

    def refused(group: str, error: type[kpax.KafkaError], name: str) -> bool:
        with _alice(secured, group) as c:
            c.subscribe([topic])
            try:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    c.poll(0.5)
            except error as exc:
                assert name in str(exc), exc
                assert not exc.retriable
                return True
        return False

    no_group = f"sg-noacl-{uuid.uuid4().hex[:6]}"
    assert refused(no_group, kpax.errors.GroupAuthorizationFailedError, no_group)
    # the group is allowed, the topic is not (ACLs reach the authorizer a little later)
    eventually(
        lambda: refused(readable_group, kpax.errors.TopicAuthorizationFailedError, topic),
        timeout=30,
    )


def test_brokers_without_share_groups_say_so(kafka) -> None:  # type: ignore[no-untyped-def]
    """On Kafka 3.9 (run by the broker matrix) a share consumer fails at once with an
    error naming the API; on 4.x the same calls work."""
    version = os.environ.get("KPAX_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    with kpax.ShareConsumer(kafka.bootstrap, group_id=f"sg-{uuid.uuid4().hex[:6]}") as c:
        c.subscribe([f"share-none-{uuid.uuid4().hex[:6]}"])
        if version.split(".")[0] >= "4":
            assert c.poll(1.0) == []
            return
        t0 = time.monotonic()
        with pytest.raises(kpax.UnsupportedApiError, match="ShareGroupHeartbeat") as info:
            for _ in range(20):
                c.poll(0.5)
        assert "retrying cannot help" in str(info.value)
        assert time.monotonic() - t0 < 10


@pytest.mark.kafka4
def test_partition_leader_killed_while_polling_loses_no_record(kafka_cluster3) -> None:  # type: ignore[no-untyped-def]
    cluster = kafka_cluster3
    total = 3000
    with kpax.Admin(cluster.bootstrap) as admin:
        topic = f"share-failover-{uuid.uuid4().hex[:8]}"
        admin.create_topics([kpax.NewTopic(topic, 3, 3)]).raise_for_errors()
        group, _ = share_group(admin)
        with kpax.Producer(cluster.bootstrap, acks="all") as p:
            for i in range(total):
                p.send(topic, b"%d" % i)
            p.flush()
        leader = admin.describe_topics([topic])[topic].partitions[0].leader
    killed: list[int] = []

    def kill() -> None:
        cluster.kill_broker(leader)
        killed.append(leader)

    try:
        seen = read_all_through(cluster.bootstrap, group, topic, total, kill)
    finally:
        for node in killed:
            cluster.restart_broker(node)
    assert seen == {b"%d" % i for i in range(total)}


@pytest.mark.kafka4
def test_a_rejected_share_session_is_opened_again(kafka) -> None:  # type: ignore[no-untyped-def]
    """The broker refuses the session's epoch (INVALID_SHARE_SESSION_EPOCH, as after a
    lost answer): the acknowledgements in that request are reported failed, the
    consumer opens a new session and reads on, and the records whose acceptance
    failed come back when their locks end."""
    with kpax.Admin(kafka.bootstrap) as admin:
        topic = new_topic(admin, 1)
        group, lock_ms = share_group(admin, lock_ms=SHORT_LOCK_MS)
    total = 400
    produce(kafka.bootstrap, topic, [b"%d" % i for i in range(total)])
    tp = kpax.TopicPartition(topic, 0)
    failed: list[BaseException] = []
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group, max_poll_records=50) as c:
        c.set_acknowledgement_commit_callback(
            lambda offsets, err: failed.append(err) if err is not None else None
        )
        c.subscribe([topic])
        first = read_until(c, lambda got: len(got) >= total)
        fetcher = c.aio.fetcher
        assert fetcher is not None
        sessions = [st.session for st in fetcher._nodes.values() if st.session.open]
        assert sessions
        for s in sessions:  # the next request carries an epoch the broker did not expect
            s.epoch += 5
        result = c.commit()[tp]
        assert isinstance(result, kpax.errors.InvalidShareSessionEpochError), result
        assert result.retriable and "share group" in str(result)
        assert any(isinstance(e, kpax.errors.InvalidShareSessionEpochError) for e in failed)
        again = read_until(c, lambda got: len(got) >= total, timeout=lock_ms / 1000 + 60)
        assert c.commit() == {tp: None}
    assert sorted(r.offset for r in again) == sorted(r.offset for r in first)
    assert {r.delivery_count for r in again} == {2}
