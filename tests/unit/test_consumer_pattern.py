"""``subscribe(pattern=...)`` without a broker: the argument checks (both faces),
the match (``re.fullmatch``, internal topics never), and -- on the connection's
byte stream -- what goes to the broker: the classic member asks the metadata of
every topic and joins with the matched names; the KIP-848 member sends the regex
(ConsumerGroupHeartbeat v1+) and fails clearly on a broker without it. What a
real broker does is tests/integration/test_consumer_pattern.py's job."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

import kpax
from kpax.cluster.metadata import TopicInfo
from kpax.consumer.assignors.protocol import decode_subscription
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.pattern import compile_pattern, matching_topics, subscribe_args
from kpax.proto.errors import IllegalStateError, UnsupportedApiError
from kpax.proto.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    JoinGroupRequest,
    MetadataResponse,
)
from tests.unit.bytewire import Handler, ScriptedBroker, group_consumer, serve

MR = MetadataResponse
GROUP = "billing"
TOPICS = ["orders-eu", "orders-us", "payments", "old-orders-eu", "__consumer_offsets"]

# ------------------------------------------------------------ arguments


def test_topics_and_pattern_are_exclusive_and_one_is_needed() -> None:
    with pytest.raises(TypeError, match="not both"):
        subscribe_args(["a"], "a.*")
    with pytest.raises(TypeError, match="not both"):
        subscribe_args(re.compile("a.*"), "b.*")
    with pytest.raises(TypeError, match="needs topics"):
        subscribe_args(None, None)


def test_a_pattern_is_a_str_or_a_compiled_str_regex() -> None:
    assert subscribe_args(None, "orders-.*") == (None, "orders-.*")
    compiled = re.compile("orders-.*")
    assert subscribe_args(compiled, None) == (None, compiled)  # Java's subscribe(Pattern)
    assert subscribe_args(["b", "a", "b"], None) == (["a", "b"], None)
    assert subscribe_args("a", None) == (["a"], None)  # a str as topics is one name
    with pytest.raises(TypeError, match="not 5"):
        subscribe_args(None, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        subscribe_args(None, re.compile(b"x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        subscribe_args(None, "")
    with pytest.raises(ValueError, match="not a valid regex"):
        compile_pattern("orders-(")


def _infos(names: list[str]) -> dict[str, TopicInfo]:
    return {n: TopicInfo(n, None, n.startswith("__"), {}) for n in names}


def test_the_match_is_a_full_match_and_never_an_internal_topic() -> None:
    infos = _infos(TOPICS)
    infos["hidden"] = TopicInfo("hidden", None, True, {})  # flagged internal by the broker
    assert matching_topics(re.compile("orders-.*"), infos) == ["orders-eu", "orders-us"]
    assert matching_topics(re.compile(".*"), infos) == [
        "old-orders-eu",
        "orders-eu",
        "orders-us",
        "payments",
    ]
    assert matching_topics(re.compile("orders"), infos) == []
    # exclude_internal_topics=False (Java's option): internal topics may match
    assert matching_topics(re.compile("__.*|hid.*"), infos, exclude_internal=False) == [
        "__consumer_offsets",
        "hidden",
    ]


async def test_the_asyncio_face_checks_the_arguments_first() -> None:
    c = AsyncConsumer("127.0.0.1:9", group_id=GROUP)  # not started: the arguments fail first
    with pytest.raises(TypeError, match="not both"):
        await c.subscribe(["a"], pattern="a.*")
    with pytest.raises(TypeError, match="needs topics"):
        await c.subscribe()


def test_the_sync_face_checks_the_arguments_on_the_callers_thread() -> None:
    face = object.__new__(kpax.Consumer)  # no I/O thread: nothing may be handed to it
    with pytest.raises(TypeError, match="not both"):
        face.subscribe(["a"], pattern="a.*")
    with pytest.raises(TypeError, match="needs topics"):
        face.subscribe()
    with pytest.raises(TypeError, match="regex"):
        face.subscribe(pattern=["a"])  # type: ignore[arg-type]


# ------------------------------------------------------------ on the wire


async def _consumer(
    handlers: dict[int, Handler], versions: dict[int, tuple[int, int]], **config: Any
) -> tuple[AsyncConsumer, ScriptedBroker, list[Any]]:
    seen: list[Any] = []
    c, broker = await group_consumer(
        GROUP, TOPICS, versions, handlers, on_metadata=seen.append, **config
    )
    return c, broker, seen


async def test_classic_asks_every_topic_and_joins_with_the_full_matches_only() -> None:
    joins: list[Any] = []

    def join(request: Any, version: int) -> None:
        joins.append(request)  # left unanswered: the join itself is not under test

    c, broker, metadata = await _consumer(
        {JoinGroupRequest.API_KEY: join}, {JoinGroupRequest.API_KEY: (0, 9)}
    )
    try:
        await c.subscribe(pattern="orders-.*")
        assert c.subscription() == {"orders-eu", "orders-us"}
        await serve([broker], lambda: bool(joins))
        assert metadata and all(m.topics is None for m in metadata)  # every topic
        assert c.cluster.all_topics
        sub = decode_subscription(joins[0].protocols[0].metadata)
        assert sub.topics == ["orders-eu", "orders-us"]
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            await c.subscribe(["payments"])  # names after a pattern: unsubscribe first
        with pytest.raises(ValueError, match="not a valid regex"):
            await c.subscribe(pattern="orders-(")
        await c.unsubscribe()
        assert c.subscription() == set() and not c.cluster.all_topics
    finally:
        await c.close(0)


def _heartbeat_answer(seen: list[tuple[Any, int]]) -> Handler:
    def answer(request: Any, version: int) -> Any:
        seen.append((request, version))
        return ConsumerGroupHeartbeatResponse(
            member_id=request.member_id, member_epoch=1, heartbeat_interval_ms=5000
        )

    return answer


async def test_kip848_sends_the_regex_instead_of_topic_names() -> None:
    seen: list[tuple[Any, int]] = []
    c, broker, _ = await _consumer(
        {ConsumerGroupHeartbeatRequest.API_KEY: _heartbeat_answer(seen)},
        {ConsumerGroupHeartbeatRequest.API_KEY: (0, 1)},
        group_protocol="consumer",
    )
    try:
        await c.subscribe(pattern=r"orders-\p{L}+")  # RE2/J, not Python syntax: not compiled here
        await serve([broker], lambda: bool(seen))
        request, version = seen[0]
        assert version == 1
        assert request.subscribed_topic_regex == r"orders-\p{L}+"
        assert request.subscribed_topic_names is None
    finally:
        await c.close(0)


async def test_kip848_pattern_on_a_broker_without_the_regex_field_fails_clearly() -> None:
    seen: list[tuple[Any, int]] = []
    c, broker, _ = await _consumer(
        {ConsumerGroupHeartbeatRequest.API_KEY: _heartbeat_answer(seen)},
        {ConsumerGroupHeartbeatRequest.API_KEY: (0, 0)},
        group_protocol="consumer",
    )
    try:
        await c.subscribe(pattern="orders-.*")
        failed: list[BaseException] = []

        def polled() -> bool:
            try:
                c._poll_tick()
            except UnsupportedApiError as exc:
                failed.append(exc)
            return bool(failed)

        await serve([broker], polled)
        message = str(failed[0])
        assert GROUP in message and "v1" in message and "retrying cannot help" in message
        assert not seen  # no heartbeat went out without its regex
    finally:
        await c.close(0)
        await asyncio.sleep(0)
