"""Components built from the validated client config: ``Cluster.from_config``
(one construction for the three clients)."""

from __future__ import annotations

from kpax.cluster.cluster import Cluster
from kpax.config import resolve
from kpax.consumer.options import CONSUMER_OPTIONS
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
