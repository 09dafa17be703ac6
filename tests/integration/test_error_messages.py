"""Errors as a user meets them against a real broker: an offset out of range
(``auto_offset_reset="none"``) carries ``topic_partition``, ``offset`` and
``next_offset`` (the nearest offset in range, so ``seek(e.topic_partition,
e.next_offset)`` goes on), and a missing topic in the Spark source's planning
says so once, with no "(retriable)" suffix."""

from __future__ import annotations

import re
import time

import pytest

import kpax
from kpax.errors import ConfigError, OffsetOutOfRangeError, RecordPosition
from kpax.structs import TopicPartition as TP

pytestmark = pytest.mark.integration

SUFFIX = re.compile(r"\((not )?retriable\)")


def _poll_error(c: kpax.Consumer, timeout: float = 20.0) -> BaseException:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c.poll(0.5)
        except kpax.KafkaError as exc:
            return exc
    raise AssertionError(f"no error within {timeout}s")


def _drain(c: kpax.Consumer, n: int, timeout: float = 20.0) -> list[kpax.ConsumerRecord]:
    out: list[kpax.ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += c.poll(0.5)
    return out


def test_offset_out_of_range_says_where_and_how_to_go_on(kafka, topic):
    t = topic(partitions=1)
    tp = TP(t, 0)
    with kpax.Producer(kafka.bootstrap) as p:
        for i in range(50):
            p.send(t, b"%d" % i)
        p.flush(30)
    with kpax.Admin(kafka.bootstrap) as admin:
        admin.delete_records({tp: 20}).raise_for_errors()
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        # above the high watermark: the nearest offset in range is the end
        c.seek(tp, 10_000)
        err = _poll_error(c)
        assert isinstance(err, OffsetOutOfRangeError) and isinstance(err, RecordPosition)
        assert (err.topic_partition, err.offset, err.next_offset) == (tp, 10_000, 50)
        text = str(err)
        assert f"{t}-0" in text and "10000" in text and "log start 20, high watermark 50" in text
        assert f"seek(TopicPartition({t!r}, 0), 50)" in text
        assert not SUFFIX.search(text) and not err.retriable
        # below the log start: the nearest is the log start; seeking there goes on
        c.seek(tp, 5)
        err = _poll_error(c)
        assert isinstance(err, OffsetOutOfRangeError)
        assert (err.topic_partition, err.offset, err.next_offset) == (tp, 5, 20)
        c.seek(err.topic_partition, err.next_offset)
        assert [int(r.value) for r in _drain(c, 30)] == list(range(20, 50))


def test_a_missing_topic_in_the_spark_source_is_said_once(kafka):
    from kpax.spark.options import parse_read_options
    from kpax.spark.planning import Planner

    opts = parse_read_options(
        {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": "no-such-topic-i28"},
        batch=True,
    )
    planner = Planner(opts)
    try:
        with pytest.raises(ConfigError) as info:
            planner.partitions()
    finally:
        planner.close()
    text = str(info.value)
    assert text == "option 'subscribe': topic 'no-such-topic-i28' does not exist", text
    assert not SUFFIX.search(text), text
