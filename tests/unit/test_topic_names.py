"""Topic names by Kafka's rules (kpax.proto.topic_names), and a name that breaks
them kept out of the cluster's Metadata requests (plain bytes: the test plays
the broker on the connection's byte stream).

A name with a lone surrogate ("bad\\udcff", which ``os.fsdecode`` and a
surrogateescape'd ``sys.argv`` produce) used to enter the cluster's topics of
interest unchecked: from then on every Metadata request failed to encode, and
the client never learnt anything new about any topic (no new leader after a
failover, no new topic)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kpax.cluster.cluster import Cluster
from kpax.cluster.metadata import snapshot_from_response
from kpax.producer.options import resolve_producer_config
from kpax.proto.error_codes import InvalidTopicError
from kpax.proto.error_families import code_in
from kpax.proto.messages import MetadataRequest
from kpax.proto.topic_names import MAX_TOPIC_LENGTH, check_topic, topic_problem
from tests.unit.bytewire import ScriptedBroker, attach, metadata_response, serve

GOOD = ["a", "A-Z_0.9", "x" * MAX_TOPIC_LENGTH, "...", "__consumer_offsets", "-", "_"]
BAD = [
    ("", "empty"),
    (".", "reserved"),
    ("..", "reserved"),
    ("x" * (MAX_TOPIC_LENGTH + 1), "250 characters"),
    ("bad\udcff", "'\\udcff' at index 3"),
    ("no space", "' ' at index 2"),
    ("a/b", "'/' at index 1"),
    ("caf\u00e9", "'é' at index 3"),
    ("tab\t", "'\\t' at index 3"),
    ("x\x00", "'\\x00' at index 1"),
]


@pytest.mark.parametrize("name", GOOD)
def test_valid_names_pass_unchanged(name: str) -> None:
    assert check_topic(name) is name
    assert topic_problem(name) is None


@pytest.mark.parametrize(("name", "why"), BAD, ids=[repr(n)[:20] for n, _ in BAD])
def test_invalid_names_fail_naming_the_topic_and_why(name: str, why: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        check_topic(name)
    err = info.value
    text = str(err)
    assert repr(name) in text  # the repr: a surrogate or a control character shows
    assert why in text
    assert not err.retriable
    assert "retrying cannot help" in text


@pytest.mark.parametrize("name", [None, 5, b"orders", ["orders"]])
def test_a_name_that_is_not_a_str_is_a_type_error(name: Any) -> None:
    with pytest.raises(TypeError, match="must be a str"):
        check_topic(name)


# ------------------------------------------------------------ the cluster


async def test_a_bad_name_in_the_topics_of_interest_does_not_stop_the_others() -> None:
    asked: list[list[str] | None] = []

    def metadata(request: Any, version: int) -> Any:
        names = None if request.topics is None else [t.name for t in request.topics]
        asked.append(names)
        return metadata_response(*(names or []))

    cfg = resolve_producer_config(
        {"bootstrap_servers": "127.0.0.1:9", "retry_backoff_ms": 1, "retry_backoff_max_ms": 5}
    )
    cluster = Cluster.from_config(cfg)
    cluster._adopt(snapshot_from_response(metadata_response("old"), None, None))
    cluster._started = True
    conn, wire = attach(cluster.broker(1), cluster.options, {MetadataRequest.API_KEY: (0, 12)})
    broker = ScriptedBroker(wire, conn, {MetadataRequest.API_KEY: metadata})
    # as if it had got in some way the client's entry points no longer allow
    cluster._interest.update({"old", "bad\udcff", "new"})
    task = asyncio.ensure_future(cluster.refresh(["other"]))
    await serve([broker], task.done)
    await task  # refreshed: the bad name did not fail the request
    assert asked == [["new", "old", "other"]]
    snap = cluster.snapshot
    assert {"old", "new", "other"} <= set(snap.topics)
    assert code_in(snap.topic_errors["bad\udcff"], InvalidTopicError)
    assert "bad\udcff" not in cluster.interest
    # its waiters fail at once, naming it; the others are known
    with pytest.raises(InvalidTopicError, match=r"'bad\\udcff'"):
        await cluster.topic("bad\udcff", timeout=5)
    assert (await cluster.topic("new", timeout=5)).name == "new"
    # and the next refresh asks for the good ones only, again
    task = asyncio.ensure_future(cluster.refresh())
    await serve([broker], task.done)
    await task
    assert asked[-1] == ["new", "old", "other"]


async def test_a_bad_name_given_to_a_refresh_is_left_out_of_the_request() -> None:
    asked: list[list[str] | None] = []

    def metadata(request: Any, version: int) -> Any:
        names = [t.name for t in request.topics or []]
        asked.append(names)
        return metadata_response(*names)

    cfg = resolve_producer_config({"bootstrap_servers": "127.0.0.1:9"})
    cluster = Cluster.from_config(cfg)
    cluster._adopt(snapshot_from_response(metadata_response(), None, None))
    cluster._started = True
    conn, wire = attach(cluster.broker(1), cluster.options, {MetadataRequest.API_KEY: (0, 12)})
    broker = ScriptedBroker(wire, conn, {MetadataRequest.API_KEY: metadata})
    task = asyncio.ensure_future(cluster.refresh(["fine", "no good", "x" * 250]))
    await serve([broker], task.done)
    await task
    assert asked == [["fine"]]
    assert "fine" in cluster.snapshot.topics
