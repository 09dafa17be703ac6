"""A topic deleted and re-created under the same name, against a real broker: a
consumer reading it (classic ``subscribe([topic])``, ``subscribe(pattern=...)``,
``assign()``) goes on with the new topic's records from the start
(``auto_offset_reset="earliest"``) instead of stopping silently at the old
topic's position; with ``auto_offset_reset="none"`` and no committed offset it
raises NoOffsetForPartitionError naming the partition."""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.consumer.errors import NoOffsetForPartitionError
from kpax.testing.pytest_plugin import create_topic
from tests.integration.test_consumer import produce
from tests.integration.test_consumer_group import FAST, gid
from tests.wait import eventually

pytestmark = pytest.mark.integration

#: How long the consumer may take to go on with the new topic (metadata refresh,
#: group rebalance, position reset): far below "for good", far above a busy machine.
RECOVER_S = 30.0


def _read(c: kpax.Consumer, want: int, timeout: float = RECOVER_S) -> list[kpax.ConsumerRecord]:
    got: list[kpax.ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, (
            f"{len(got)} of {want} records in {timeout:g}s; assignment {c.assignment()}"
        )
        got += c.poll(0.1)
    return got


def _recreate(kafka, name: str) -> None:
    """Delete ``name``, wait until the cluster no longer has it, create it again."""
    with kpax.Admin(kafka.bootstrap) as admin:
        admin.delete_topics([name]).raise_for_errors()
        eventually(lambda: name not in admin.list_topics(), timeout=30)
    create_topic(kafka, 1, name=name)


@pytest.mark.parametrize("mode", ["subscribe", "pattern", "assign"])
def test_a_recreated_topic_is_read_again_from_its_start(kafka, mode, caplog):
    name = "re-" + uuid.uuid4().hex[:10]
    create_topic(kafka, 1, name=name)
    produce(kafka.bootstrap, name, 100)
    kw = {"auto_offset_reset": "earliest"}
    if mode != "assign":
        kw = {**FAST, "group_id": gid()}
    c = kpax.Consumer(kafka.bootstrap, **kw)
    caplog.set_level(logging.INFO, logger="kpax.consumer")
    try:
        if mode == "subscribe":
            c.subscribe([name])
        elif mode == "pattern":
            c.subscribe(pattern=re.escape(name))
        else:
            c.assign([TP(name, 0)])
        old = _read(c, 100)
        assert [r.offset for r in old] == list(range(100))
        if mode != "assign":
            c.commit()
        _recreate(kafka, name)
        produce(kafka.bootstrap, name, 50, start=1000)
        new = _read(c, 50)
        # the new topic's records, from its first one: none skipped, none of the old
        assert [(r.offset, r.value) for r in new] == [(i, b"%d" % (1000 + i)) for i in range(50)]
        assert c.position(TP(name, 0)) == 50
        said = [r.getMessage() for r in caplog.records if "re-created" in r.getMessage()]
        assert said and name in said[0], [r.getMessage() for r in caplog.records]
    finally:
        c.close()


def test_a_recreated_topic_with_no_reset_policy_raises_naming_the_partition(kafka):
    name = "re-" + uuid.uuid4().hex[:10]
    create_topic(kafka, 1, name=name)
    produce(kafka.bootstrap, name, 10)
    tp = TP(name, 0)
    c = kpax.Consumer(kafka.bootstrap, auto_offset_reset="none")
    try:
        c.assign([tp])
        c.seek(tp, 0)
        assert len(_read(c, 10)) == 10
        _recreate(kafka, name)
        produce(kafka.bootstrap, name, 5)
        deadline = time.monotonic() + RECOVER_S
        with pytest.raises(NoOffsetForPartitionError, match=re.escape(str(tp))) as info:
            while time.monotonic() < deadline:
                assert not c.poll(0.1), "records read from an unknown position"
        assert "re-created" in str(info.value)
        c.seek(tp, 0)  # the application decides: then it reads on
        assert [r.offset for r in _read(c, 5)] == list(range(5))
    finally:
        c.close()
