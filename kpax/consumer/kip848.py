"""The KIP-848 consumer group protocol (``group_protocol="consumer"``).

Role: :class:`ConsumerGroup` keeps this member in a "consumer" group with
ConsumerGroupHeartbeat: the broker computes the assignment
(``group_remote_assignor``, default the broker's ``uniform``), the member
reconciles: partitions no longer in the target are revoked (listener,
auto-commit) and acknowledged in the next heartbeat, new ones are added
(their positions come from the committed offsets). There is no
JoinGroup/SyncGroup barrier: other members keep consuming during a change.

Member ids are generated here (v1 of the API requires it); leaving is a
heartbeat with epoch -1 (-2 for a static member, which keeps its
partitions for ``session_timeout_ms``). FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID
lose the partitions (listener ``on_partitions_lost``) and rejoin at epoch 0.
Commits carry the member epoch. The member's state, id and epoch are held by
its machine (:mod:`kpax.consumer.kip848_state`, Java's ``MemberState``);
:class:`ConsumerGroup` is its driver.

A pattern subscription sends the regex (SubscribedTopicRegex, v1+; the
broker matches with RE2/J) instead of topic names; the broker re-resolves it
as topics come and go, and the assignment follows. The broker's regex also
matches internal topics (Kafka 4.3 assigns ``__consumer_offsets`` to ``.*``):
with ``exclude_internal_topics`` (the default) their partitions are left out
of what this member reads and reports owning. A broker without v1 is an
UnsupportedApiError.

Imports: kpax.cluster, kpax.broker.broker, kpax.proto, kpax.structs, kpax.tasks, kpax.consumer.*.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from typing import Any

from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP, Cluster
from kpax.cluster.request_path import ToCoordinator
from kpax.consumer.group import GroupBase, Membership
from kpax.consumer.kip848_state import Kip848Machine, Kip848State
from kpax.consumer.options import ConsumerSettings
from kpax.consumer.pattern import Pattern, is_internal, regex_text
from kpax.proto.error_codes import RebalanceInProgressError
from kpax.proto.error_families import (
    CONSUMER_MEMBER_FENCED_ERRORS,
    COORDINATOR_ERRORS,
    code_in,
)
from kpax.proto.errors import KafkaError, UnsupportedApiError, error_for_code
from kpax.proto.messages import ConsumerGroupHeartbeatRequest
from kpax.structs import TopicPartition
from kpax.tasks import cancel_and_wait

log = logging.getLogger("kpax.consumer.group")

__all__ = ["ConsumerGroup"]

_LEAVE = -1
#: The first ConsumerGroupHeartbeat version with SubscribedTopicRegex.
_REGEX_VERSION = 1
_LEAVE_STATIC = -2


def _new_member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerGroup(GroupBase):
    """The driver of a :class:`~kpax.consumer.kip848_state.Kip848Machine`
    (which holds the member's state, member id and epoch): it sends the
    heartbeats, reconciles with the listener and fires the machine's events."""

    def __init__(self, cluster: Cluster, settings: ConsumerSettings, member: Membership) -> None:
        super().__init__(cluster, settings, member)
        #: The member's state and identity (the only code that changes them).
        self.fsm = Kip848Machine(f"group {self.group_id!r}", _new_member_id())
        self.interval = settings.heartbeat_interval_ms / 1000
        self._task: asyncio.Task[Any] | None = None
        self.reconciliations = 0

    # ------------------------------------------------------------ the machine

    @property
    def member_id(self) -> str:
        return self.fsm.member_id

    @property
    def epoch(self) -> int:
        return self.fsm.epoch

    def in_group(self) -> bool:
        return self.fsm.in_group

    def commit_identity(self) -> tuple[int, str]:
        return self.fsm.identity()

    def poll_expired(self) -> bool:
        return self.fsm.state is Kip848State.STALE

    def _poll_resumed(self) -> None:
        if self.fsm.state is Kip848State.STALE:
            self.fsm.polled()
            self._moved()
            self.rejoin_soon()

    def _moved(self) -> None:
        """After each event: mirror the machine into ``stable``."""
        if self.fsm.stable:
            self.stable.set()
        else:
            self.stable.clear()

    def processed_wait(self) -> float:
        # The heartbeat loop waits behind a reconciliation's revocation, and the
        # broker's session timeout (its own setting) is longer than its interval.
        return min(super().processed_wait(), self.interval)

    def subscribe(self, topics: list[str]) -> None:
        self.pattern = None
        self.subscription = sorted(set(topics))
        self._rejoin()

    def subscribe_pattern(self, pattern: Pattern) -> None:
        """Send ``pattern`` (RE2/J syntax) as SubscribedTopicRegex: the broker
        resolves it and assigns the matching topics' partitions; ``subscription``
        becomes the topics of this member's assignment."""
        self.pattern = pattern
        self.subscription = []
        self._rejoin()

    def _rejoin(self) -> None:
        self.fsm.subscribe()
        self._wake.set()
        if self._task is None:
            self.start()
            self._task = self.spawn(self._run())

    def on_generation_error(self, code: int, sent_with: tuple[int, str] | None = None) -> bool:
        """A commit found the member epoch stale or fenced: the next heartbeat
        (sent now) learns where the member stands."""
        self._wake.set()
        return not code_in(code, RebalanceInProgressError)

    async def _run(self) -> None:
        failures = 0
        while not self._closed:
            if self.fsm.state is Kip848State.STALE:
                await self._wake.wait()
                self._wake.clear()
                continue
            if self.fsm.in_group and self.poll_overdue():
                log.warning(
                    "group %s: no poll for more than max_poll_interval_ms: leaving the group; "
                    "the member rejoins at its next poll",
                    self.group_id,
                )
                self.fsm.poll_timeout()
                self._moved()
                await self._leave_heartbeat()
                lost = self.member._assigned_partitions()
                if lost:
                    await self.revoke(lost, lost=True)
                continue
            try:
                await self._heartbeat()
                failures = 0
            except KafkaError as exc:
                if not exc.retriable:
                    self.fsm.fail(exc)
                    self._moved()
                    raise
                failures += 1
                log.info("group %s: heartbeat failed (%s), retrying", self.group_id, exc)
                await asyncio.sleep(self.requests.delay(failures))
                continue
            if self.fsm.acknowledging:
                continue  # acknowledge the reconciled assignment right away
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    def _owned(self) -> list[Any]:
        owned = self.member._assigned_partitions()
        by_id: dict[Any, list[int]] = {}
        for tp in owned:
            info = self.cluster.snapshot.topics.get(tp.topic)
            if info is None or info.topic_id is None:
                continue
            by_id.setdefault(info.topic_id, []).append(tp.partition)
        return [
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tid, partitions=sorted(ps))
            for tid, ps in by_id.items()
        ]

    async def _heartbeat(self) -> None:
        full = self.fsm.full_heartbeat
        ack = self.fsm.acknowledging
        regex = regex_text(self.pattern) if self.pattern is not None else None
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.fsm.epoch,
            instance_id=self.instance_id,
            rack_id=self.settings.client_rack if full else None,
            rebalance_timeout_ms=self.settings.max_poll_interval_ms if full else -1,
            subscribed_topic_names=list(self.subscription) if full and regex is None else None,
            subscribed_topic_regex=regex if full else None,
            server_assignor=self.settings.group_remote_assignor if full else None,
            topic_partitions=self._owned() if (full or ack) else None,
        )
        if ack:
            self.fsm.ack_sent()

        async def send(broker: Broker) -> Any:
            if regex is not None and full:
                await self._check_regex_support(broker)
            resp = await broker.request(req, timeout=self._timeout)
            if code_in(resp.error_code, COORDINATOR_ERRORS):  # forgotten, found again
                raise error_for_code(resp.error_code)(
                    f"ConsumerGroupHeartbeat for group {self.group_id!r} to {broker.describe()}"
                )
            return resp

        # The coordinator route: a moved coordinator is found again within the
        # request timeout; past it the loop above paces the next try.
        resp = await self.requests.call(
            f"ConsumerGroupHeartbeat for group {self.group_id!r}",
            ToCoordinator(self.group_id, GROUP),
            send,
            timeout=self._timeout,
        )
        code = resp.error_code
        if code_in(code, CONSUMER_MEMBER_FENCED_ERRORS):
            log.info("group %s: member fenced (%s), rejoining", self.group_id, code)
            self.fsm.fenced()
            self._moved()
            lost = self.member._assigned_partitions()
            if lost:
                await self.revoke(lost, lost=True)
            self.fsm.released()
            return
        if code:
            err = error_for_code(code)
            raise err(
                f"ConsumerGroupHeartbeat for group {self.group_id!r} as member {self.member_id!r}",
                error_message=resp.error_message,
            )
        self.fsm.answered(resp.member_id, resp.member_epoch, assignment=resp.assignment is not None)
        self._moved()
        if resp.heartbeat_interval_ms > 0:
            self.interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is not None:
            await self._reconcile(resp.assignment.topic_partitions)

    async def _reconcile(self, topic_partitions: list[Any]) -> None:
        target: set[TopicPartition] = set()
        unknown = [
            t.topic_id
            for t in topic_partitions
            if self.cluster.snapshot.topic_name(t.topic_id) is None
        ]
        if unknown:
            if self.pattern is not None:
                await self.cluster.refresh(all_topics=True)
            else:
                await self.cluster.refresh(self.subscription)
        for t in topic_partitions:
            name = self.cluster.snapshot.topic_name(t.topic_id)
            if name is None:
                log.warning("group %s: assigned unknown topic id %s", self.group_id, t.topic_id)
                continue
            if self._skip_internal and is_internal(name, self.cluster.snapshot.topics.get(name)):
                continue  # the broker's regex matched an internal topic: not read here
            target.update(TopicPartition(name, p) for p in t.partitions)
        if self.pattern is not None:  # what the broker matched, as far as this member sees
            self.subscription = sorted({tp.topic for tp in target})
        owned = self.member._assigned_partitions()
        revoked = owned - target
        added = target - owned
        self.reconciliations += 1
        log.info(
            "group %s: member %s epoch %d: %d partitions (+%d -%d)",
            self.group_id,
            self.member_id,
            self.epoch,
            len(target),
            len(added),
            len(revoked),
        )
        if revoked:
            await self.revoke(revoked)
        if added or not owned:
            await self.assign(added)
        # Report what is owned now, at once, only when it changed: an assignment
        # sent again unchanged needs no answer (answering it at once would loop).
        self.fsm.reconciled(changed=bool(added or revoked))
        self._moved()

    @property
    def _skip_internal(self) -> bool:
        return self.pattern is not None and self.settings.exclude_internal_topics

    async def _check_regex_support(self, broker: Broker) -> None:
        version = await broker.api_version(ConsumerGroupHeartbeatRequest)
        if version < _REGEX_VERSION:
            raise UnsupportedApiError(
                f"subscribe(pattern=...) for group {self.group_id!r}: {broker.describe()} "
                f"speaks ConsumerGroupHeartbeat up to v{version}, and the regex field "
                f"(SubscribedTopicRegex) needs v{_REGEX_VERSION} (Kafka 4.0+); retrying "
                "cannot help: upgrade the brokers, or use group_protocol='classic' (which "
                "matches the pattern in the client)",
                retriable=False,
            )

    async def _leave_heartbeat(self) -> None:
        """The heartbeat leaving the group (epoch -1; -2 for a static member),
        with the member id, whatever the member's state."""
        epoch = _LEAVE_STATIC if self.instance_id is not None else _LEAVE
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=-1,
        )
        limit = min(self._timeout, 5.0)

        async def send(broker: Broker) -> Any:
            return await broker.request(req, timeout=limit)

        with contextlib.suppress(KafkaError, asyncio.TimeoutError):
            await self.requests.call(
                f"ConsumerGroupHeartbeat (leaving) for group {self.group_id!r}",
                ToCoordinator(self.group_id, GROUP),
                send,
                timeout=limit,
            )

    async def leave(self) -> None:
        """Stop heartbeating, revoke (with the listener and auto-commit, under the
        member's epoch), then send the leaving heartbeat."""
        if self._task is not None:
            await cancel_and_wait([self._task])
        self.fsm.leave()
        self._moved()
        await self.revoke(self.member._assigned_partitions())
        self.fsm.leave_sent()
        await self._leave_heartbeat()
        self.fsm.left()
        self._moved()
