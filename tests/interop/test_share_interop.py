"""kpax share consumers in share groups with other clients on the same broker
(KIP-932 interop): Apache Kafka's KafkaShareConsumer (tests/java/share/ShareConsume.java,
driven through tests/interop/share_java.py) and confluent-kafka's preview ShareConsumer
as members of the same share group as kpax members.

- members of both clients split the records of a topic (one partition shared by all,
  or three): every record is accepted by exactly one member, each client gets some;
- a record a kpax member RELEASEs goes to the Java member with delivery count 2;
- records a Java member held when it closed or was killed go to a kpax member with
  their delivery count raised.

Nothing here waits a fixed time: every wait polls a condition until a deadline."""

from __future__ import annotations

import collections
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest

import kpax
from kpax import AcknowledgeType
from kpax.structs import TopicPartition
from tests.integration.share_helpers import (
    SHORT_LOCK_MS,
    new_topic,
    produce,
    read_until,
    share_group,
)
from tests.interop.share_java import ShareConsume, start_share_consume

pytestmark = [pytest.mark.integration, pytest.mark.kafka4]

#: Records the sharing tests produce.
TOTAL = 5000
#: What a kpax or confluent member takes per poll, and the "work" it does per batch:
#: slower than the Java member, so that neither client can take everything.
MAX_POLL = 50
PAUSE = 0.01


@pytest.fixture()
def admin(kafka):  # type: ignore[no-untyped-def]
    with kpax.Admin(kafka.bootstrap) as a:
        yield a


@dataclass(frozen=True)
class Accepted:
    """One record a member accepted (its acknowledgement committed without error)."""

    member: str
    partition: int
    offset: int
    delivery_count: int
    value: bytes | None


def wait_until(cond: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout:g}s: {what()}")
        time.sleep(0.05)


def wait_for_members(admin: kpax.Admin, group: str, topic: str, count: int) -> None:
    """Until ``count`` members of the share group have partitions of ``topic`` assigned."""
    seen: list[object] = []

    def ready() -> bool:
        result = admin.describe_share_groups([group])
        if group in result.errors:  # not created yet: no member has joined
            seen[:] = [result.errors[group]]
            return False
        desc = result[group]
        seen[:] = [desc]
        members = [m for m in desc.members if any(tp.topic == topic for tp in m.assignment)]
        return len(members) >= count

    wait_until(ready, 30, lambda: f"{count} members with {topic} assigned; group: {seen}")


def produce_spread(bootstrap: str, topic: str, partitions: int, n: int) -> dict[bytes, int]:
    """``n`` records round-robin over the partitions, in many small batches (so that a
    fetch, which acquires whole batches, never takes a big share at once): value ->
    partition."""
    sent = {b"r%05d" % i: i % partitions for i in range(n)}
    with kpax.Producer(bootstrap, linger_ms=5, batch_size=2048) as p:
        for value, partition in sent.items():
            p.send(topic, value, partition=partition)
        p.flush()
    return sent


class Member(threading.Thread):
    """A share-group member on its own thread, in implicit mode: poll, "process" the
    batch, commit (which accepts it) and keep the records whose commit succeeded.
    A failed commit or an exception is kept in ``errors`` (the tests want none)."""

    def __init__(
        self, name: str, stop: threading.Event, bootstrap: str, group: str, topic: str
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = stop
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.accepted: list[Accepted] = []
        self.errors: list[str] = []

    def consume(self) -> None:
        raise NotImplementedError

    def keep(self, batch: Iterable[Accepted], results: dict[tuple[str, int], object]) -> None:
        records = list(batch)
        wanted = {(self.topic, r.partition) for r in records}
        failed = {tp: err for tp, err in results.items() if err is not None}
        missing = wanted - results.keys()
        if failed or missing:
            self.errors.append(f"commit failed: {failed}, no result for {missing}")
            return
        self.accepted.extend(records)

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")


class KpaxMember(Member):
    def consume(self) -> None:
        with kpax.ShareConsumer(
            self.bootstrap, group_id=self.group, max_poll_records=MAX_POLL
        ) as consumer:
            consumer.subscribe([self.topic])
            while not self.stopping.is_set():
                records = consumer.poll(0.2)
                if not records:
                    continue
                time.sleep(PAUSE)  # the work done per batch
                results = consumer.commit()  # accepts them (implicit mode)
                self.keep(
                    (
                        Accepted(self.name, r.partition, r.offset, r.delivery_count, r.value)
                        for r in records
                    ),
                    {(tp.topic, tp.partition): err for tp, err in results.items()},
                )


class ConfluentMember(Member):
    def consume(self) -> None:
        from confluent_kafka import ShareConsumer

        consumer = ShareConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "share.acknowledgement.mode": "implicit",
                "log_level": 3,  # not the "Preview" warning
            }
        )
        try:
            consumer.subscribe([self.topic])
            while not self.stopping.is_set():
                messages = consumer.poll(0.2)
                if not messages:
                    continue
                records = []
                for m in messages:
                    if m.error() is not None:
                        self.errors.append(f"poll: {m.error()}")
                    else:
                        records.append(m)
                time.sleep(PAUSE)
                results = consumer.commit_sync(30)
                self.keep(
                    (
                        Accepted(
                            self.name, m.partition(), m.offset(), m.delivery_count(), m.value()
                        )
                        for m in records
                    ),
                    {(tp.topic, tp.partition): err for tp, err in results.items()},
                )
        finally:
            consumer.close()


def java_accepted(java: ShareConsume) -> list[Accepted]:
    return [Accepted("java", x.partition, x.offset, x.delivery_count, x.value) for x in java.lines]


def check_split(
    accepted: list[Accepted], sent: dict[bytes, int], clients: dict[str, Callable[[str], bool]]
) -> None:
    """Every record sent was accepted exactly once, on its own partition, at its first
    delivery; every client (a test on the member's name) accepted some."""
    times = collections.Counter((a.partition, a.offset) for a in accepted)
    twice = [k for k, n in times.items() if n > 1]
    assert not twice, f"accepted more than once: {twice[:10]}"
    got = {a.value: a.partition for a in accepted}
    missing = sent.keys() - got.keys()
    assert not missing, f"{len(missing)} records never accepted, e.g. {sorted(missing)[:5]}"
    assert got == sent, "a record was accepted from another partition than it was sent to"
    assert len(accepted) == len(sent)
    redelivered = [a for a in accepted if a.delivery_count != 1]
    assert not redelivered, f"records delivered more than once: {redelivered[:5]}"
    per_member = collections.Counter(a.member for a in accepted)
    for client, is_it in clients.items():
        assert any(is_it(m) for m in per_member), f"{client} accepted nothing: {per_member}"


def run_split(
    admin: kpax.Admin,
    bootstrap: str,
    topic: str,
    group: str,
    partitions: int,
    members: list[Member],
    java: ShareConsume | None,
) -> tuple[list[Accepted], dict[bytes, int]]:
    """Start the members, wait until all of them have partitions, produce TOTAL
    records, wait until they are all accepted; stop the members; what they accepted."""
    stop = members[0].stopping
    try:
        for m in members:
            m.start()
        if java is not None:
            java.wait_subscribed()
        wait_for_members(admin, group, topic, len(members) + (java is not None))
        sent = produce_spread(bootstrap, topic, partitions, TOTAL)

        def everything() -> list[Accepted]:
            got = [a for m in members for a in m.accepted]
            return got + (java_accepted(java) if java is not None else [])

        def done() -> bool:
            if any(m.errors for m in members) or (
                java is not None and java.proc.poll() is not None
            ):
                return True  # failed: the assertions below say how
            return len({a.value for a in everything()}) >= TOTAL

        wait_until(
            done,
            45,
            lambda: (
                f"{len({a.value for a in everything()})} of {TOTAL} accepted: "
                + str(collections.Counter(a.member for a in everything()))
            ),
        )
    finally:
        stop.set()
        for m in members:
            m.join(30)
    assert not [m.name for m in members if m.is_alive()], "a member did not close"
    errors = {m.name: m.errors for m in members if m.errors}
    assert not errors, errors
    return [a for m in members for a in m.accepted], sent


@pytest.mark.parametrize("partitions", [1, 3])
def test_java_and_kpax_members_split_the_records(kafka, admin, partitions) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, partitions)
    group, _ = share_group(admin)
    stop = threading.Event()
    members: list[Member] = [
        KpaxMember(f"kpax-{i}", stop, kafka.bootstrap, group, topic) for i in range(2)
    ]
    with start_share_consume(kafka.bootstrap, group, topic) as java:
        try:
            accepted, sent = run_split(
                admin, kafka.bootstrap, topic, group, partitions, members, java
            )
        finally:
            code = java.stop()
        assert code == 0, java.stderr[-3000:]
        assert "ack-failed" not in java.stderr, java.stderr[-3000:]
        accepted += java_accepted(java)
    check_split(
        accepted,
        sent,
        {"Java": lambda m: m == "java", "kpax": lambda m: m.startswith("kpax")},
    )


@pytest.mark.parametrize("partitions", [1, 3])
def test_confluent_and_kpax_members_split_the_records(kafka, admin, partitions) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, partitions)
    group, _ = share_group(admin)
    stop = threading.Event()
    members: list[Member] = [
        ConfluentMember("confluent", stop, kafka.bootstrap, group, topic),
        KpaxMember("kpax", stop, kafka.bootstrap, group, topic),
    ]
    accepted, sent = run_split(admin, kafka.bootstrap, topic, group, partitions, members, None)
    check_split(
        accepted,
        sent,
        {"confluent-kafka": lambda m: m == "confluent", "kpax": lambda m: m == "kpax"},
    )


def test_records_kpax_releases_go_to_java_with_delivery_count_2(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, [b"%d" % i for i in range(20)])
    released, rejected = {2, 5, 11, 17}, {7}
    with kpax.ShareConsumer(
        kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as worker:
        worker.subscribe([topic])
        first = read_until(worker, lambda got: len(got) >= 20)
        assert sorted(r.offset for r in first) == list(range(20))
        assert {r.delivery_count for r in first} == {1}
        for r in first:
            kind = (
                AcknowledgeType.RELEASE
                if r.offset in released
                else AcknowledgeType.REJECT
                if r.offset in rejected
                else AcknowledgeType.ACCEPT
            )
            worker.acknowledge(r, kind)
        assert worker.commit() == {TopicPartition(topic, 0): None}
        # the kpax member stays in the group, not polling (kpax never fetches ahead)
        with start_share_consume(kafka.bootstrap, group, topic) as java:
            java.wait_subscribed()
            java.wait_for(len(released), timeout=45)
            # then a record produced now: once Java has it, it had all it would get
            produce(kafka.bootstrap, topic, [b"sentinel"])
            wait_until(
                lambda: any(x.value == b"sentinel" for x in java.lines),
                45,
                lambda: f"the sentinel; Java has {java.lines}",
            )
            code = java.stop()
            lines = list(java.lines)
        assert code == 0, java.stderr[-3000:]
    got = sorted((x.offset, x.delivery_count, x.value) for x in lines)
    assert got == [(o, 2, b"%d" % o) for o in sorted(released)] + [(20, 1, b"sentinel")]


@pytest.mark.parametrize("how", ["closed", "killed"])
def test_records_a_java_member_held_go_to_kpax(kafka, admin, how) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, lock_ms = share_group(admin, lock_ms=SHORT_LOCK_MS)
    total = 50
    produce(kafka.bootstrap, topic, [b"%d" % i for i in range(total)])
    # In explicit mode ShareConsume acknowledges nothing: its lines are records delivered
    # to it and never accepted. With --max-records 1 it closes after its first poll
    # (holding that poll's records); otherwise it is killed at its first line (or, if
    # its next poll comes first, that poll fails: "All records must be acknowledged").
    java = start_share_consume(
        kafka.bootstrap,
        group,
        topic,
        max_records=1 if how == "closed" else None,
        properties={"share.acknowledgement.mode": "explicit"},
    )
    try:
        java.wait_subscribed()
        java.wait_for(1, timeout=45)
        if how == "killed":
            java.proc.send_signal(signal.SIGKILL)
        code = java.wait(30)
    finally:
        if java.proc.poll() is None:
            java.proc.kill()
            java.proc.wait(10)
    # closed: a clean close; killed: SIGKILL, or 1 if its next poll failed first
    assert code in ({0} if how == "closed" else {-signal.SIGKILL, 1}), java.stderr[-3000:]
    held = {x.offset for x in java.lines}
    assert held and {x.delivery_count for x in java.lines} == {1}
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
        worker.subscribe([topic])
        got = read_until(worker, lambda got: len(got) >= total, timeout=lock_ms / 1000 + 45)
        assert worker.commit() == {TopicPartition(topic, 0): None}
    assert sorted(r.offset for r in got) == list(range(total))
    assert all(r.value == b"%d" % r.offset for r in got)
    again = {r.offset: r.delivery_count for r in got if r.offset in held}
    assert min(again.values()) >= 2, again
