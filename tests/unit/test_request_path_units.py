"""The retry loop of the one request path (RequestPath.each) in milliseconds:
which keys go again, what is forgotten and refreshed, and that no call outlives
its deadline. Routing on a real broker: tests/integration/test_request_path.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, cast

import pytest

from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import Deadline, RequestPath, RetryPolicy
from kpax.proto.error_codes import (
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
)
from kpax.proto.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError


def _path(backoff_ms: int = 5, backoff_max_ms: int = 20) -> RequestPath:
    return RequestPath(cast(Cluster, None), RetryPolicy(backoff_ms, backoff_max_ms))


async def test_only_retriable_keys_go_again_and_each_keeps_its_outcome() -> None:
    rounds: list[list[str]] = []
    forgotten: list[tuple[str, str]] = []
    refreshed: list[list[str]] = []

    async def attempt(keys: list[str]) -> Mapping[str, Any]:
        rounds.append(list(keys))
        out: dict[str, Any] = {}
        for k in keys:
            if k == "denied":
                out[k] = TopicAuthorizationFailedError(k)
            elif k == "moved" and len(rounds) == 1:
                out[k] = NotLeaderOrFollowerError(k)
            else:
                out[k] = k.upper()
        return out

    async def on_retry(keys: list[str]) -> None:
        refreshed.append(list(keys))

    result = await _path().each(
        "test",
        ["ok", "moved", "denied", "ok"],
        attempt,
        timeout=5,
        forget=lambda k, e: forgotten.append((k, type(e).__name__)),
        on_retry=on_retry,
    )
    assert rounds == [["ok", "moved", "denied"], ["moved"]]  # duplicates asked once
    assert result.succeeded == {"ok": "OK", "moved": "MOVED"}
    assert isinstance(result.errors["denied"], TopicAuthorizationFailedError)
    assert forgotten == [("moved", "NotLeaderOrFollowerError")]
    assert refreshed == [["moved"]]


async def test_a_raised_error_is_every_key_outcome() -> None:
    calls = 0

    async def attempt(keys: list[str]) -> Mapping[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KafkaConnectionError("connection lost")
        return dict.fromkeys(keys, 1)

    result = await _path().each("test", ["a", "b"], attempt, timeout=5)
    assert result.ok and calls == 2


async def test_retries_stop_at_the_deadline_with_the_last_error() -> None:
    async def attempt(keys: list[str]) -> Mapping[str, Any]:
        return {k: NotCoordinatorError(f"{k} moved") for k in keys}

    started = time.monotonic()
    result = await _path(20, 50).each("test", ["g"], attempt, timeout=0.3)
    took = time.monotonic() - started
    assert 0.15 < took < 1.0
    assert isinstance(result.errors["g"], NotCoordinatorError)


async def test_an_attempt_never_runs_past_the_deadline() -> None:
    async def attempt(keys: list[str]) -> Mapping[str, Any]:
        await asyncio.sleep(10)
        return {}

    started = time.monotonic()
    result = await _path().each("slow thing", ["k"], attempt, timeout=0.2)
    assert time.monotonic() - started < 1.0
    err = result.errors["k"]
    assert isinstance(err, KafkaTimeoutError) and "slow thing" in err.message


async def test_a_custom_rule_decides_what_is_retried() -> None:
    seen = 0

    async def attempt(keys: list[str]) -> Mapping[str, Any]:
        nonlocal seen
        seen += 1
        return {k: KafkaError("retriable but not for this caller", retriable=True) for k in keys}

    result = await _path().each(
        "test", ["k"], attempt, timeout=5, retry=lambda e, d: "moved" in e.message
    )
    assert seen == 1 and not result.ok


@pytest.mark.parametrize("delay", [0.0, 0.05])
async def test_deadline_sleep(delay: float) -> None:
    d = Deadline(0.3)
    assert await d.sleep(delay)
    assert not await d.sleep(5)
    assert d.left() > 0 and not d.expired
