"""Share groups (KIP-932) through kpax.Admin and kpax.aio.Admin on a real broker:
listing, describing members and their partitions, start offsets (list, alter,
delete), deleting groups, group configs, unknown groups and groups of another
type, and brokers without the APIs (Kafka 3.9, in the broker matrix).

A share-group member is made without a share consumer: the test sends
ShareGroupHeartbeat itself (through an admin client's cluster) until the
coordinator assigns it partitions, and leaves with member epoch -1."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kpax
from kpax.admin import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    SharePartitionOffset,
)
from kpax.cluster.request_path import ToCoordinator
from kpax.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    NonEmptyGroupError,
    UnknownTopicOrPartitionError,
    UnsupportedApiError,
)
from kpax.proto.errors import error_for_code
from kpax.proto.messages import DescribeShareGroupOffsetsRequest, ShareGroupHeartbeatRequest
from kpax.structs import TopicPartition
from kpax.testing.jars import is_kafka4, kafka_version
from tests.wait import eventually

pytestmark = pytest.mark.integration

MEMBER_CLIENT_ID = "share-member"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def admin(kafka: Any) -> Iterator[kpax.Admin]:
    with kpax.Admin(kafka.bootstrap) as a:
        yield a


def _topic(admin: kpax.Admin, partitions: int) -> str:
    name = _name("sgt")
    admin.create_topics([kpax.NewTopic(name, partitions, 1)]).raise_for_errors()
    eventually(lambda: len(admin.describe_topics([name])[name].partitions) == partitions)
    return name


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    with kpax.Producer(bootstrap) as p:
        for partition, n in counts.items():
            for i in range(n):
                p.send(topic, b"v%d" % i, partition=partition)
        p.flush()


async def _heartbeat(
    bootstrap: str, group: str, member_id: str, epoch: int, topics: list[str] | None
) -> Any:
    """One ShareGroupHeartbeat to the group's coordinator, retried while the
    coordinator moves or loads; the response (its error checked)."""
    async with kpax.aio.Admin(bootstrap, client_id=MEMBER_CLIENT_ID) as a:

        async def send(broker: Any) -> Any:
            resp = await broker.request(
                ShareGroupHeartbeatRequest(
                    group_id=group,
                    member_id=member_id,
                    member_epoch=epoch,
                    subscribed_topic_names=topics,
                )
            )
            if resp.error_code:  # a moved or loading coordinator: found again, resent
                raise error_for_code(resp.error_code)(
                    f"share group heartbeat of {group!r}", error_message=resp.error_message
                )
            return resp

        await a.cluster.start()
        return await a.requests.call(
            f"share group heartbeat of {group!r}", ToCoordinator(group), send, timeout=30
        )


def _join(bootstrap: str, group: str, topic: str) -> str:
    """A new member of share group ``group`` subscribed to ``topic``, once the
    coordinator has assigned it partitions: its member id."""
    member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    async def run() -> None:
        epoch = 0
        deadline = time.monotonic() + 30
        while True:
            resp = await _heartbeat(
                bootstrap, group, member_id, epoch, [topic] if epoch == 0 else None
            )
            epoch = resp.member_epoch
            if resp.assignment is not None and resp.assignment.topic_partitions:
                return
            assert time.monotonic() < deadline, f"no assignment for {group!r} in 30s"
            await asyncio.sleep(0.1)

    asyncio.run(run())
    return member_id


def _leave(bootstrap: str, group: str, member_id: str) -> None:
    asyncio.run(_heartbeat(bootstrap, group, member_id, -1, None))


def _empty(admin: kpax.Admin, group: str) -> bool:
    d = admin.describe_share_groups([group])[group]
    return d.is_empty and d.state == "Empty"


@pytest.mark.kafka4
def test_list_groups_shows_share_groups_with_type_share(admin: kpax.Admin, kafka: Any) -> None:
    topic = _topic(admin, 1)
    group = _name("sg")
    _join(kafka.bootstrap, group, topic)
    listing = eventually(
        lambda: {g.group_id: g for g in admin.list_groups(types=["share"])}.get(group)
    )
    assert listing is not None
    assert listing.type == "share" and listing.protocol_type == "share"
    assert listing.state == "Stable"
    assert all(g.type == "share" for g in admin.list_groups(types=["share"]))
    everything = {g.group_id: g for g in admin.list_groups()}
    assert everything[group].type == "share"
    assert group not in {g.group_id for g in admin.list_groups(types=["consumer", "classic"])}


@pytest.mark.kafka4
def test_describe_share_group_member_and_its_partitions(admin: kpax.Admin, kafka: Any) -> None:
    topic = _topic(admin, 3)
    group = _name("sg")
    member_id = _join(kafka.bootstrap, group, topic)
    everything = tuple(TopicPartition(topic, p) for p in range(3))

    def described() -> Any:
        d = admin.describe_share_groups([group])[group]
        assert d.state == "Stable" and len(d.members) == 1, d
        assert d.members[0].assignment == everything, d
        return d

    d = eventually(described)
    assert d.group_id == group and d.coordinator >= 0 and d.assignor
    assert d.group_epoch >= 1 and d.assignment_epoch == d.group_epoch
    m = d.members[0]
    assert m.member_id == member_id and m.client_id == MEMBER_CLIENT_ID and m.client_host
    assert m.subscribed_topics == (topic,) and m.member_epoch == d.group_epoch
    assert not d.is_empty

    async def via_asyncio() -> Any:
        async with kpax.aio.Admin(kafka.bootstrap) as a:
            return (await a.describe_share_groups([group]))[group]

    assert asyncio.run(via_asyncio()).members == d.members

    # describe_groups does not describe share groups, and the error says which group.
    err = admin.describe_groups([group]).errors[group]
    assert isinstance(err, GroupIdNotFoundError) and group in str(err)
    _leave(kafka.bootstrap, group, member_id)
    eventually(lambda: _empty(admin, group))


@pytest.mark.kafka4
def test_a_live_share_group_refuses_offset_changes_and_deletion(
    admin: kpax.Admin, kafka: Any
) -> None:
    topic = _topic(admin, 1)
    group = _name("sg")
    member_id = _join(kafka.bootstrap, group, topic)
    tp = TopicPartition(topic, 0)
    altered = admin.alter_share_group_offsets(group, {tp: 0})
    err = altered.errors[tp]
    assert isinstance(err, NonEmptyGroupError) and not err.retriable
    assert group in str(err) and "only while it is empty" in str(err)
    deleted_offsets = admin.delete_share_group_offsets(group, [topic])
    assert isinstance(deleted_offsets.errors[topic], NonEmptyGroupError)
    deleted = admin.delete_share_groups([group])
    assert isinstance(deleted.errors[group], NonEmptyGroupError)
    assert group in str(deleted.errors[group])
    assert admin.describe_share_groups([group])[group].members  # still there
    _leave(kafka.bootstrap, group, member_id)
    eventually(lambda: _empty(admin, group))
    assert admin.delete_share_groups([group]).ok


@pytest.mark.kafka4
def test_share_group_offsets_alter_list_delete(admin: kpax.Admin, kafka: Any) -> None:
    topic = _topic(admin, 2)
    _produce(kafka.bootstrap, topic, {0: 10, 1: 3})
    group = _name("sg")
    member_id = _join(kafka.bootstrap, group, topic)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    # Assigned but not read yet: the group has state, but no start offsets.
    eventually(lambda: admin.list_share_group_offsets(group) == {p0: None, p1: None})
    _leave(kafka.bootstrap, group, member_id)
    eventually(lambda: _empty(admin, group))

    assert admin.alter_share_group_offsets(group, {p0: 4, p1: 0}).ok
    offsets = admin.list_share_group_offsets(group)
    assert set(offsets) == {p0, p1}
    o0, o1 = offsets[p0], offsets[p1]
    assert o0 is not None and o1 is not None
    assert (o0.start_offset, o1.start_offset) == (4, 0)
    # The lag (DescribeShareGroupOffsets v1+): the records from there to the end.
    with_lag = _max_version(kafka.bootstrap, DescribeShareGroupOffsetsRequest) >= 1
    assert (o0.lag, o1.lag) == ((6, 3) if with_lag else (None, None))
    assert admin.list_share_group_offsets(group, [p1]) == {p1: offsets[p1]}

    async def via_asyncio() -> Any:
        async with kpax.aio.Admin(kafka.bootstrap) as a:
            return await a.list_share_group_offsets(group, [p0])

    assert asyncio.run(via_asyncio()) == {p0: offsets[p0]}

    # Per-partition errors name the partition; the others are altered.
    missing = TopicPartition(topic, 7)
    result = admin.alter_share_group_offsets(group, {p0: 2, missing: 0})
    assert result.succeeded == {p0: None}
    assert isinstance(result.errors[missing], UnknownTopicOrPartitionError)
    assert str(missing) in str(result.errors[missing]) and group in str(result.errors[missing])
    assert admin.list_share_group_offsets(group, [p0])[p0] == SharePartitionOffset(
        2, o0.leader_epoch, 8 if with_lag else None
    )
    # A partition the topic does not have is refused at once, named.
    started = time.monotonic()
    with pytest.raises(UnknownTopicOrPartitionError, match=f"{topic}.*no partition 5"):
        admin.list_share_group_offsets(group, [TopicPartition(topic, 5)])
    assert time.monotonic() - started < 10

    deleted = admin.delete_share_group_offsets(group, [topic, "no-such-topic-sg"])
    assert deleted.succeeded == {topic: None}
    assert isinstance(deleted.errors["no-such-topic-sg"], UnknownTopicOrPartitionError)
    assert admin.list_share_group_offsets(group) == {}
    assert admin.list_share_group_offsets(group, [p0, p1]) == {p0: None, p1: None}


@pytest.mark.kafka4
def test_delete_share_group_then_describe_fails_naming_it(admin: kpax.Admin, kafka: Any) -> None:
    topic = _topic(admin, 1)
    group = _name("sg")
    _leave(kafka.bootstrap, group, _join(kafka.bootstrap, group, topic))
    eventually(lambda: _empty(admin, group))
    assert admin.delete_share_groups([group]).ok
    err = admin.describe_share_groups([group]).errors[group]
    assert isinstance(err, GroupIdNotFoundError) and not err.retriable
    assert group in str(err)
    eventually(lambda: group not in {g.group_id for g in admin.list_groups(types=["share"])})


@pytest.mark.kafka4
def test_share_group_configs_on_a_group_resource(admin: kpax.Admin) -> None:
    group = _name("sg")
    res = ConfigResource(ConfigResourceType.GROUP, group)
    defaults = admin.describe_configs([res])[res]
    assert defaults["share.auto.offset.reset"].value == "latest"
    assert defaults["share.auto.offset.reset"].source == ConfigSource.DEFAULT_CONFIG
    wanted = {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "3",
        "share.isolation.level": "read_committed",
    }
    assert admin.incremental_alter_configs(
        {res: [AlterConfigOp(k, v) for k, v in wanted.items()]}
    ).ok

    def applied() -> bool:
        entries = admin.describe_configs([res], keys=list(wanted))[res]
        assert {k: e.value for k, e in entries.items()} == wanted
        assert all(e.source == ConfigSource.GROUP_CONFIG for e in entries.values())
        return True

    eventually(applied)
    bad = admin.incremental_alter_configs({res: [AlterConfigOp("share.auto.offset.reset", "x")]})
    assert isinstance(bad.errors[res], InvalidConfigError) and group in str(bad.errors[res])
    undo = AlterConfigOp("share.auto.offset.reset", op=AlterConfigOpType.DELETE)
    assert admin.incremental_alter_configs({res: [undo]}).ok
    eventually(
        lambda: admin.describe_configs([res])[res]["share.auto.offset.reset"].value == "latest"
    )


@pytest.mark.kafka4
def test_unknown_share_group_and_group_of_another_type(admin: kpax.Admin, kafka: Any) -> None:
    group = _name("nosg")
    err = admin.describe_share_groups([group]).errors[group]
    assert isinstance(err, GroupIdNotFoundError) and group in str(err) and "broker" in str(err)
    assert isinstance(admin.delete_share_groups([group]).errors[group], GroupIdNotFoundError)
    deleted = admin.delete_share_group_offsets(group, ["some-topic"])
    assert isinstance(deleted.errors["some-topic"], GroupIdNotFoundError)
    assert group in str(deleted.errors["some-topic"])
    assert admin.list_share_group_offsets(group) == {}
    # A classic group (offsets committed from outside) is not a share group.
    topic = _topic(admin, 1)
    classic = _name("grp")
    assert admin.alter_group_offsets(classic, {TopicPartition(topic, 0): 0}).ok
    err = admin.describe_share_groups([classic]).errors[classic]
    assert isinstance(err, GroupIdNotFoundError)
    assert classic in str(err) and "not a share group" in str(err)
    moved = admin.alter_share_group_offsets(classic, {TopicPartition(topic, 0): 0})
    assert "not a share group" in str(moved.errors[TopicPartition(topic, 0)])
    assert admin.delete_groups([classic]).ok


def test_brokers_without_share_groups_say_so(admin: kpax.Admin) -> None:
    """On Kafka 3.9 (the broker matrix) every share-group call fails at once with
    UnsupportedApiError naming the call and the API; on 4.x the APIs answer."""
    group = _name("sg")
    if is_kafka4(kafka_version()):
        assert isinstance(admin.describe_share_groups([group]).errors[group], GroupIdNotFoundError)
        assert admin.list_share_group_offsets(group) == {}
        return
    tp = TopicPartition("some-topic", 0)
    started = time.monotonic()
    errors = {
        "ShareGroupDescribe": admin.describe_share_groups([group]).errors[group],
        "AlterShareGroupOffsets": admin.alter_share_group_offsets(group, {tp: 0}).errors[tp],
        "DeleteShareGroupOffsets": admin.delete_share_group_offsets(group, [tp.topic]).errors[
            tp.topic
        ],
    }
    with pytest.raises(UnsupportedApiError) as info:
        admin.list_share_group_offsets(group)
    errors["DescribeShareGroupOffsets"] = info.value
    assert time.monotonic() - started < 10
    for api, err in errors.items():
        assert isinstance(err, UnsupportedApiError), (api, err)
        assert api in str(err) and group in str(err) and not err.retriable
    assert admin.list_groups(types=["share"]) == []


def _max_version(bootstrap: str, request_cls: Any) -> int:
    """The highest version of ``request_cls`` kpax and the broker both speak."""

    async def run() -> int:
        async with kpax.aio.Admin(bootstrap) as a:
            return await a.cluster.least_loaded_broker().api_version(request_cls)

    return asyncio.run(run())
