"""The consumer group's commit and committed-offset paths driven with plain
bytes, in milliseconds: the test answers FindCoordinator, OffsetCommit and
OffsetFetch on the connection's byte stream, so a coordinator that moves, a
commit that is retried and a final error are checked request by request. What
a real broker does is tests/integration/test_consumer_group*.py's job."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kpax.consumer.client import AsyncConsumer
from kpax.proto.error_codes import GroupAuthorizationFailedError, NotCoordinatorError
from kpax.proto.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kpax.structs import OffsetAndMetadata, TopicPartition
from tests.unit.bytewire import Handler, ScriptedBroker, group_consumer, serve

TOPIC = "orders"
GROUP = "billing"


async def _consumer(handlers: dict[int, Handler]) -> tuple[AsyncConsumer, ScriptedBroker]:
    versions = {OffsetCommitRequest.API_KEY: (0, 8), OffsetFetchRequest.API_KEY: (0, 7)}
    return await group_consumer(GROUP, [TOPIC], versions, handlers)


async def _serve(broker: ScriptedBroker, call: Any) -> Any:
    task = asyncio.ensure_future(call)
    try:
        await serve([broker], task.done)
    except AssertionError:
        task.cancel()
        raise
    return task.result()


def _commit_answer(codes: list[int]) -> Handler:
    answers = iter(codes)

    def answer(request: Any, version: int) -> Any:
        code = next(answers)
        R = OffsetCommitResponse
        return R(
            topics=[
                R.OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        R.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=code
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    return answer


async def test_a_commit_to_a_coordinator_that_moved_finds_it_again_and_succeeds() -> None:
    committed: dict[tuple[str, int], int] = {}

    def fetch(request: Any, version: int) -> Any:
        R = OffsetFetchResponse
        return R(
            topics=[
                R.OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        R.OffsetFetchResponsePartition(
                            partition_index=p, committed_offset=committed.get((t.name, p), -1)
                        )
                        for p in t.partition_indexes
                    ],
                )
                for t in request.topics
            ]
        )

    commit = _commit_answer([NotCoordinatorError.code, 0])

    def record(request: Any, version: int) -> Any:
        for t in request.topics:
            for p in t.partitions:
                committed[(t.name, p.partition_index)] = p.committed_offset
        return commit(request, version)

    c, broker = await _consumer(
        {OffsetCommitRequest.API_KEY: record, OffsetFetchRequest.API_KEY: fetch}
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        await _serve(broker, c.commit({tp: OffsetAndMetadata(42)}))
        # NOT_COORDINATOR: the coordinator was forgotten and looked up again
        log = [name for name in broker.log if name in ("FindCoordinator", "OffsetCommit")]
        assert log[:4] == [
            "FindCoordinator",
            "OffsetCommit",
            "FindCoordinator",
            "OffsetCommit",
        ]
        got = await _serve(broker, c.committed([tp]))
        assert got[tp] is not None and got[tp].offset == 42
    finally:
        await c.close(0)


async def test_a_final_commit_error_is_raised_at_once_naming_the_group() -> None:
    c, broker = await _consumer(
        {OffsetCommitRequest.API_KEY: _commit_answer([GroupAuthorizationFailedError.code])}
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        with pytest.raises(GroupAuthorizationFailedError, match=GROUP):
            await _serve(broker, c.commit({tp: OffsetAndMetadata(1)}))
        assert broker.log.count("OffsetCommit") == 1  # not retried
    finally:
        await c.close(0)
