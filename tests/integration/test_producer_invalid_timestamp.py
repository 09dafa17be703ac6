"""A batch the broker refuses for good without writing it (here INVALID_TIMESTAMP:
a record older than the topic's ``message.timestamp.before.max.ms``), sent by an
idempotent producer with later batches of the same partition in flight and
waiting: the bad batch fails naming the partition, the later records are written
once and in order, and the producer keeps its id and epoch (the failed batch's
sequence numbers are given back; no epoch bump). Records are read back with
confluent-kafka."""

from __future__ import annotations

import time

import pytest

import kpax
import kpax.aio
from kpax.errors import InvalidTimestampError
from tests.integration.producer_helpers import read_back

pytestmark = pytest.mark.integration

#: An hour: a record stamped in 2001 is refused.
TOPIC_CONFIG = {"message.timestamp.before.max.ms": "3600000"}
OLD = 1_000_000_000_000
BIG = b"v" * 100


def _check(kafka, t, bad, good, values):
    for f in bad:
        with pytest.raises(InvalidTimestampError, match=f"{t}-0"):
            f.result(30)
    offsets = [f.result(30).offset for f in good]
    assert offsets == list(range(len(good)))
    got = read_back(kafka.bootstrap, t, 1, len(good))
    assert [m.value() for m in got] == values  # once each, in order


def test_an_invalid_timestamp_batch_fails_alone_without_an_epoch_bump(kafka, topic):
    t = topic(config=TOPIC_CONFIG)
    # batches of one 100-byte record (or of two small ones): the bad batch and
    # the four after it go out at once, up to 5 in flight on the partition
    with kpax.Producer(kafka.bootstrap, batch_size=200, linger_ms=20) as p:
        first = p.send(t, b"first", partition=0)
        first.result(30)
        identity = p.aio.identity
        assert identity is not None
        before = (identity.producer_id, identity.producer_epoch)
        bad = [
            p.send(t, b"old", partition=0, timestamp=OLD),
            p.send(t, b"same batch", partition=0),
        ]
        good = [first] + [p.send(t, b"%d" % i + BIG, partition=0) for i in range(6)]
        p.flush(30)
        assert (identity.producer_id, identity.producer_epoch) == before
        assert identity.bumps == 0
        # the partition goes on
        good.append(p.send(t, b"after", partition=0))
        p.flush(30)
        assert (identity.producer_id, identity.producer_epoch) == before
    _check(kafka, t, bad, good, [b"first"] + [b"%d" % i + BIG for i in range(6)] + [b"after"])


async def test_aio_an_invalid_timestamp_batch_fails_alone_without_an_epoch_bump(kafka, topic):
    t = topic(config=TOPIC_CONFIG)
    async with kpax.aio.Producer(kafka.bootstrap, batch_size=200, linger_ms=20) as p:
        first = await p.send(t, b"first", partition=0)
        await first
        assert p.identity is not None
        before = (p.identity.producer_id, p.identity.producer_epoch)
        sent = [
            p.send(t, b"old", partition=0, timestamp=OLD),
            p.send(t, b"same batch", partition=0),
            *(p.send(t, b"%d" % i + BIG, partition=0) for i in range(6)),
        ]
        futs = [await s for s in sent]
        started = time.monotonic()
        await p.flush(30)
        assert time.monotonic() - started < 30
        assert (p.identity.producer_id, p.identity.producer_epoch) == before
        assert p.identity.bumps == 0
    _check(kafka, t, futs[:2], [first, *futs[2:]], [b"first"] + [b"%d" % i + BIG for i in range(6)])
