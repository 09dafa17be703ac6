"""Rebootstrap (KIP-899): the whole cluster behind a client is replaced while a
producer and a consumer run. The bootstrap list names two single-broker clusters,
A and B; the clients bootstrap from A (first in the list) and know only A's broker.
A is killed: the next metadata refresh finds no known broker, goes back to the
bootstrap list, lands on B (another cluster id: the old metadata is dropped) and
both clients carry on there. With ``metadata_recovery_strategy="none"`` they do not.
"""

from __future__ import annotations

import time
import uuid

import pytest

import kpax
from kpax.testing.pytest_plugin import create_topic

pytestmark = pytest.mark.timeout(240)


def _values_on(bootstrap: str, topic: str, n: int, timeout: float = 60) -> list[bytes]:
    with kpax.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(topic, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(0.5))
        return out


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_the_whole_cluster_replaced_under_a_running_producer_and_consumer(
    kafka_factory, kafka, idempotent
):
    # A (killed) is the test's own; B, the cluster that takes over, is the session's
    # (another cluster; the topic's name is the test's own)
    a, b = kafka_factory(), kafka
    t = "reboot-" + uuid.uuid4().hex[:8]
    for cluster in (a, b):
        create_topic(cluster, 1, name=t)
    both = f"{a.bootstrap},{b.bootstrap}"
    fast = {
        "request_timeout_ms": 5000,
        "retry_backoff_max_ms": 500,
        "reconnect_backoff_max_ms": 500,
    }
    with (
        kpax.Producer(both, enable_idempotence=idempotent, linger_ms=5, **fast) as p,
        kpax.Consumer(both, auto_offset_reset="earliest", **fast) as c,
    ):
        c.assign([kpax.TopicPartition(t, 0)])
        for i in range(100):
            p.send(t, b"a-%d" % i)
        p.flush(30)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(0.5))
        assert got == [b"a-%d" % i for i in range(100)]

        a.kill_broker(1)
        t0 = time.monotonic()
        futures = [p.send(t, b"b-%d" % i) for i in range(150)]
        metas = [f.result(60) for f in futures]
        took = time.monotonic() - t0
        # every record of the second round is on B, in order, once
        assert [m.offset for m in metas] == list(range(150)), metas[:3]
        assert _values_on(b.bootstrap, t, 150) == [b"b-%d" % i for i in range(150)]
        # The consumer, at offset 100 of A, goes on on B: at offset 100, or -- when it
        # validated its position while B's log was still shorter (log truncation,
        # KIP-320) -- from B's start. Either way B's records come in order, to the last.
        more: list[bytes] = []
        deadline = time.monotonic() + 60
        while b"b-149" not in more and time.monotonic() < deadline:
            more.extend(r.value for r in c.poll(0.5))
        assert more, "the consumer read nothing from B"
        first = int(more[0][2:])
        assert first in (0, 100) and more == [b"b-%d" % i for i in range(first, 150)], more[:3]
        print(f"rebootstrapped and delivered 150 records on B {took:.1f}s after A died")


def test_no_rebootstrap_when_the_strategy_is_none(kafka_factory, kafka):
    a, b = kafka_factory(), kafka  # A is killed; B, the session's, is never asked
    t = "reboot-" + uuid.uuid4().hex[:8]
    for cluster in (a, b):
        create_topic(cluster, 1, name=t)
    with kpax.Producer(
        f"{a.bootstrap},{b.bootstrap}",
        metadata_recovery_strategy="none",
        request_timeout_ms=3000,
        delivery_timeout_ms=8000,
        linger_ms=0,
        retry_backoff_max_ms=500,
        reconnect_backoff_max_ms=500,
    ) as p:
        p.send(t, b"x").result(30)
        a.kill_broker(1)
        with pytest.raises(kpax.KafkaError):
            p.send(t, b"y").result(30)
    assert _values_on(b.bootstrap, t, 1, timeout=5) == []
