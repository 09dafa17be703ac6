"""Admin calls on a topic just created: create_partitions, alter_group_offsets,
describe_topics and delete_topics right after create_topics succeed (UNKNOWN_TOPIC_OR_PARTITION
from a broker that does not know the topic yet is retried through the request
path), and on a topic that does not exist they report it after the short
grace (kpax.admin.base.NEW_TOPIC_GRACE), not at once and not after the whole
default_api_timeout_ms. Real broker."""

from __future__ import annotations

import time
import uuid

import pytest

import kpax
from kpax.admin.base import NEW_TOPIC_GRACE
from kpax.errors import UnknownTopicOrPartitionError
from kpax.structs import NewTopic

pytestmark = pytest.mark.integration


def test_calls_right_after_create_topics_succeed(kafka) -> None:
    with kpax.Admin(kafka.bootstrap) as admin:
        for i in range(20):
            name = f"retry-{uuid.uuid4().hex[:8]}-{i}"
            created = admin.create_topics([NewTopic(name, num_partitions=1)])
            assert created.ok, created.errors
            grown = admin.create_partitions({name: 2})
            assert grown.ok, (i, grown.errors)
            altered = admin.alter_group_offsets(f"g-{name}", {kpax.TopicPartition(name, 0): 0})
            assert altered.ok, (i, altered.errors)
            described = admin.describe_topics([name])
            assert described.ok, (i, described.errors)
            assert described[name].name == name
            deleted = admin.delete_topics([name])
            assert deleted.ok, (i, deleted.errors)


def test_a_missing_topic_is_reported_after_the_grace(kafka) -> None:
    name = f"missing-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(kafka.bootstrap, default_api_timeout_ms=60_000) as admin:
        calls = {
            "create partitions": lambda: admin.create_partitions({name: 2}),
            "describe": lambda: admin.describe_topics([name]),
            "delete": lambda: admin.delete_topics([name]),
        }
        for what, call in calls.items():
            started = time.monotonic()
            result = call()
            elapsed = time.monotonic() - started
            assert isinstance(result.errors.get(name), UnknownTopicOrPartitionError), (
                what,
                result.errors,
            )
            assert name in str(result.errors[name])
            # retried for the grace (it was final at once), not for the api timeout
            assert NEW_TOPIC_GRACE * 0.9 <= elapsed < NEW_TOPIC_GRACE + 10, (what, elapsed)
