"""Helpers of the producer tests: read a topic back with confluent-kafka (an
independent client), so that what kpax wrote is checked by someone else's decoder."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def read_back(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 30.0
) -> list[Any]:
    """All records of ``topic`` (``expect`` of them) as confluent-kafka Messages,
    in partition then offset order."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kpax-test-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                if m.error() is None:
                    out.append(m)
        # a short extra poll catches duplicates beyond the expected count
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            out.extend(m for m in c.consume(10000, 0.2) if m.error() is None)
        out.sort(key=lambda m: (m.partition(), m.offset()))
        return out
    finally:
        c.close()
