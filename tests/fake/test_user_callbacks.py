"""The application's callbacks (error_callback, stats_callback) may be plain or
``async def`` (as confluent-kafka's asyncio example writes them): a coroutine
callback runs; it was dropped with only a "never awaited" warning."""

from __future__ import annotations

import asyncio
import logging

import pytest

import kpax
from kpax.testing.fake import FakeKafka
from kpax.user_callbacks import call_user

log = logging.getLogger("test.callbacks")


def test_plain_and_async_callbacks_run_and_their_errors_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    got: list[object] = []

    async def async_cb(arg: object) -> None:
        await asyncio.sleep(0)
        got.append(("async", arg))

    async def failing(arg: object) -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        call_user(got.append, 1, "plain", log)
        call_user(async_cb, 2, "async", log)
        call_user(failing, 3, "stats_callback", log)
        call_user(lambda a: 1 / 0, 4, "error_callback", log)
        for _ in range(5):
            await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, "test.callbacks"):
        asyncio.run(main())
    assert got == [1, ("async", 2)]
    failed = [r.getMessage() for r in caplog.records]
    assert sorted(failed) == ["error_callback failed", "stats_callback failed"]


def test_an_async_stats_callback_of_an_asyncio_producer_runs(fake_kafka: FakeKafka) -> None:
    seen: list[dict[str, float]] = []
    called = asyncio.Event()

    async def stats(metrics: dict[str, float]) -> None:
        seen.append(metrics)
        called.set()

    async def main() -> None:
        async with kpax.aio.Producer(
            fake_kafka.bootstrap, stats_callback=stats, statistics_interval_ms=20
        ):
            await called.wait()

    asyncio.run(asyncio.wait_for(main(), 10))
    assert "record-send-total" in seen[0]
