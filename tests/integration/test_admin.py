"""kpax.Admin and kpax.aio.Admin against a real broker: every operation, per-item
results, errors that name what failed, interop with kafka-python."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
import warnings

import pytest

import kpax
from kpax.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kpax.errors import (
    ClientClosedError,
    GroupIdNotFoundError,
    NoBrokersAvailableError,
    TopicAlreadyExistsError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from tests.wait import eventually

pytestmark = pytest.mark.integration


def _name(prefix: str = "adm") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def admin(kafka):
    with kpax.Admin(kafka.bootstrap) as a:
        yield a


def _produce(kafka, topic: str, partition: int, n: int) -> None:
    from kafka import KafkaProducer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        p = KafkaProducer(bootstrap_servers=kafka.bootstrap)
        for i in range(n):
            p.send(topic, value=b"x%d" % i, partition=partition, timestamp_ms=1_000_000 + i * 1000)
        p.flush()
        p.close()


def test_create_describe_delete_topics_with_per_item_results(admin):
    a, b = _name(), _name()
    result = admin.create_topics(
        [
            kpax.NewTopic(
                a, num_partitions=3, replication_factor=1, configs={"retention.ms": "86400000"}
            ),
            kpax.NewTopic(b, num_partitions=1),
        ]
    )
    assert result.ok and set(result) == {a, b}
    again = admin.create_topics([a, _name()])
    assert isinstance(again.errors[a], TopicAlreadyExistsError)
    assert a in str(again.errors[a]) and not again.errors[a].retriable
    with pytest.raises(TopicAlreadyExistsError):
        again[a]
    eventually(lambda: {a, b} <= set(admin.list_topics()))
    described = admin.describe_topics([a, "no-such-topic-xyz"])
    assert [p.partition for p in described[a].partitions] == [0, 1, 2]
    assert all(p.leader >= 0 and p.isr for p in described[a].partitions)
    assert isinstance(described.errors["no-such-topic-xyz"], UnknownTopicOrPartitionError)
    started = time.monotonic()
    deleted = admin.delete_topics([a, b, "no-such-topic-xyz"])
    assert time.monotonic() - started < 10
    assert deleted.succeeded == {a: None, b: None}
    assert isinstance(deleted.errors["no-such-topic-xyz"], UnknownTopicOrPartitionError)


def test_validate_only_creates_nothing(admin):
    name = _name()
    assert admin.create_topics([kpax.NewTopic(name, 2, 1)], validate_only=True).ok
    assert name not in admin.list_topics()


def test_create_partitions(admin):
    name = _name()
    admin.create_topics([kpax.NewTopic(name, 1, 1)]).raise_for_errors()
    assert admin.create_partitions({name: 4}).ok
    eventually(lambda: len(admin.describe_topics([name])[name].partitions) == 4)
    # Shrinking is refused, per topic.
    assert admin.create_partitions({name: 2}).errors[name]


def test_incremental_alter_configs_takes_a_dict_of_values(admin):
    """confluent-kafka / kafka-python users write a resource's changes as a dict:
    a value sets it (non-str values as Kafka writes them), None deletes it."""
    name = _name()
    admin.create_topics([kpax.NewTopic(name, 1, 1)])
    res = ConfigResource("topic", name)  # a type given by name, as the peers do
    admin.incremental_alter_configs(
        {res: {"retention.ms": 5000, "cleanup.policy": "compact"}}
    ).raise_for_errors()

    def altered():
        entries = admin.describe_configs([res])[res]
        return (entries["retention.ms"].value, entries["cleanup.policy"].value)

    eventually(lambda: altered() == ("5000", "compact"))
    admin.incremental_alter_configs({res: {"retention.ms": None}}).raise_for_errors()
    eventually(lambda: admin.describe_configs([res])[res]["retention.ms"].is_default)
    with pytest.raises(TypeError, match="changes of topic"):
        admin.incremental_alter_configs({res: 5})


def test_group_config_resource_by_name(admin):
    """``ConfigResource("group", g)`` (the peers' spelling) describes a group's
    configuration instead of failing on ``int("group")``."""
    group = "cfg-" + uuid.uuid4().hex[:8]
    res = ConfigResource("group", group)
    assert res == ConfigResource.group(group)
    entries = admin.describe_configs([res])[res]
    assert "consumer.session.timeout.ms" in entries


def test_describe_and_alter_configs(admin, kafka):
    name = _name()
    admin.create_topics([kpax.NewTopic(name, 1, 1, configs={"retention.ms": "100000"})])
    res = ConfigResource.topic(name)
    entries = admin.describe_configs([res])[res]
    assert entries["retention.ms"].value == "100000"
    assert not entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "delete"
    assert admin.incremental_alter_configs(
        {
            res: [
                AlterConfigOp("retention.ms", "5000"),
                AlterConfigOp("cleanup.policy", "compact", AlterConfigOpType.SET),
            ]
        }
    ).ok

    def altered():
        entries = admin.describe_configs([res], keys=["retention.ms", "cleanup.policy"])[res]
        assert set(entries) == {"retention.ms", "cleanup.policy"}
        return entries["retention.ms"].value == "5000" and (
            entries["cleanup.policy"].value == "compact"
        )

    eventually(altered)
    admin.incremental_alter_configs(
        {res: [AlterConfigOp("retention.ms", op=AlterConfigOpType.DELETE)]}
    )
    eventually(lambda: admin.describe_configs([res])[res]["retention.ms"].is_default)
    broker = ConfigResource.broker(next(iter(kafka.brokers)))
    assert "log.retention.hours" in admin.describe_configs([broker])[broker]
    missing = ConfigResource.topic("no-such-topic-xyz")
    assert isinstance(
        admin.describe_configs([missing]).errors[missing], UnknownTopicOrPartitionError
    )


def test_list_offsets_and_delete_records(admin, kafka):
    name = _name()
    admin.create_topics([kpax.NewTopic(name, 2, 1)]).raise_for_errors()
    _produce(kafka, name, 0, 10)
    tp0, tp1 = kpax.TopicPartition(name, 0), kpax.TopicPartition(name, 1)
    offsets = admin.list_offsets({tp0: "earliest", tp1: "latest"})
    assert offsets[tp0].offset == 0 and offsets[tp1].offset == 0
    latest = admin.list_offsets({tp0: "latest"})[tp0]
    assert latest.offset == 10
    by_time = admin.list_offsets({tp0: 1_000_000 + 4 * 1000})[tp0]
    assert by_time.offset == 4 and by_time.timestamp == 1_004_000
    assert admin.list_offsets({tp0: 9_999_999_999_999})[tp0].offset == -1
    max_ts = admin.list_offsets({tp0: "max_timestamp"})[tp0]
    assert max_ts.offset == 9 and max_ts.timestamp == 1_009_000
    assert admin.delete_records({tp0: 6})[tp0] == 6
    assert admin.list_offsets({tp0: "earliest"})[tp0].offset == 6
    with pytest.raises(ValueError, match="offset spec"):
        admin.list_offsets({tp0: "yesterday"})
    for bad in (2**63, -5, 1.5, True):  # refused at once, not a NOT_LEADER after the timeout
        with pytest.raises(ValueError, match=r"offset spec.*2\*\*63-1"):
            admin.list_offsets({tp0: bad})
    unknown = kpax.TopicPartition("no-such-topic-xyz", 0)
    started = time.monotonic()
    assert isinstance(
        admin.list_offsets({unknown: "latest"}).errors[unknown], UnknownTopicOrPartitionError
    )
    assert time.monotonic() - started < 10


def test_group_offsets_list_describe_delete(admin):
    name, group = _name(), _name("grp")
    admin.create_topics([kpax.NewTopic(name, 3, 1)]).raise_for_errors()
    tps = [kpax.TopicPartition(name, p) for p in range(3)]
    assert admin.alter_group_offsets(
        group, {tps[0]: 5, tps[1]: kpax.OffsetAndMetadata(7, "meta")}
    ).ok
    committed = admin.list_group_offsets(group)
    assert committed == {
        tps[0]: kpax.OffsetAndMetadata(5, "", -1),
        tps[1]: kpax.OffsetAndMetadata(7, "meta", -1),
    }
    assert admin.list_group_offsets(group, [tps[1]]) == {tps[1]: committed[tps[1]]}
    eventually(lambda: group in [g.group_id for g in admin.list_groups()])
    desc = admin.describe_groups([group])[group]
    assert desc.state == "Empty" and desc.members == ()
    assert admin.delete_group_offsets(group, [tps[0]]).ok
    assert set(admin.list_group_offsets(group)) == {tps[1]}
    assert admin.delete_groups([group]).ok
    eventually(lambda: group not in [g.group_id for g in admin.list_groups()])


def _poll_until_assigned(consumer: kpax.Consumer, tps: set[kpax.TopicPartition]) -> None:
    # A KIP-848 member may first be given nothing (its coordinator not yet seeing
    # a topic created a moment ago): poll until it owns every partition.
    deadline = time.monotonic() + 45
    while consumer.assignment() != tps:
        assert time.monotonic() < deadline, f"assignment {consumer.assignment()} != {tps}"
        consumer.poll(0.1)


def _described_when_assigned(admin, group: str, tps: set[kpax.TopicPartition]):
    """The group's description once it is Stable with one member owning ``tps``."""

    def check():
        desc = admin.describe_groups([group])[group]
        members = desc.members
        if desc.state == "Stable" and len(members) == 1 and set(members[0].assignment) == tps:
            return desc
        return None

    return eventually(check, timeout=45)


@pytest.mark.parametrize(
    "protocol", [pytest.param("consumer", marks=pytest.mark.kafka4), "classic"]
)
def test_describe_groups_of_both_protocols(admin, kafka, topic, protocol):
    """describe_groups works on KIP-848 groups (ConsumerGroupDescribe) and classic
    ones (DescribeGroups), sync and asyncio, and says which kind each is."""
    t = topic(partitions=2)
    group = _name("grp")
    tps = {kpax.TopicPartition(t, 0), kpax.TopicPartition(t, 1)}
    consumer = kpax.Consumer(
        kafka.bootstrap, group_id=group, group_protocol=protocol, client_id=f"cid-{protocol}"
    )
    try:
        consumer.subscribe([t])
        _poll_until_assigned(consumer, tps)
        desc = _described_when_assigned(admin, group, tps)
        assert desc.group_id == group and desc.type == protocol
        assert desc.coordinator >= 0 and desc.protocol_type == "consumer"
        (m,) = desc.members
        assert m.client_id == f"cid-{protocol}" and m.client_host and m.member_id
        assert m.group_instance_id is None
        assert m.subscribed_topics == (t,)
        if protocol == "consumer":
            assert desc.assignor in ("uniform", "range")  # the broker's server-side assignor
            assert desc.group_epoch is not None and desc.group_epoch >= 1
            assert desc.assignment_epoch == desc.group_epoch
            assert m.member_epoch == desc.group_epoch
            assert set(m.target_assignment or ()) == tps
            assert m.subscribed_topic_regex is None and m.upgraded is True
        else:
            assert desc.assignor == "range"  # the first of kpax's default strategies
            assert desc.group_epoch is None and m.member_epoch is None
            assert m.target_assignment is None and m.upgraded is None

        async def describe_aio():
            async with kpax.aio.Admin(kafka.bootstrap) as a:
                return (await a.describe_groups([group]))[group]

        adesc = asyncio.run(describe_aio())
        assert adesc.type == protocol and set(adesc.members[0].assignment) == tps
        # Offsets of a live group cannot be moved from outside: the error says why.
        moved = admin.alter_group_offsets(group, {kpax.TopicPartition(t, 0): 0})
        err = moved.errors[kpax.TopicPartition(t, 0)]
        assert isinstance(err, UnknownMemberIdError)
        assert group in str(err) and "active members" in str(err)
        consumer.commit({kpax.TopicPartition(t, 0): kpax.OffsetAndMetadata(0)})
    finally:
        consumer.close()

    def empty():
        d = admin.describe_groups([group])[group]
        return d if d.is_empty else None

    after = eventually(empty, timeout=30)
    assert after.type == protocol and after.state == "Empty" and after.members == ()
    listing = {g.group_id: g for g in admin.list_groups()}[group]
    assert listing.type == protocol
    assert admin.alter_group_offsets(group, {kpax.TopicPartition(t, 0): 0}).ok
    assert admin.delete_groups([group]).ok


@pytest.mark.kafka4
def test_describe_consumer_group_with_a_classic_member(admin, kafka, topic):
    """A classic-protocol member joining a KIP-848 group stays in a consumer
    group: described with ConsumerGroupDescribe, ``upgraded`` tells them apart."""
    t = topic(partitions=2)
    group = _name("grp")
    new = kpax.Consumer(kafka.bootstrap, group_id=group, group_protocol="consumer")
    old = kpax.Consumer(kafka.bootstrap, group_id=group, group_protocol="classic")
    try:
        new.subscribe([t])
        _poll_until_assigned(new, {kpax.TopicPartition(t, 0), kpax.TopicPartition(t, 1)})
        old.subscribe([t])
        deadline = time.monotonic() + 45
        while not (old.assignment() and len(new.assignment()) == 1):
            assert time.monotonic() < deadline, "the classic member got no partition"
            new.poll(0.05)
            old.poll(0.05)

        def split():
            d = admin.describe_groups([group])[group]
            ok = d.state == "Stable" and len(d.members) == 2
            return d if ok and all(len(m.assignment) == 1 for m in d.members) else None

        desc = eventually(split, timeout=30)
        assert desc.type == "consumer"
        by_kind = {m.upgraded: m for m in desc.members}
        assert set(by_kind[True].assignment) == new.assignment()
        assert set(by_kind[False].assignment) == old.assignment()
        assert by_kind[False].subscribed_topics == (t,)
    finally:
        old.close()
        new.close()


def test_describe_unknown_group_names_it(admin):
    group = _name("nogroup")
    err = admin.describe_groups([group]).errors[group]
    assert isinstance(err, GroupIdNotFoundError)
    assert group in str(err) and "broker" in str(err)


def test_scram_users(admin, kafka):
    user = _name("user")
    assert admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                user, ScramMechanism.SCRAM_SHA_256, "s3cret", iterations=8192
            )
        ]
    ).ok
    creds = admin.describe_user_scram_credentials([user])[user]
    assert [(c.mechanism, c.iterations) for c in creds.credentials] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    # The new user can log in with that password.
    with kpax.Admin(
        kafka.listener("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=user,
        sasl_plain_password="s3cret",
    ) as as_user:
        assert as_user.describe_cluster().brokers
    assert admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)]
    ).ok
    assert admin.describe_user_scram_credentials([user]).errors[user]


def test_acls_on_a_broker_with_an_authorizer(kafka_factory):
    cluster = kafka_factory(
        config={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        }
    )
    with kpax.Admin(cluster.bootstrap) as admin:
        acl = AclBinding(ResourceType.TOPIC, "orders", "User:alice", AclOperation.READ)
        other = AclBinding(ResourceType.GROUP, "g", "User:bob", AclOperation.READ)
        assert admin.create_acls([acl, other]).ok
        eventually(lambda: len(admin.describe_acls()) == 2)
        assert admin.describe_acls(AclBindingFilter(resource_type=ResourceType.TOPIC)) == [acl]
        deleted = admin.delete_acls([AclBindingFilter(principal="User:alice")])
        assert list(deleted.values()) == [[acl]]
        eventually(lambda: admin.describe_acls() == [other])


async def test_async_admin(kafka):
    name = _name()
    async with kpax.aio.Admin(kafka.bootstrap) as admin:
        assert (await admin.create_topics([kpax.NewTopic(name, 2, 1)])).ok
        for _ in range(100):
            if name in await admin.list_topics():
                break
            await asyncio.sleep(0.1)
        assert name in await admin.list_topics()
        assert (await admin.describe_cluster()).cluster_id
        assert (await admin.delete_topics([name])).ok


def test_bad_bootstrap_lists_each_address_within_timeout():
    started = time.monotonic()
    with pytest.raises(NoBrokersAvailableError) as info:
        kpax.Admin(
            ["no-such-host.invalid:9092", "127.0.0.1:1"],
            socket_connection_setup_timeout_ms=2000,
        )
    assert time.monotonic() - started < 10
    text = str(info.value)
    assert "no-such-host.invalid:9092" in text and "127.0.0.1:1: " in text
    assert "refused" in text


def test_closed_admin_and_threads(kafka):
    def io_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "kpax-admin"}

    before = io_threads()
    admin = kpax.Admin(kafka.bootstrap)
    assert len(io_threads() - before) == 1
    results: list[object] = []

    def work() -> None:
        results.append(admin.describe_cluster().controller_id)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    admin.close()
    assert io_threads() == before  # closing stopped this admin's I/O thread
    with pytest.raises(ClientClosedError):
        admin.list_topics()


def test_unknown_option_names_the_closest(kafka):
    with pytest.raises(kpax.ConfigError, match="request_timeout_ms"):
        kpax.Admin(kafka.bootstrap, request_timeout=5)


def test_interop_topics_with_kafka_python(admin, kafka):
    from kafka.admin import KafkaAdminClient, NewTopic

    mine, theirs = _name("kpax"), _name("kp")
    admin.create_topics([kpax.NewTopic(mine, 2, 1)]).raise_for_errors()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        other = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
        try:
            eventually(lambda: mine in other.list_topics())
            other.create_topics([NewTopic(theirs, num_partitions=3, replication_factor=1)])
        finally:
            other.close()
    eventually(lambda: theirs in admin.list_topics())
    assert len(admin.describe_topics([theirs])[theirs].partitions) == 3
