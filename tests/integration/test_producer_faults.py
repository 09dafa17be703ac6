"""Producer delivery under failures: the broker killed and restarted mid-run, the
connection cut mid-run. Every record must arrive exactly once and, per
partition, in send order (idempotence on, the default). Uses its own broker
(kafka_factory) so the session broker stays up."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import kpax
from kpax.testing.pytest_plugin import create_topic
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration


def _check_exactly_once_in_order(got, partitions: int, n: int) -> None:
    values = [m.value() for m in got]
    assert len(values) == n, f"{len(values)} records read back, {n} sent"
    assert len(set(values)) == n, "duplicates"
    for p in range(partitions):
        seq = [int(m.value().split(b"-")[1]) for m in got if m.partition() == p]
        assert seq == sorted(seq), f"partition {p} out of order"


async def _cut_when_busy(p: kpax.Producer, cut: list[object], within: float = 10.0) -> bool:
    """On the producer's loop: drop its connection while produce requests are in
    flight on it (written, not answered: the sender's own counter also counts
    requests whose answer has arrived but not been handled yet), a connection
    not in ``cut`` (each cut is a new connection's), then add it there. False if
    none was in flight ``within`` seconds (nothing cut)."""
    broker = p.aio.cluster.broker(1)

    def busy() -> object | None:
        conn = broker.open_connection
        if conn is None or conn.in_flight == 0 or any(c is conn for c in cut):
            return None
        return conn

    give_up = time.monotonic() + within
    while (conn := busy()) is None:  # (polling the state of another task)
        if time.monotonic() > give_up:
            return False
        await asyncio.sleep(0.0005)
    cut.append(conn)
    broker.mark_failed()
    return True


@pytest.fixture(scope="module")
def own_broker(kafka_factory):
    return kafka_factory(1)


def test_broker_killed_and_restarted_mid_run(own_broker):
    t = create_topic(own_broker, 3)
    n = 30_000
    errors: list[BaseException] = []
    with kpax.Producer(
        own_broker.bootstrap, linger_ms=2, batch_size=4096, request_timeout_ms=5000
    ) as p:
        assert p.config["enable_idempotence"] is True
        futs = []
        restarted = threading.Event()

        def chaos() -> None:
            try:
                time.sleep(0.3)
                own_broker.kill_broker(1)
                time.sleep(0.5)
                own_broker.restart_broker(1)
            except BaseException as exc:
                errors.append(exc)
            finally:
                restarted.set()

        th = threading.Thread(target=chaos)
        th.start()
        for i in range(n):
            futs.append(p.send(t, b"r-%d" % i, key=b"%d" % (i % 97)))
            if i % 1000 == 0:
                time.sleep(0.02)  # spread the run over the restart
        th.join()
        p.flush(120)
        metas = [f.result(0) for f in futs]
        retried = p.aio.sender.retried_batches
    assert not errors
    assert retried > 0, "the restart did not hit any request"
    # offsets per partition are dense and follow send order
    for part in range(3):
        offs = [m.offset for m in metas if m.partition == part and m.offset >= 0]
        assert offs == sorted(offs)
    _check_exactly_once_in_order(read_back(own_broker.bootstrap, t, 3, n), 3, n)


def test_connection_cut_mid_run(own_broker):
    """Five connections, each cut while its produce requests are in flight: every
    record lands once, in send order."""
    t = create_topic(own_broker, 2)
    n = 20_000
    with kpax.Producer(own_broker.bootstrap, linger_ms=1, batch_size=2048) as p:
        futs = []
        cut: list[object] = []
        cuts = 0
        for phase in range(5):
            # The cut watches for this phase's requests, from before they are sent.
            cutting = p._thread.submit(_cut_when_busy(p, cut))
            for i in range(phase * 4000, (phase + 1) * 4000):
                futs.append(p.send(t, b"c-%d" % i, partition=i % 2))
            cuts += cutting.result(15)
        p.flush(120)
        [f.result(0) for f in futs]
        reconnects = p.aio.cluster.broker(1).connects
        retried = p.aio.sender.retried_batches
    assert cuts >= 3 and reconnects > cuts
    assert retried > 0
    _check_exactly_once_in_order(read_back(own_broker.bootstrap, t, 2, n), 2, n)


def test_sequence_reset_after_out_of_order_bumps_the_epoch(own_broker):
    # Force a sequence gap the broker rejects: skip a sequence number on one partition.
    t = create_topic(own_broker, 1)
    with kpax.Producer(own_broker.bootstrap, linger_ms=0) as p:
        p.send(t, b"s-0").result(30)
        pid0, epoch0 = p.aio.identity.producer_id, p.aio.identity.producer_epoch
        pq = p.aio.accumulator.queues[t][0]
        with p.aio.accumulator.lock:  # 5 numbers given to no batch: the next batch
            pq.sequence.assign(5)  # arrives with a gap (OUT_OF_ORDER_SEQUENCE_NUMBER)
        futs = [p.send(t, b"s-%d" % i) for i in range(1, 200)]
        p.flush(60)
        assert [f.result(0).offset for f in futs] == list(range(1, 200))
        assert (p.aio.identity.producer_id, p.aio.identity.producer_epoch) != (pid0, epoch0)
        assert p.aio.identity.bumps == 1
    _check_exactly_once_in_order(read_back(own_broker.bootstrap, t, 1, 200), 1, 200)
