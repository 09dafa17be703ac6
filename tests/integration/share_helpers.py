"""What the share-group tests share: topics, share groups with their configs set,
records produced, and records read until a condition holds (never for a fixed time)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable

import kpax
from kpax.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kpax.errors import KafkaError

#: Lock duration the share-group tests ask for (the local test brokers allow 1 s;
#: a broker with the default floor of 15 s gets 15 s).
SHORT_LOCK_MS = 2000
DEFAULT_FLOOR_MS = 15000


def new_topic(admin: kpax.Admin, partitions: int = 1, prefix: str = "share") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin.create_topics([kpax.NewTopic(name, partitions, 1)]).raise_for_errors()
    return name


def set_group_configs(admin: kpax.Admin, group: str, **configs: str) -> None:
    res = ConfigResource(ConfigResourceType.GROUP, group)
    admin.incremental_alter_configs(
        {res: [AlterConfigOp(k.replace("_", "."), v) for k, v in configs.items()]}
    ).raise_for_errors()


def share_group(
    admin: kpax.Admin,
    *,
    lock_ms: int | None = None,
    delivery_limit: int | None = None,
) -> tuple[str, int]:
    """A new share group id reading from the earliest offset, with a short record
    lock (or the broker's floor) when ``lock_ms`` is given: (group, lock in ms)."""
    group = f"sg-{uuid.uuid4().hex[:10]}"
    set_group_configs(admin, group, share_auto_offset_reset="earliest")
    lock = 30000
    if lock_ms is not None:
        try:
            set_group_configs(admin, group, share_record_lock_duration_ms=str(lock_ms))
            lock = lock_ms
        except KafkaError:  # below this broker's floor
            set_group_configs(admin, group, share_record_lock_duration_ms=str(DEFAULT_FLOOR_MS))
            lock = DEFAULT_FLOOR_MS
    if delivery_limit is not None:
        set_group_configs(admin, group, share_delivery_count_limit=str(delivery_limit))
    return group, lock


def produce(
    bootstrap: str, topic: str, values: Iterable[bytes], partition: int | None = None
) -> None:
    # Java's batch size: records that arrive as a stream, in batches of ~150 (a
    # share fetch acquires whole batches; kpax's 1 MB default would put every
    # record of a quick burst in one batch, for one member)
    with kpax.Producer(bootstrap, linger_ms=5, batch_size=16384) as p:
        for v in values:
            p.send(topic, v, partition=partition)
        p.flush()


def read_until(
    consumer: kpax.ShareConsumer,
    done: Callable[[list[kpax.ShareConsumerRecord]], bool],
    timeout: float = 60.0,
    on_records: Callable[[list[kpax.ShareConsumerRecord]], None] | None = None,
) -> list[kpax.ShareConsumerRecord]:
    """Poll until ``done(everything read)`` holds; AssertionError after ``timeout``."""
    got: list[kpax.ShareConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached in {timeout}s; read {len(got)} records")
        recs = consumer.poll(0.5)
        if on_records is not None and recs:
            on_records(recs)
        got.extend(recs)
    return got
