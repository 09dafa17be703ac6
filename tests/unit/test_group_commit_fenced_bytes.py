"""A classic group member's commits refused by the coordinator, driven with plain
bytes: the test plays the group coordinator (JoinGroup, SyncGroup, Heartbeat,
OffsetCommit, OffsetFetch) on the connection's byte stream. A commit fenced for
the member's current generation (ILLEGAL_GENERATION) loses its partitions as
Java does (``on_partitions_lost``, no commit, rejoin, positions from the
committed offsets); REBALANCE_IN_PROGRESS, or a stale-generation answer that
arrives while the member joins, is a RebalanceInProgressCommitError ("retry
after poll") that keeps the partitions and does not start another rebalance;
partitions kept across a rebalance are committed again in the new generation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kpax.consumer.assignors.base import MemberSubscription
from kpax.consumer.assignors.protocol import decode_subscription
from kpax.consumer.classic_state import ClassicState
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.errors import CommitFailedError, RebalanceInProgressCommitError
from kpax.proto.error_codes import IllegalGenerationError, RebalanceInProgressError
from kpax.proto.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kpax.structs import OffsetAndMetadata, TopicPartition
from tests.unit.bytewire import ScriptedBroker, attach, decode_request, group_consumer, serve

TOPIC = "orders"
GROUP = "billing"
TP0 = TopicPartition(TOPIC, 0)
VERSIONS = {
    JoinGroupRequest.API_KEY: (0, 9),
    SyncGroupRequest.API_KEY: (0, 5),
    HeartbeatRequest.API_KEY: (0, 4),
    LeaveGroupRequest.API_KEY: (0, 5),
    OffsetCommitRequest.API_KEY: (0, 8),
    OffsetFetchRequest.API_KEY: (0, 7),
}


class Coordinator:
    """The group coordinator of a group of one member (which leads it)."""

    def __init__(self, committed: int) -> None:
        self.generation = 0
        self.member = "member-1"
        self.committed = {(TOPIC, 0): committed}
        #: Answers for the next OffsetCommits / Heartbeats (then: no error).
        self.commit_codes: list[int] = []
        self.heartbeat_codes: list[int] = []
        #: Each JoinGroup's subscription; each OffsetCommit's offsets.
        self.joins: list[MemberSubscription] = []
        self.commits: list[dict[tuple[str, int], int]] = []

    def handlers(self) -> dict[int, Any]:
        return {
            JoinGroupRequest.API_KEY: self.join,
            SyncGroupRequest.API_KEY: self.sync,
            HeartbeatRequest.API_KEY: self.heartbeat,
            LeaveGroupRequest.API_KEY: lambda request, version: LeaveGroupResponse(),
            OffsetCommitRequest.API_KEY: self.commit,
            OffsetFetchRequest.API_KEY: self.fetch,
        }

    def join(self, request: Any, version: int) -> Any:
        self.generation += 1
        protocol = request.protocols[0]
        self.joins.append(decode_subscription(protocol.metadata))
        R = JoinGroupResponse
        return R(
            generation_id=self.generation,
            protocol_type="consumer",
            protocol_name=protocol.name,
            leader=self.member,
            member_id=self.member,
            members=[R.JoinGroupResponseMember(member_id=self.member, metadata=protocol.metadata)],
        )

    def sync(self, request: Any, version: int) -> Any:
        return SyncGroupResponse(
            protocol_type="consumer",
            protocol_name=request.protocol_name,
            assignment=request.assignments[0].assignment,
        )

    def heartbeat(self, request: Any, version: int) -> Any:
        code = self.heartbeat_codes.pop(0) if self.heartbeat_codes else 0
        return HeartbeatResponse(error_code=code)

    def commit(self, request: Any, version: int) -> Any:
        code = self.commit_codes.pop(0) if self.commit_codes else 0
        offsets = {
            (t.name, p.partition_index): p.committed_offset
            for t in request.topics
            for p in t.partitions
        }
        self.commits.append(offsets)
        if not code:
            self.committed.update(offsets)
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

    def fetch(self, request: Any, version: int) -> Any:
        R = OffsetFetchResponse
        return R(
            topics=[
                R.OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        R.OffsetFetchResponsePartition(
                            partition_index=p,
                            committed_offset=self.committed.get((t.name, p), -1),
                        )
                        for p in t.partition_indexes
                    ],
                )
                for t in request.topics
            ]
        )


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(tps)))

    def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(tps)))

    def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        self.events.append(("lost", set(tps)))


async def _member(
    coordinator: Coordinator,
) -> tuple[AsyncConsumer, ScriptedBroker, Listener]:
    """A cooperative-sticky member of GROUP, joined (generation 1), owning TP0 at
    its committed offset."""
    c, broker = await group_consumer(
        GROUP,
        [TOPIC],
        VERSIONS,
        coordinator.handlers(),
        partition_assignment_strategy="cooperative-sticky",
        session_timeout_ms=6000,
        heartbeat_interval_ms=20,
    )
    # the fetch connection never answers: the positions are all these tests need
    attach(c.cluster.fetch_broker(1), c.cluster.options, {})
    listener = Listener()
    await c.subscribe([TOPIC], listener=listener)
    assert await _serve(broker, c.wait_for_assignment(3.0)) == {TP0}
    await _serve(broker, c.position(TP0))
    return c, broker, listener


async def _serve(broker: ScriptedBroker, call: Any) -> Any:
    task = asyncio.ensure_future(call)
    try:
        await serve([broker], task.done)
    except AssertionError:
        task.cancel()
        raise
    return task.result()


async def _stable(c: AsyncConsumer, broker: ScriptedBroker, generation: int) -> None:
    group = c.group
    assert group is not None
    await serve([broker], lambda: group.stable.is_set() and group.generation == generation)


def _written(broker: ScriptedBroker, key: int) -> bool:
    """A request of API ``key`` written and not yet answered."""
    return any(decode_request(f)[0] == key for f in broker.wire.written[broker.seen :])


async def test_a_commit_fenced_for_the_current_generation_loses_the_partitions() -> None:
    coordinator = Coordinator(committed=3)
    c, broker, listener = await _member(coordinator)
    try:
        assert await c.position(TP0) == 3
        coordinator.commit_codes = [IllegalGenerationError.code]
        with pytest.raises(CommitFailedError, match="lost"):
            await _serve(broker, c.commit({TP0: OffsetAndMetadata(7)}))
        # lost, not revoked: another member may own it; then the member rejoins and
        # gets it back, at the committed offset (the refused commit of 7 never applied)
        await _stable(c, broker, 2)
        assert listener.events == [("assigned", {TP0}), ("lost", {TP0}), ("assigned", {TP0})]
        rejoin = coordinator.joins[1]
        assert rejoin.owned_partitions == [] and rejoin.generation_id == -1
        assert coordinator.commits == [{(TOPIC, 0): 7}]  # nothing committed on losing it
        assert await _serve(broker, c.position(TP0)) == 3
    finally:
        await c.close(0)


async def test_a_commit_refused_for_a_rebalance_in_progress_says_retry_after_poll() -> None:
    coordinator = Coordinator(committed=3)
    c, broker, listener = await _member(coordinator)
    try:
        coordinator.commit_codes = [RebalanceInProgressError.code]
        with pytest.raises(RebalanceInProgressCommitError) as info:
            await _serve(broker, c.commit({TP0: OffsetAndMetadata(7)}))
        assert not isinstance(info.value, CommitFailedError)
        message = str(info.value)
        assert "retry after poll()" in message and repr(GROUP) in message, message
        assert f"{TOPIC}-0" in message and "keeps its partitions" in message
        # the member rejoins keeping its partition and generation (cooperative)
        await _stable(c, broker, 2)
        assert coordinator.joins[1].owned_partitions == [TP0]
        assert coordinator.joins[1].generation_id == 1
        assert [e for e, _ in listener.events] == ["assigned", "assigned"]  # nothing lost
        # and the retried commit goes through
        await _serve(broker, c.commit({TP0: OffsetAndMetadata(7)}))
        assert coordinator.committed[(TOPIC, 0)] == 7
    finally:
        await c.close(0)


async def test_a_stale_generation_answer_during_a_join_keeps_the_member_in_the_group() -> None:
    coordinator = Coordinator(committed=3)
    c, broker, listener = await _member(coordinator)
    group = c.group
    assert group is not None
    try:
        # the coordinator starts a rebalance; hold the member's JoinGroup unanswered
        coordinator.heartbeat_codes = [RebalanceInProgressError.code]
        for _ in range(3000):
            if _written(broker, JoinGroupRequest.API_KEY):
                break
            broker.pump()
            await asyncio.sleep(0.001)
        # a commit made meanwhile queues behind the JoinGroup on the connection: the
        # broker answers it after the join, in the new generation -> ILLEGAL_GENERATION
        coordinator.commit_codes = [IllegalGenerationError.code]
        commit = asyncio.ensure_future(c.commit({TP0: OffsetAndMetadata(7)}))
        for _ in range(100):
            if _written(broker, OffsetCommitRequest.API_KEY):
                break
            await asyncio.sleep(0.001)
        with pytest.raises(RebalanceInProgressCommitError, match="retry after poll"):
            await _serve(broker, commit)
        await _stable(c, broker, 2)
        assert [e for e, _ in listener.events] == ["assigned", "assigned"]  # never lost
        assert group.fsm.state is ClassicState.STABLE  # and no further rebalance of its own
        assert await c.position(TP0) == 3
    finally:
        await c.close(0)


async def test_partitions_kept_across_a_rebalance_are_committed_in_the_new_generation() -> None:
    coordinator = Coordinator(committed=3)
    c, broker, _ = await _member(coordinator)
    try:
        await _serve(broker, c.commit())  # position 3 = the committed offset: nothing to send
        assert coordinator.commits == []
        coordinator.heartbeat_codes = [RebalanceInProgressError.code]
        await _stable(c, broker, 2)
        assert c.assignment() == {TP0}
        # kept: this member's position is committed in generation 2 even though it
        # equals the offset it last knew as committed
        await _serve(broker, c.commit())
        assert coordinator.commits == [{(TOPIC, 0): 3}]
        await _serve(broker, c.commit())  # and then, unchanged, not again
        assert coordinator.commits == [{(TOPIC, 0): 3}]
    finally:
        await c.close(0)
