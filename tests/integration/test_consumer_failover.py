"""A consumer across a partition leader change (three brokers): the fetcher
finds the new leader (NOT_LEADER / connection errors, metadata refresh,
position validated by leader epoch) and goes on with no gap or duplicate."""

from __future__ import annotations

import time

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.integration.test_consumer import produce, values

pytestmark = pytest.mark.integration


def test_reading_across_a_leader_kill_has_no_gap_or_duplicate(kafka_cluster3, topic):
    t = topic(partitions=1, replication_factor=3, cluster=kafka_cluster3)
    boot = kafka_cluster3.bootstrap
    produce(boot, t, 2000)
    with kpax.Admin(boot) as a:
        leader = a.describe_topics([t])[t].partitions[0].leader
    seen: list[int] = []
    killed = False
    try:
        with kpax.Consumer(
            boot, auto_offset_reset="earliest", max_poll_records=100, request_timeout_ms=5000
        ) as c:
            c.assign([TP(t, 0)])
            while len(seen) < 1000:
                seen.extend(values(c.poll(1.0)))
            kafka_cluster3.kill_broker(leader)
            killed = True
            others = ",".join(a for n, a in kafka_cluster3.brokers.items() if n != leader)
            produce(others, t, 2000, start=2000)
            deadline = time.monotonic() + 60
            while len(seen) < 4000 and time.monotonic() < deadline:
                seen.extend(values(c.poll(1.0)))
            seen.extend(values(c.poll(1.0)))
        assert seen == list(range(4000))
    finally:
        if killed:
            kafka_cluster3.restart_broker(leader)
