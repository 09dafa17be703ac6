"""Bad values through the producer's public API (real broker): a wrong type or an
out-of-range value for the key, value, headers, partition or topic is refused at
``send`` / ``send_many`` with a clear error naming the field, and the producer
stays usable (the next good record is delivered). Timestamps are in
test_producer_hostile.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import kpax

BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"key": 5}, TypeError, "key must be bytes or None, not int"),
    ({"value": {"a": 1}}, TypeError, "value must be bytes or None, not dict"),
    ({"value": 3.5}, TypeError, "value must be bytes or None, not float"),
    ({"headers": "x"}, TypeError, "headers must be"),
    ({"headers": [(b"k", b"v")]}, TypeError, "header key must be str"),
    ({"headers": [("k", 5)]}, TypeError, "header 'k' value must be"),
    ({"partition": "0"}, TypeError, "partition must be an int, not str"),
    ({"partition": True}, TypeError, "partition must be an int, not bool"),
    ({"partition": 1.0}, TypeError, "partition must be an int, not float"),
    ({"partition": -1}, ValueError, "has no partition -1 (it has 2: 0..1)"),
    ({"partition": 2}, ValueError, "has no partition 2 (it has 2: 0..1)"),
]
IDS = [next(iter(kw)) + "=" + repr(next(iter(kw.values()))) for kw, _, _ in BAD]


def _send_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    return {"value": b"v", **kw}


@pytest.mark.parametrize(("kw", "exc", "text"), BAD, ids=IDS)
def test_sync_send_refuses_bad_values_and_keeps_working(kafka, topic, kw, exc, text):
    t = topic(partitions=2)
    with kpax.Producer(kafka.bootstrap) as p:
        with pytest.raises(exc) as info:
            p.send(t, **_send_kwargs(kw))
        assert text in str(info.value)
        md = p.send(t, b"good", partition=1).result(30)
        assert (md.topic, md.partition) == (t, 1)


@pytest.mark.parametrize(("kw", "exc", "text"), BAD, ids=IDS)
async def test_asyncio_send_refuses_bad_values_and_keeps_working(kafka, topic, kw, exc, text):
    t = topic(partitions=2)
    async with kpax.aio.Producer(kafka.bootstrap) as p:
        with pytest.raises(exc) as info:
            await p.send(t, **_send_kwargs(kw))
        assert text in str(info.value)
        md = await (await p.send(t, b"good", partition=1))
        assert (md.topic, md.partition) == (t, 1)


@pytest.mark.parametrize(
    ("partition", "exc", "text"),
    [("0", TypeError, "not str"), (True, TypeError, "not bool"), (5, ValueError, "(it has 2")],
)
def test_send_many_refuses_a_bad_partition_and_sends_nothing(kafka, topic, partition, exc, text):
    t = topic(partitions=2)
    with kpax.Producer(kafka.bootstrap) as p:
        with pytest.raises(exc, match=text.replace("(", r"\(")):
            p.send_many(t, [b"a", b"b"], partition=partition)
        p.send_many(t, [b"c", b"d"], partition=0)
        p.flush(30)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([kpax.TopicPartition(t, 0), kpax.TopicPartition(t, 1)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(0.5))
        assert got == [b"c", b"d"]


@pytest.mark.parametrize("name", ["", "no/such topic", "a" * 250, 5, None])
def test_a_bad_topic_fails_at_once_not_after_max_block_ms(kafka, name):
    with kpax.Producer(kafka.bootstrap, max_block_ms=20_000) as p:
        t0 = time.monotonic()
        with pytest.raises((TypeError, kpax.KafkaError)) as info:
            p.send(name, b"v")
        took = time.monotonic() - t0
        assert took < 5, f"{name!r} refused after {took:.1f}s"
        assert not isinstance(info.value, kpax.KafkaTimeoutError), info.value
        if isinstance(info.value, kpax.KafkaError):
            assert repr(name) in str(info.value) and not info.value.retriable
