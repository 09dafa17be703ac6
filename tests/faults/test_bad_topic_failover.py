"""A leader failover after the producer was given a bad topic name (real
three-broker KRaft cluster, the session's ``kafka_cluster3``).

A name with a lone surrogate (``"bad\\udcff"``) used to enter the producer's
topics of interest before anything checked it: every later Metadata request
failed to encode, so after the busiest leader was SIGKILLed the producer
never learnt the new leaders -- 23,250 of 60,000 idempotent acks=all records
(39%) failed with NOT_LEADER_OR_FOLLOWER after delivery_timeout_ms, against 0
without the bad name. The send of the bad name now fails at once
(InvalidTopicError) and the failover loses nothing.
"""

from __future__ import annotations

import collections
import threading
import time

import pytest

import kpax
from tests.faults.test_faults import _leaders, _new_topic, _read_all, cluster3

pytestmark = [pytest.mark.slow, pytest.mark.multibroker]

__all__ = ["cluster3"]  # (the fixture: it leaves every broker running after the test)

TOTAL = 60_000
PARTITIONS = 6


def test_a_bad_topic_name_first_then_a_leader_kill_loses_nothing(cluster3):
    topic = _new_topic(cluster3, PARTITIONS)
    failed: list[BaseException] = []
    acked = 0
    lock = threading.Lock()

    def on_done(meta: object, err: BaseException | None) -> None:
        nonlocal acked
        with lock:
            if err is not None:
                failed.append(err)
            else:
                acked += 1

    bad_error: BaseException | None = None
    killed = -1
    with kpax.Producer(
        cluster3.bootstrap,
        acks="all",
        linger_ms=5,
        request_timeout_ms=10_000,
        delivery_timeout_ms=30_000,  # (the unfixed code failed records at this time)
    ) as producer:
        assert producer.config["enable_idempotence"]
        t0 = time.monotonic()
        try:
            producer.send("bad\udcff", b"first, to a bad name")
        except Exception as exc:  # (checked below, after the figure)
            bad_error = exc
        refused_in = time.monotonic() - t0
        for i in range(TOTAL):
            producer.send(topic, b"%d" % i, key=b"key-%d" % (i % 1000), callback=on_done)
            if i == TOTAL // 4:
                leaders = _leaders(cluster3, topic)
                killed = collections.Counter(leaders.values()).most_common(1)[0][0]
                cluster3.kill_broker(killed)  # SIGKILL
        producer.flush(timeout=120)
    received = _read_all(cluster3.bootstrap, topic, PARTITIONS)
    seen = {int(v) for values in received.values() for v in values}
    lost = TOTAL - len(seen)
    first = repr(failed[0]) if failed else "-"
    print(
        f"\nbad name then leader kill: sent {TOTAL}, acknowledged {acked}, failed "
        f"{len(failed)} (first: {first}), lost {lost}; killed broker {killed}; "
        f"the bad name refused in {refused_in:.3f}s with {bad_error!r}"
    )
    assert isinstance(bad_error, kpax.InvalidTopicError), bad_error
    assert refused_in < 1.0
    assert (acked, len(failed), lost) == (TOTAL, 0, 0)
