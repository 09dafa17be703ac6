"""A dead group coordinator: commits fail with a clear error naming the group
within default_api_timeout_ms, and close() still returns within its timeout."""

from __future__ import annotations

import time
import uuid

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.integration.test_consumer import produce

pytestmark = pytest.mark.integration


def test_dead_coordinator_gives_a_clear_error_and_close_is_bounded(kafka_factory):
    cluster = kafka_factory()
    t = "dead-" + uuid.uuid4().hex[:6]
    with kpax.Admin(cluster.bootstrap) as a:
        a.create_topics([kpax.NewTopic(t, 1, 1)]).raise_for_errors()
    produce(cluster.bootstrap, t, 10)
    g = "g-" + uuid.uuid4().hex[:6]
    c = kpax.Consumer(
        cluster.bootstrap,
        group_id=g,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        default_api_timeout_ms=3000,
        request_timeout_ms=2000,
        reconnect_backoff_max_ms=200,
    )
    try:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got += c.poll(0.2)
        assert len(got) == 10
        c.commit()
        node = next(iter(cluster.brokers))
        cluster.kill_broker(node)
        t0 = time.monotonic()
        with pytest.raises(kpax.KafkaError, match=g) as info:
            c.commit({TP(t, 0): 5})
        assert time.monotonic() - t0 < 15
        assert info.value.retriable  # the coordinator may come back
    finally:
        t0 = time.monotonic()
        c.close(timeout=4)
        assert time.monotonic() - t0 < 6
