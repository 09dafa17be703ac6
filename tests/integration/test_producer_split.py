"""A batch the broker refuses as too large (MESSAGE_TOO_LARGE: the topic's
``max.message.bytes`` is below the producer's ``batch_size``) is split and
resent in order; a single record too large fails alone with a clear error and
the producer goes on. Real broker; records read back with confluent-kafka."""

from __future__ import annotations

import os

import pytest

import kpax
from kpax.errors import MessageTooLargeError
from kpax.testing.pytest_plugin import create_topic
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration

LIMIT = 2000  # the topic's max.message.bytes: a few records per batch at most


def _value(i: int) -> bytes:
    return b"v-%05d-" % i + os.urandom(100).hex().encode()  # ~210 bytes, barely compressible


@pytest.mark.parametrize(
    ("idempotent", "compression"),
    [(True, "none"), (False, "none"), (True, "gzip")],
    ids=["idempotent", "not-idempotent", "idempotent-gzip"],
)
def test_too_large_batches_are_split_and_delivered_once_in_order(kafka, idempotent, compression):
    topic = create_topic(kafka, 1, config={"max.message.bytes": str(LIMIT)})
    n = 400
    opts: dict[str, object] = {
        "batch_size": 64 * 1024,
        "linger_ms": 50,
        "enable_idempotence": idempotent,
        "compression_type": compression,
    }
    if not idempotent:
        # without idempotence only one request per connection keeps a partition
        # in order across a failed batch (as with any retry)
        opts["max_in_flight_requests_per_connection"] = 1
    sent = [_value(i) for i in range(n)]
    with kpax.Producer(kafka.bootstrap, **opts) as p:
        futs = [p.send(topic, v, key=b"k") for v in sent]
        p.flush(60)
        metas = [f.result(0) for f in futs]
        splits = p.aio.sender.split_batches
    assert splits > 0, "no batch was split: the test did not exceed the topic's limit"
    assert [m.offset for m in metas] == list(range(n)), "futures' offsets are not 0..n-1"
    got = read_back(kafka.bootstrap, topic, 1, n)
    assert [m.value() for m in got] == sent, "records lost, duplicated or out of order"
    assert [m.offset() for m in got] == list(range(n))


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_a_single_record_too_large_fails_alone_with_a_clear_error(kafka, idempotent):
    topic = create_topic(kafka, 1, config={"max.message.bytes": str(LIMIT)})
    opts: dict[str, object] = {
        "batch_size": 64 * 1024,
        "linger_ms": 200,
        "enable_idempotence": idempotent,
    }
    if not idempotent:
        opts["max_in_flight_requests_per_connection"] = 1
    small = [b"s-%03d" % i for i in range(40)]
    big = b"B" * (3 * LIMIT)
    with kpax.Producer(kafka.bootstrap, **opts) as p:
        # one batch: 20 small records, the big one, 20 more small ones
        before = [p.send(topic, v) for v in small[:20]]
        big_fut = p.send(topic, big)
        after = [p.send(topic, v) for v in small[20:]]
        p.flush(60)
        err = big_fut.exception(0)
        assert isinstance(err, MessageTooLargeError), repr(err)
        text = str(err)
        assert f"{topic}-0" in text, text
        assert str(len(big)) in text, text  # the record's size
        for limit in ("max.message.bytes", "message.max.bytes", "max_request_size"):
            assert limit in text, text
        assert not err.retriable
        metas = [f.result(0) for f in before + after]
        assert [m.offset for m in metas] == list(range(40))
        # the producer goes on
        assert p.send(topic, b"later").result(30).offset == 40
    got = read_back(kafka.bootstrap, topic, 1, 41)
    assert [m.value() for m in got] == [*small, b"later"]


def test_send_many_counts_only_the_record_too_large_as_failed(kafka):
    topic = create_topic(kafka, 1, config={"max.message.bytes": str(LIMIT)})
    values = [b"s-%03d" % i for i in range(20)] + [b"B" * (3 * LIMIT)]
    values += [b"s-%03d" % i for i in range(20, 40)]
    with kpax.Producer(kafka.bootstrap, batch_size=64 * 1024, linger_ms=200) as p:
        fut = p.send_many(topic, values)  # one batch: split until the big record is alone
        with pytest.raises(MessageTooLargeError) as info:
            fut.result(60)
        assert fut.failed_count == 1
        assert "1 of 41 record(s)" in str(info.value), str(info.value)
        assert "max.message.bytes" in str(info.value), str(info.value)
    got = read_back(kafka.bootstrap, topic, 1, 40)
    assert [m.value() for m in got] == values[:20] + values[21:]
