"""A topic name Kafka would refuse, given to any entry point (real broker).

``"bad\\udcff"`` -- what ``os.fsdecode`` and a surrogateescape'd ``sys.argv``
make of a non-UTF-8 name -- used to enter the producer's metadata unchecked:
every later Metadata request failed to encode, the periodic refresh warned
every 2 s forever, sends to other new topics timed out and a leader failover
was never noticed. Now every entry point (send, send_many, partitions_for,
subscribe, assign, the admin calls, the CLI) refuses it at once with
InvalidTopicError naming it, and the client goes on working for other topics.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
import uuid

import pytest

import kpax
from kpax.errors import InvalidTopicError
from tests.integration.test_cli import cli_env

pytestmark = pytest.mark.integration

BAD = "bad\udcff"
BAD_REPR = repr(BAD)  # 'bad\udcff', as printed (the surrogate visible)


def _assert_invalid(err: BaseException, name: str = BAD) -> None:
    assert isinstance(err, InvalidTopicError), repr(err)
    assert repr(name) in str(err) and "retrying cannot help" in str(err)
    assert not err.retriable


def _new_name() -> str:
    return f"after-bad-{uuid.uuid4().hex[:10]}"


def test_sync_producer_refuses_a_bad_name_at_once_and_keeps_working(kafka, caplog):
    caplog.set_level(logging.WARNING, logger="kpax")
    with kpax.Producer(kafka.bootstrap, metadata_max_age_ms=300, max_block_ms=20_000) as p:
        for call in (
            lambda: p.send(BAD, b"v"),
            lambda: p.send(BAD, b"v", key=b"k", headers=[("h", b"x")]),
            lambda: p.send_many(BAD, [b"a", b"b"]),
            lambda: p.partitions_for(BAD),
        ):
            t0 = time.monotonic()
            with pytest.raises(InvalidTopicError) as info:
                call()
            assert time.monotonic() - t0 < 1.0
            _assert_invalid(info.value)
        # other new topics still work, and the periodic refreshes go on quietly
        new = _new_name()
        assert p.send(new, b"after").result(20).offset == 0
        assert p.send_many(new, [b"x", b"y"]).result(20) == 2
        deadline = time.monotonic() + 1.0  # a few metadata_max_age_ms periods
        while time.monotonic() < deadline:
            assert p.partitions_for(new) == [0]
            time.sleep(0.1)
        assert BAD not in p.aio.cluster.interest
    refused = [r for r in caplog.records if "metadata refresh failed" in r.getMessage()]
    assert not refused, refused[0].getMessage()


async def test_asyncio_producer_refuses_a_bad_name_at_once_and_keeps_working(kafka):
    async with kpax.aio.Producer(kafka.bootstrap, max_block_ms=20_000) as p:
        for call in (
            lambda: p.send(BAD, b"v"),
            lambda: p.send_and_wait(BAD, b"v", key=b"k"),
            lambda: p.send_many(BAD, [b"a"]),
            lambda: p.partitions_for(BAD),
        ):
            t0 = time.monotonic()
            with pytest.raises(InvalidTopicError) as info:
                await call()
            assert time.monotonic() - t0 < 1.0
            _assert_invalid(info.value)
        new = _new_name()
        metas = await asyncio.gather(*[p.send_and_wait(new, b"%d" % i) for i in range(10)])
        assert sorted(m.offset for m in metas) == list(range(10))
        assert BAD not in p.cluster.interest


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "with space", "slash/name", "caf\u00e9", BAD]
)
def test_every_kafka_rule_is_checked_before_anything_is_sent(kafka, name):
    with kpax.Producer(kafka.bootstrap, max_block_ms=20_000) as p:
        with pytest.raises(InvalidTopicError) as info:
            p.send(name, b"v")
        _assert_invalid(info.value, name)
        assert name not in p.aio.cluster.interest


def test_consumer_subscribe_and_assign_refuse_a_bad_name(kafka, topic):
    good = topic()
    with kpax.Consumer(
        kafka.bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest"
    ) as c:
        with pytest.raises(InvalidTopicError) as info:
            c.subscribe([good, BAD])
        _assert_invalid(info.value)
        assert c.subscription() == set()
        with pytest.raises(InvalidTopicError) as info:
            c.assign([kpax.TopicPartition(BAD, 0)])
        _assert_invalid(info.value)
        c.subscribe([good])
        assert c.subscription() == {good}
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        with pytest.raises(InvalidTopicError):
            c.assign([kpax.TopicPartition(good, 0), kpax.TopicPartition(BAD, 0)])
        with pytest.raises(InvalidTopicError):
            c.end_offsets([kpax.TopicPartition(BAD, 0)])
        c.assign([kpax.TopicPartition(good, 0)])
        assert c.end_offsets([kpax.TopicPartition(good, 0)]) == {kpax.TopicPartition(good, 0): 0}


async def test_asyncio_consumer_subscribe_and_assign_refuse_a_bad_name(kafka):
    async with kpax.aio.Consumer(kafka.bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}") as c:
        with pytest.raises(InvalidTopicError) as info:
            await c.subscribe([BAD])
        _assert_invalid(info.value)
    async with kpax.aio.Consumer(kafka.bootstrap) as c:
        with pytest.raises(InvalidTopicError) as info:
            await c.assign([kpax.TopicPartition(BAD, 0)])
        _assert_invalid(info.value)


def test_share_consumer_subscribe_refuses_a_bad_name(kafka):
    with kpax.ShareConsumer(kafka.bootstrap, group_id=f"s-{uuid.uuid4().hex[:8]}") as c:
        with pytest.raises(InvalidTopicError) as info:
            c.subscribe([BAD])
        _assert_invalid(info.value)


def test_admin_fails_the_bad_name_alone_and_does_the_rest(kafka, topic):
    existing = topic(partitions=1)
    fresh = _new_name()
    with kpax.Admin(kafka.bootstrap, default_api_timeout_ms=20_000) as admin:
        t0 = time.monotonic()
        created = admin.create_topics([kpax.NewTopic(fresh, 1, 1), kpax.NewTopic(BAD, 1, 1)])
        assert created.succeeded == {fresh: None}
        _assert_invalid(created.errors[BAD])
        described = admin.describe_topics([existing, BAD])
        assert existing in described.succeeded
        _assert_invalid(described.errors[BAD])
        grown = admin.create_partitions({existing: 2, BAD: 2})
        assert grown.succeeded == {existing: None}
        _assert_invalid(grown.errors[BAD])
        tp, bad_tp = kpax.TopicPartition(existing, 0), kpax.TopicPartition(BAD, 0)
        offsets = admin.list_offsets({tp: "latest", bad_tp: "latest"})
        assert offsets[tp].offset == 0
        _assert_invalid(offsets.errors[bad_tp])
        configs = admin.describe_configs([kpax.ConfigResource.topic(BAD)])
        _assert_invalid(configs.errors[kpax.ConfigResource.topic(BAD)])
        deleted = admin.delete_topics([fresh, BAD])
        assert deleted.succeeded == {fresh: None}
        _assert_invalid(deleted.errors[BAD])
        assert time.monotonic() - t0 < 15
        assert BAD not in admin.aio.cluster.interest


def _kpax_raw(bootstrap: str, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "kpax.cli", *args],
        input=b"v\n",
        capture_output=True,
        env=cli_env(bootstrap),
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("produce", b"bad\xff"),
        ("consume", b"bad\xff", "--count", "1"),
        ("topics", "create", "fine-name", b"bad\xff"),
        ("meta", b"bad\xff"),
    ],
    ids=["produce", "consume", "topics-create", "meta"],
)
def test_cli_refuses_a_non_utf8_topic_argument_in_one_line(kafka, args):
    r = _kpax_raw(kafka.bootstrap, *args)
    err = r.stderr.decode()
    assert r.returncode == 2, (r.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert BAD_REPR in lines[0] and "not valid" in lines[0]
    with kpax.Admin(kafka.bootstrap) as admin:
        assert "fine-name" not in admin.list_topics()  # nothing ran
