"""``delivery_timeout_ms`` is kept to the letter: against a broker that stops
answering (paused with SIGSTOP: connections stay open, nothing answers) a
record's future fails within the delivery timeout plus a small margin, not a
request timeout later. Uses its own broker (kafka_factory)."""

from __future__ import annotations

import time

import pytest

import kpax
from kpax.testing.pytest_plugin import create_topic

pytestmark = pytest.mark.integration

DELIVERY_MS = 5000
MARGIN = 0.5  # seconds past the delivery timeout a failure may take (a busy machine)


@pytest.fixture(scope="module")
def own_broker(kafka_factory):
    return kafka_factory(1)


@pytest.mark.parametrize("request_timeout_ms", [3000, 4995], ids=["request-3s", "request-5s"])
def test_a_silent_broker_fails_records_at_the_delivery_timeout(own_broker, request_timeout_ms):
    topic = create_topic(own_broker, 1)
    node = next(iter(own_broker.brokers))
    with kpax.Producer(
        own_broker.bootstrap,
        delivery_timeout_ms=DELIVERY_MS,
        request_timeout_ms=request_timeout_ms,
        linger_ms=0,
    ) as p:
        p.send(topic, b"before").result(30)
        own_broker.pause_broker(node)
        try:
            t0 = time.monotonic()
            futs = [p.send(topic, b"during-%d" % i) for i in range(3)]
            elapsed: list[float] = []
            for f in futs:
                with pytest.raises(kpax.KafkaTimeoutError) as info:
                    f.result(30)
                elapsed.append(time.monotonic() - t0)
                assert "delivery_timeout_ms=5000" in str(info.value), str(info.value)
                assert f"{topic}-0" in str(info.value), str(info.value)
                assert info.value.retriable and "retriable)" not in str(info.value)
        finally:
            own_broker.resume_broker(node)
        took = max(elapsed)
        assert min(elapsed) >= DELIVERY_MS / 1000 and took <= DELIVERY_MS / 1000 + MARGIN, (
            f"records failed {', '.join(f'{e:.3f}' for e in elapsed)} s after send "
            f"(delivery_timeout_ms={DELIVERY_MS}, request_timeout_ms={request_timeout_ms})"
        )
        # the producer goes on once the broker answers again
        assert p.send(topic, b"after").result(60).offset >= 1
