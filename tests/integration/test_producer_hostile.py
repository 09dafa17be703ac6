"""The producer under careless and hostile input: bad timestamps are refused at
``send`` naming the field, and no failure inside the sender ever leaves a
record's future pending or stops the producer (it keeps working, or fails
closed with the reason). Real broker; records read back with confluent-kafka."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

import kpax
from kpax.errors import ClientClosedError, KafkaError
from kpax.producer import sealer as sealer_module
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration

BAD_TIMESTAMPS = [
    (time.time() * 1000, TypeError, "not float"),
    ("1700000000000", TypeError, "not str"),
    (True, TypeError, "not bool"),
    (2**63, ValueError, "out of range"),
    (-5, ValueError, "out of range"),
]


@pytest.mark.parametrize(("ts", "exc", "words"), BAD_TIMESTAMPS)
def test_bad_timestamp_is_refused_at_send_and_the_producer_keeps_working(
    kafka, topic, ts, exc, words
):
    t = topic()
    with kpax.Producer(kafka.bootstrap, linger_ms=0) as p:
        with pytest.raises(exc, match=f"timestamp.*{words}"):
            p.send(t, b"bad", timestamp=ts)
        with pytest.raises(exc, match=f"timestamp.*{words}"):
            p.send_many(t, [b"bad1", b"bad2"], timestamp=ts)
        meta = p.send(t, b"good", timestamp=1_700_000_000_000).result(30)
        assert p.flush(10) is None
    assert meta.offset == 0
    (rec,) = read_back(kafka.bootstrap, t, 1, 1)
    assert rec.value() == b"good"


def test_bad_timestamp_refused_by_the_asyncio_producer(kafka, topic):
    t = topic()

    async def main() -> int:
        async with kpax.aio.Producer(kafka.bootstrap, linger_ms=0) as p:
            with pytest.raises(TypeError, match=r"timestamp.*int"):
                await p.send(t, b"bad", timestamp=time.time() * 1000)
            with pytest.raises(ValueError, match=r"timestamp.*out of range"):
                await p.send_many(t, [b"x"], timestamp=2**64)
            fut = await p.send(t, b"good")
            return (await fut).offset

    assert asyncio.run(asyncio.wait_for(main(), 60)) == 0


def test_integer_like_timestamps_and_minus_one_are_accepted(kafka, topic):
    class Millis:
        def __index__(self) -> int:
            return 1_700_000_000_123

    t = topic()
    with kpax.Producer(kafka.bootstrap) as p:
        a = p.send(t, b"a", timestamp=Millis())
        b = p.send(t, b"b", timestamp=-1)
        assert (a.result(30).offset, b.result(30).offset) == (0, 1)
    got = read_back(kafka.bootstrap, t, 1, 2)
    assert [m.timestamp()[1] for m in got] == [1_700_000_000_123, -1]


@pytest.mark.kafka4
def test_a_timestamp_the_broker_refuses_is_an_error_not_a_hang(kafka, topic):
    # In range for the client; the broker judges it. Kafka 4 refuses records more
    # than log.message.timestamp.after.max.ms (1 h) ahead; 3.x accepted any.
    t = topic()
    with kpax.Producer(kafka.bootstrap) as p:
        with pytest.raises(KafkaError, match=f"INVALID_TIMESTAMP.*{t}-0"):
            p.send(t, b"c", timestamp=2**63 - 1).result(30)
        assert p.send(t, b"d").result(30).offset == 0  # the producer goes on


def test_a_batch_that_cannot_be_encoded_fails_its_records_only(kafka, topic, monkeypatch, caplog):
    """A bug or an input that slips past ``send``'s checks and makes encoding
    fail: that batch's futures fail with the reason (logged), every other
    record is delivered, and flush/close return."""
    real = sealer_module.encode_columns

    def encode(timestamps, keys, values, headers, **kw):
        if b"poison" in values:
            raise OverflowError("simulated encoder failure")
        return real(timestamps, keys, values, headers, **kw)

    monkeypatch.setattr(sealer_module, "encode_columns", encode)
    t = topic(partitions=2)
    caplog.set_level(logging.ERROR, logger="kpax.producer")
    with kpax.Producer(kafka.bootstrap, linger_ms=20) as p:
        good0 = [p.send(t, b"ok-%d" % i, partition=0) for i in range(5)]
        bad = p.send(t, b"poison", partition=1)
        with pytest.raises(KafkaError, match=rf"encoding 1 record\(s\) for {t}-1 failed.*Overflow"):
            bad.result(30)
        assert [f.result(30).offset for f in good0] == list(range(5))
        # the partition that failed keeps working, its sequence numbers without a gap
        after = [p.send(t, b"after-%d" % i, partition=1) for i in range(3)]
        assert [f.result(30).offset for f in after] == [0, 1, 2]
        t0 = time.monotonic()
        p.flush(10)
    assert time.monotonic() - t0 < 10
    assert "cannot encode a batch" in caplog.text
    got = read_back(kafka.bootstrap, t, 2, 8)
    assert sorted(m.value() for m in got) == sorted(
        [b"ok-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(3)]
    )


def test_an_unexpected_sender_error_fails_pending_records_and_the_producer_recovers(
    kafka, topic, monkeypatch, caplog
):
    t = topic()
    caplog.set_level(logging.ERROR, logger="kpax.producer")
    with kpax.Producer(kafka.bootstrap, linger_ms=0) as p:
        p.send(t, b"warm").result(30)
        sender = p.aio.sender
        real = sender._send_ready
        calls = {"n": 0}

        def broken(now):
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("simulated sender bug")
            return real(now)

        monkeypatch.setattr(sender, "_send_ready", broken)
        fut = p.send(t, b"lost")
        with pytest.raises(KafkaError, match=r"sender failed.*simulated sender bug"):
            fut.result(30)
        assert p.send(t, b"later").result(30).offset >= 1
    assert "unexpected error" in caplog.text


def test_a_dead_sender_fails_closed_instead_of_hanging(kafka, topic, monkeypatch):
    """Should the sender task itself ever end (here: a BaseException its round
    does not catch), pending records fail with the reason, later sends raise,
    and close returns."""

    class Crash(BaseException):
        pass

    t = topic()
    p = kpax.Producer(kafka.bootstrap, linger_ms=0)
    try:
        p.send(t, b"warm").result(30)
        sender = p.aio.sender

        def crash() -> None:
            raise Crash("simulated crash")

        monkeypatch.setattr(p.aio.accumulator, "linger", 60.0)
        monkeypatch.setattr(sender, "_round", crash)
        fut = p.send(t, b"pending")  # wakes the sender, whose next round crashes
        with pytest.raises(ClientClosedError, match=r"sender stopped unexpectedly.*simulated"):
            fut.result(10)
        with pytest.raises(ClientClosedError):
            p.send(t, b"after")
    finally:
        t0 = time.monotonic()
        p.close(5)
        assert time.monotonic() - t0 < 5


def test_close_timeout_says_which_records_have_an_unknown_outcome(kafka_factory):
    cluster = kafka_factory(1)
    t = "unknown-outcome"
    p = kpax.Producer(cluster.bootstrap, linger_ms=0, request_timeout_ms=30_000)
    try:
        p.send(t, b"warm").result(30)
        cluster.pause_broker(1)  # requests reach the socket, no answer comes
        sent = p.send(t, b"in flight")
        deadline = time.monotonic() + 10
        while p.aio.sender.in_flight == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        p.close(0.5)
        with pytest.raises(ClientClosedError, match="outcome is unknown") as info:
            sent.result(5)
        assert info.value.outcome_unknown
    finally:
        cluster.resume_broker(1)
        p.close(5)
