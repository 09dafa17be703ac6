"""Components built from the validated client config: ``Cluster.from_config``
(one construction for the three clients) and the consumer's typed, frozen
``ConsumerSettings``."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from kpax.cluster.cluster import Cluster
from kpax.config import resolve
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.options import CONSUMER_OPTIONS, ConsumerSettings
from kpax.producer.options import resolve_producer_config


def test_cluster_from_config_takes_the_client_options() -> None:
    config = resolve(
        "consumer",
        CONSUMER_OPTIONS,
        {
            "bootstrap_servers": "h1:9092, h2:9093",
            "client_id": "me",
            "metadata_max_age_ms": 1234,
            "retry_backoff_ms": 7,
            "retry_backoff_max_ms": 70,
            "request_timeout_ms": 4321,
        },
    )
    cluster = Cluster.from_config(config)
    assert cluster.bootstrap == ["h1:9092", "h2:9093"]
    assert cluster.options.client_id == "me"
    assert cluster.options.request_timeout_ms == 4321
    assert cluster.metadata_max_age == 1.234
    assert (cluster.retry_backoff_ms, cluster.retry_backoff_max_ms) == (7, 70)
    # the consumer's default (Java's): no auto-creation
    assert cluster.allow_auto_topic_creation is False
    on = resolve("consumer", CONSUMER_OPTIONS, {**config, "allow_auto_create_topics": True})
    assert Cluster.from_config(on).allow_auto_topic_creation is True


def test_cluster_from_config_per_client_auto_creation() -> None:
    producer = resolve_producer_config({"bootstrap_servers": "h:1"})
    assert Cluster.from_config(producer).allow_auto_topic_creation is True
    # the admin's: never, whatever the config says
    cluster = Cluster.from_config(producer, allow_auto_topic_creation=False)
    assert cluster.allow_auto_topic_creation is False


def test_consumer_settings_are_the_validated_config_typed_and_frozen() -> None:
    config = resolve(
        "consumer",
        CONSUMER_OPTIONS,
        {
            "bootstrap_servers": "h:1",
            "group_id": "g",
            "isolation_level": "read_committed",
            "partition_assignment_strategy": "range, roundrobin",
            "fetch_max_bytes": 80 << 20,
            "request_timeout_ms": 2500,
            "default_api_timeout_ms": 7000,
        },
    )
    s = ConsumerSettings.from_config(config)
    assert s.group_id == "g" and s.group_instance_id is None
    assert s.read_committed and s.isolation == 1
    assert s.partition_assignment_strategy == ("range", "roundrobin")
    assert s.max_decompressed_batch_bytes == 160 << 20  # the cap in force
    assert (s.request_timeout, s.api_timeout) == (2.5, 7.0)
    assert s.retry_backoff == (config["retry_backoff_ms"], config["retry_backoff_max_ms"])
    for f in fields(ConsumerSettings):
        if f.name != "max_decompressed_batch_bytes":  # (the cap in force, above)
            assert getattr(s, f.name) == config[f.name], f.name
    with pytest.raises(FrozenInstanceError):
        s.group_id = "other"  # type: ignore[misc]


def test_async_consumer_builds_its_settings_once() -> None:
    consumer = AsyncConsumer("h:1", group_id="g", max_poll_records=7)
    assert consumer.settings.max_poll_records == 7 and consumer.config["max_poll_records"] == 7
    assert consumer.settings.group_id == "g"


def test_producer_settings_are_the_validated_config_typed_and_frozen() -> None:
    from kpax.producer.options import ProducerSettings

    config = resolve_producer_config(
        {
            "bootstrap_servers": "h:9092",
            "acks": "all",
            "linger_ms": 7,
            "compression_type": None,
            "transactional_id": "tx",
            "max_in_flight_requests_per_connection": 3,
        }
    )
    settings = ProducerSettings.from_config(config)
    assert settings.acks == -1 and settings.linger_ms == 7
    assert settings.compression_type == "none"  # resolved, as the config says
    assert settings.transactional_id == "tx" and settings.enable_idempotence is True
    assert settings.max_in_flight_requests_per_connection == 3
    with pytest.raises(FrozenInstanceError):
        settings.acks = 1  # type: ignore[misc]


def test_the_producer_wires_its_parts_at_construction() -> None:
    from kpax.producer.client import AsyncProducer

    p = AsyncProducer("127.0.0.1:9", transactional_id="tx")
    acc, sender = p.accumulator, p.sender
    assert acc.seal == sender.sealer.seal  # one sealer for both
    assert sender.txn is p.txn and p.txn is not None
    assert p._topics.on_metadata in p.cluster._listeners  # every metadata update: counts follow
    acc.wake()  # before start: nothing to wake, no error
    assert sender.acks == p.settings.acks == -1
