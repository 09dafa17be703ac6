"""confluent-kafka's features, in kpax, against a real broker: consume(num,
timeout), list_topics, len(producer), purge, the offset store, partition EOF,
statistics and error callbacks, serializers given a SerializationContext; and
the log lines of a broker going away and coming back (one per change)."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.errors import IllegalStateError, PurgedError
from tests.wait import eventually

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    with kpax.Producer(bootstrap) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=i % partitions)
        p.flush(30)


def test_consume_and_list_topics(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    name = topic(2)
    _produce(kafka.bootstrap, name, 20, partitions=2)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(name, 0), TP(name, 1)])
        got = c.consume(15, timeout=30)
        assert len(got) == 15  # waits for that many, not just the first ready
        assert len(c.consume(100, timeout=0.5)) == 5  # all there is, after the timeout
        assert c.list_topics(name) == {name: [0, 1]}
        assert c.list_topics()[name] == [0, 1]
        with pytest.raises(ValueError):
            c.consume(0)
    with kpax.Producer(kafka.bootstrap) as p:
        topics = p.list_topics()
        assert topics[name] == [0, 1]
        assert "__consumer_offsets" not in topics


def test_len_and_purge(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    name = topic(1)
    with kpax.Producer(kafka.bootstrap, linger_ms=60_000, delivery_timeout_ms=200_000) as p:
        assert len(p) == 0 and p  # true even when empty
        p.send(name, b"first")
        p.flush(30)  # (the topic's metadata known; linger_ms holds what follows)
        futures = [p.send(name, b"%d" % i) for i in range(10)]
        assert len(p) == 10  # held by linger_ms
        assert p.purge() == 10
        assert len(p) == 0
        for f in futures:
            with pytest.raises(PurgedError, match="purged"):
                f.result(5)
    errors: list[BaseException] = []
    with kpax.Producer(kafka.bootstrap, linger_ms=5) as p:
        p.send(name, b"later", callback=lambda md, err: errors.append(err)).result(30)
        assert len(p) == 0
    assert errors == [None]


def test_offset_store_commits_only_what_was_stored(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    name = topic(1)
    _produce(kafka.bootstrap, name, 10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TP(name, 0)
    with kpax.Consumer(
        kafka.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        **{"enable.auto.offset.store": "false"},
    ) as c:
        c.subscribe([name])
        got: list[kpax.ConsumerRecord] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            got += c.poll(1.0)
        c.store_offsets(got[3])  # records 0..3 processed
        c.commit()  # commits the store, not the position (10)
        assert c.committed([tp])[tp].offset == 4
        c.store_offsets(offsets={tp: 6})
    # close's commit (auto-commit) sends the store too, not the position
    with kpax.Admin(kafka.bootstrap) as admin:
        assert admin.list_group_offsets(group)[tp].offset == 6
    with (
        kpax.Consumer(kafka.bootstrap, group_id=f"{group}x") as c,
        pytest.raises(IllegalStateError, match="enable_auto_offset_store=False"),
    ):
        c.store_offsets(offsets={tp: 1})


def test_partition_eof_and_stats_callbacks(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    name = topic(2)
    _produce(kafka.bootstrap, name, 10, partitions=2)
    eofs: list[tuple[TP, int]] = []
    stats: list[dict[str, float]] = []
    with kpax.Consumer(
        kafka.bootstrap,
        auto_offset_reset="earliest",
        on_partition_eof=lambda tp, off: eofs.append((tp, off)),
        **{"statistics.interval.ms": "50", "stats_cb": stats.append},
    ) as c:
        c.assign([TP(name, 0), TP(name, 1)])
        seen = 0
        deadline = time.monotonic() + 30
        while len(eofs) < 2 and time.monotonic() < deadline:
            seen += len(c.poll(0.2))
        assert seen == 10
        assert sorted(eofs) == [(TP(name, 0), 5), (TP(name, 1), 5)]
        c.poll(0.5)
        assert len(eofs) == 2  # once per end reached
        _produce(kafka.bootstrap, name, 2, partitions=2)
        eventually(lambda: c.poll(0.2) is not None and len(eofs) == 4, timeout=30)
        eventually(lambda: any(s.get("records-consumed-total") == 12 for s in stats))
    with pytest.raises(kpax.errors.ConfigError, match="on_partition_eof"):
        kpax.Consumer(kafka.bootstrap, enable_partition_eof=True)


def test_serializers_get_a_serialization_context(kafka, topic) -> None:  # type: ignore[no-untyped-def]
    """confluent-kafka's serializers are ``(obj, ctx)``: the topic, the field and
    the headers, so a Schema Registry serializer plugs in as it is."""
    name = topic(1)

    def value_ser(obj: str, ctx: kpax.producer.SerializationContext) -> bytes:
        return f"{ctx.topic}|{ctx.field}|{dict(ctx.headers or [])}|{obj}".encode()

    class KeySer:  # confluent's Serializer shape: __call__(self, obj, ctx=None)
        def __call__(self, obj: str, ctx: object = None) -> bytes:
            assert ctx is not None
            return obj.encode()

    with kpax.Producer(kafka.bootstrap, value_serializer=value_ser, key_serializer=KeySer()) as p:
        p.send(name, "v1", "k1", headers=[("h", b"x")]).result(30)
        p.send_many(name, ["v2", "v3"], ["k2", "k3"]).result(30)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(name, 0)])
        got = c.consume(3, timeout=30)
    assert [(r.key, r.value) for r in got] == [
        (b"k1", f"{name}|value|{{'h': b'x'}}|v1".encode()),
        (b"k2", f"{name}|value|{{}}|v2".encode()),
        (b"k3", f"{name}|value|{{}}|v3".encode()),
    ]


def test_a_broker_down_logs_once_per_change_and_calls_error_callback(  # type: ignore[no-untyped-def]
    kafka_factory, caplog
) -> None:
    """With the only broker down, the consumer says so once (not once a second),
    tells error_callback, and says when it works again."""
    cluster = kafka_factory()
    name = f"down-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(cluster.bootstrap) as admin:
        admin.create_topics([kpax.NewTopic(name, 1, 1)])
    _produce(cluster.bootstrap, name, 5)
    errors: list[BaseException] = []
    caplog.set_level(logging.DEBUG, logger="kpax")
    with kpax.Consumer(
        cluster.bootstrap,
        auto_offset_reset="earliest",
        error_callback=errors.append,
        reconnect_backoff_max_ms=200,
        retry_backoff_max_ms=200,
    ) as c:
        c.assign([TP(name, 0)])
        assert len(c.consume(5, timeout=30)) == 5
        node = next(iter(cluster.brokers))
        cluster.kill_broker(node)
        caplog.clear()

        polled: list[kpax.ConsumerRecord] = []

        def retried() -> bool:  # kpax tried again, and failed, many times meanwhile
            polled.extend(c.poll(0.2))
            failures = [r for r in caplog.records if r.levelno == logging.DEBUG]
            return sum("failed" in r.getMessage() for r in failures) >= 10

        eventually(retried, timeout=60)
        assert polled == []
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert 1 <= len(warnings) <= 4, [r.getMessage() for r in warnings]
        assert not any("background task failed" in r.getMessage() for r in warnings)
        eventually(lambda: len(errors) == 1, timeout=30)
        cluster.restart_broker(node)
        _produce(cluster.bootstrap, name, 1)
        assert len(c.consume(1, timeout=60)) == 1
        eventually(
            lambda: any(
                "works again" in r.getMessage() or "reachable again" in r.getMessage()
                for r in caplog.records
            )
        )
