"""Membership of a share group: ShareGroupHeartbeat to the group coordinator.

Role: :class:`ShareMembership` keeps this consumer in its share group
(KIP-932). The member id is made here once and kept for the life of the
consumer (the API requires the client to make it); the first heartbeat has
epoch 0 and names the subscription, later ones only the epoch (and the
subscription again when it changed). The broker assigns partitions; several
members may be given the same partition, and nothing is revoked or committed
on a change: the fetcher just fetches from what is assigned now.

Errors: a moved or loading coordinator is found again (the one request
path); UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH rejoin at epoch 0 with the same
member id; errors retrying cannot help (authorization, a group id already
used by another kind of group, the group full, an API the broker lacks) end
the membership and reach the application's next poll. Leaving is a
heartbeat with epoch -1.

Imports: kpax.cluster, kpax.broker.broker, kpax.consumer.share.membership_state, kpax.proto,
kpax.structs, kpax.tasks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP, Cluster
from kpax.cluster.request_path import RequestPath, RetryPolicy, ToCoordinator
from kpax.consumer.share.membership_state import ShareMemberMachine
from kpax.proto.error_codes import TopicAuthorizationFailedError
from kpax.proto.error_families import CONSUMER_MEMBER_FENCED_ERRORS, code_in
from kpax.proto.errors import KafkaError, UnsupportedApiError, error_for_code
from kpax.proto.messages import ShareGroupHeartbeatRequest
from kpax.structs import TopicPartition
from kpax.tasks import cancel_and_wait

log = logging.getLogger("kpax.share")

__all__ = ["ShareMembership", "new_member_id"]

_LEAVE = -1
#: How many heartbeats, :data:`_EAGER_INTERVAL` apart, a member sends while it has no partitions.
_EAGER_HEARTBEATS = 20
_EAGER_INTERVAL = 0.25


def new_member_id() -> str:
    """A member id as the Java client makes them (a random UUID, base64url)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ShareMembership:
    """This consumer's membership of share group ``group_id`` (see the module docstring).

    ``on_assignment(partitions)`` is called (on the event loop) whenever the
    assigned partitions change; ``on_fatal(error)`` when the membership ends on
    an error retrying cannot help."""

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        *,
        rack: str | None,
        request_timeout: float,
        api_timeout: float,
        backoff: tuple[int, int],
        on_assignment: Callable[[frozenset[TopicPartition]], None],
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self.cluster = cluster
        self.group_id = group_id
        #: The member's state and identity (member id, epoch): one machine.
        self.fsm = ShareMemberMachine(f"share group {group_id!r}", new_member_id())
        self.interval = 5.0
        self.rack = rack
        self.subscription: list[str] = []
        self.assignment: frozenset[TopicPartition] = frozenset()
        #: Set once the broker has answered a heartbeat with an assignment.
        self.assigned = asyncio.Event()
        self._on_assignment = on_assignment
        self._on_fatal = on_fatal
        self._timeout = request_timeout
        self._api_timeout = api_timeout
        self._requests = RequestPath(cluster, RetryPolicy(*backoff))
        #: Heartbeats left to send soon while a new member waits for its first
        #: partitions (the broker assigns in the background; waiting a whole
        #: interval would delay the first records by seconds).
        self._eager = _EAGER_HEARTBEATS
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def member_id(self) -> str:
        return self.fsm.member_id

    @property
    def epoch(self) -> int:
        return self.fsm.epoch

    # ------------------------------------------------------------ public

    def subscribe(self, topics: list[str]) -> None:
        """Join (or change the subscription to) ``topics``; an empty list leaves."""
        self.subscription = sorted(set(topics))
        self.fsm.subscribe()
        self._eager = _EAGER_HEARTBEATS
        self._wake.set()
        if self._task is None and self.subscription:
            self._task = asyncio.ensure_future(self._run())
            self._task.add_done_callback(self._done)

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (epoch -1)."""
        self.fsm.leave()
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])
        if self.fsm.in_group:
            await self._leave_heartbeat()
        self.fsm.left()
        self._set_assignment(frozenset())

    async def unsubscribe(self) -> None:
        """Leave the group; ``subscribe`` joins again (same member id, epoch 0)."""
        await self.leave()
        self.subscription = []
        self.assigned.clear()

    # ------------------------------------------------------------ loop

    def _done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self.fsm.heartbeating:
            if isinstance(exc, KafkaError):
                self.fsm.fail(exc)
            self._on_fatal(exc)

    async def _run(self) -> None:
        failures = 0
        while self.fsm.heartbeating:
            try:
                await self._heartbeat()
                failures = 0
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                failures += 1
                log.info("share group %s: heartbeat failed (%s), retrying", self.group_id, exc)
                await asyncio.sleep(self._requests.delay(failures))
                continue
            wait = self.interval
            if self._eager > 0 and not self.assignment:
                self._eager -= 1
                wait = min(wait, _EAGER_INTERVAL)
            elif self.assignment:
                self._eager = 0
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _check_api(self, broker: Broker) -> None:
        try:
            await broker.api_version(ShareGroupHeartbeatRequest)
        except UnsupportedApiError as exc:
            raise UnsupportedApiError(
                f"share group {self.group_id!r}: {exc.message}; share groups need Kafka 4.1+ "
                "brokers (production-ready from 4.2): retrying cannot help",
                retriable=False,
            ) from None

    async def _heartbeat(self) -> None:
        full = self.fsm.full_heartbeat
        req = ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rack_id=self.rack if full else None,
            subscribed_topic_names=list(self.subscription) if full else None,
        )

        async def send(broker: Broker) -> Any:
            if self.epoch == 0:
                await self._check_api(broker)
            resp = await broker.request(req, timeout=self._timeout)
            code = resp.error_code
            if code and not code_in(code, CONSUMER_MEMBER_FENCED_ERRORS):
                err = error_for_code(code)
                topics = (
                    f" (subscribed to {', '.join(self.subscription)}: this user may not read "
                    "one of them)"
                    if issubclass(err, TopicAuthorizationFailedError)
                    else ""
                )
                raise err(
                    f"ShareGroupHeartbeat for share group {self.group_id!r} as member "
                    f"{self.member_id!r} to {broker.describe()}{topics}",
                    error_message=resp.error_message,
                )
            return resp

        resp = await self._requests.call(
            f"ShareGroupHeartbeat for share group {self.group_id!r}",
            ToCoordinator(self.group_id, GROUP),
            send,
            timeout=self._api_timeout,
        )
        if code_in(resp.error_code, CONSUMER_MEMBER_FENCED_ERRORS):
            log.info(
                "share group %s: member %s fenced (error %d): rejoining",
                self.group_id,
                self.member_id,
                resp.error_code,
            )
            self.fsm.fenced()
            self._eager = _EAGER_HEARTBEATS
            self._set_assignment(frozenset())
            self._wake.set()
            return
        self.fsm.answered(resp.member_id or "", resp.member_epoch)
        if resp.heartbeat_interval_ms > 0:
            self.interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is not None:
            await self._reconcile(resp.assignment.topic_partitions)

    async def _reconcile(self, topic_partitions: list[Any]) -> None:
        snapshot = self.cluster.snapshot
        if any(snapshot.topic_name(t.topic_id) is None for t in topic_partitions):
            with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                await asyncio.wait_for(self.cluster.refresh(self.subscription), self._timeout)
        target: set[TopicPartition] = set()
        for t in topic_partitions:
            name = self.cluster.snapshot.topic_name(t.topic_id)
            if name is None:
                log.warning(
                    "share group %s: assigned topic id %s, not in the metadata",
                    self.group_id,
                    t.topic_id,
                )
                continue
            target.update(TopicPartition(name, p) for p in t.partitions)
        log.info(
            "share group %s: member %s epoch %d: %d partitions",
            self.group_id,
            self.member_id,
            self.epoch,
            len(target),
        )
        self._set_assignment(frozenset(target))
        self.assigned.set()

    def _set_assignment(self, target: frozenset[TopicPartition]) -> None:
        if target != self.assignment:
            self.assignment = target
            self._on_assignment(target)

    async def _leave_heartbeat(self) -> None:
        req = ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=_LEAVE
        )
        limit = min(self._timeout, 5.0)

        async def send(broker: Broker) -> Any:
            return await broker.request(req, timeout=limit)

        with contextlib.suppress(KafkaError, asyncio.TimeoutError):
            await self._requests.call(
                f"ShareGroupHeartbeat (leaving) for share group {self.group_id!r}",
                ToCoordinator(self.group_id, GROUP),
                send,
                timeout=limit,
            )
