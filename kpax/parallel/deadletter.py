"""Dead letters: a record the handler gave up on, sent to a topic with why.

Role: :func:`dead_letter_headers` says what a dead letter carries besides the
record's own key, value and headers (pure); :class:`DeadLetters` owns the
producer that sends them and waits for each to be written (the record counts
as done only then).

Headers (UTF-8 text, like Kafka Connect's ``__connect.errors.*``):
``kpax.dlt.topic``, ``kpax.dlt.partition``, ``kpax.dlt.offset`` (where the
record was read), ``kpax.dlt.group`` (the consumer group),
``kpax.dlt.attempts`` (handler calls made), ``kpax.dlt.error.type`` (the
exception's qualified class name) and ``kpax.dlt.error.message`` (its text, at
most :data:`MAX_MESSAGE` characters).

Imports: kpax.broker.options, kpax.producer.client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpax.broker.options import COMMON_OPTIONS
from kpax.producer.client import AsyncProducer

__all__ = ["HEADER_PREFIX", "MAX_MESSAGE", "DeadLetters", "dead_letter_headers"]

HEADER_PREFIX = "kpax.dlt."
#: The longest error message a dead letter carries (characters).
MAX_MESSAGE = 4000


def _error_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def dead_letter_headers(
    record: Any, exc: BaseException, attempts: int, group: str | None
) -> list[tuple[str, bytes | None]]:
    """The record's own headers and the ``kpax.dlt.*`` ones."""
    text = str(exc)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    out = list(record.headers or ())
    extra = [
        ("topic", record.topic),
        ("partition", str(record.partition)),
        ("offset", str(record.offset)),
        ("group", group or ""),
        ("attempts", str(attempts)),
        ("error.type", _error_type(exc)),
        ("error.message", text),
    ]
    out += [(HEADER_PREFIX + name, value.encode("utf-8")) for name, value in extra]
    return out


class DeadLetters:
    """Sends given-up records to ``topic`` (``"{topic}"`` is the source topic)
    with a producer made from the consumer's connection options and ``overrides``."""

    def __init__(
        self,
        topic: str,
        consumer_config: Mapping[str, Any],
        overrides: Mapping[str, Any],
        group: str | None,
    ) -> None:
        self.topic = topic
        self.group = group
        config = {k: v for k, v in consumer_config.items() if k in COMMON_OPTIONS}
        config.update(overrides)
        self.producer = AsyncProducer(**config)
        self.sent = 0

    async def start(self) -> None:
        await self.producer.start()

    async def send(self, record: Any, exc: BaseException, attempts: int) -> None:
        """Write ``record`` to the dead-letter topic and wait for the broker's ack."""
        topic = self.topic.format(topic=record.topic)
        headers = dead_letter_headers(record, exc, attempts, self.group)
        await self.producer.send_and_wait(topic, record.value, record.key, headers=headers)
        self.sent += 1

    async def close(self, timeout: float) -> None:
        await self.producer.close(timeout)
