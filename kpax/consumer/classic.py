"""The classic consumer group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Role: :class:`ClassicGroup` keeps this member in the group. A membership task
joins (JoinGroup, with the MEMBER_ID_REQUIRED round trip of KIP-394), lets
the leader assign with the configured assignors (kpax.consumer.assignors),
syncs (SyncGroup) and applies the assignment; a separate heartbeat task
(every ``heartbeat_interval_ms``) keeps the member alive however long the
application takes between polls, up to ``max_poll_interval_ms``: past that
the member leaves the group (as Java does) and rejoins at its next poll.

Rebalance protocols: *eager* (revoke everything before joining) unless every
configured assignor supports *cooperative* (KIP-429, e.g.
``cooperative-sticky``): then the member keeps its partitions while
rejoining, gives up only those the new assignment moves away, and joins
again right after so the moved partitions can be handed to their new owner.

Pattern subscriptions (``subscribe(pattern=...)``): the member matches the
regex against every topic of each metadata refresh (the metadata asks for all
topics then) and rejoins when the matched set changes, so a topic created or
deleted later joins or leaves the group's assignment.

The member's state, id and generation are held by its machine
(:mod:`kpax.consumer.classic_state`); :class:`ClassicGroup` is its driver.

Static membership (KIP-345): with ``group_instance_id`` the member does not
send LeaveGroup on close, so it can come back within ``session_timeout_ms``
and get its partitions back without a rebalance.

Imports: kpax.cluster, kpax.broker.broker, kpax.proto, kpax.structs, kpax.consumer.*.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP, Cluster
from kpax.cluster.request_path import ToCoordinator, once
from kpax.consumer.assignors import Assignor, MemberSubscription, get_assignor
from kpax.consumer.assignors.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kpax.consumer.classic_state import ClassicMachine, ClassicState
from kpax.consumer.group import GroupBase, Membership
from kpax.consumer.options import ConsumerSettings
from kpax.consumer.pattern import Pattern, compile_pattern, matching_topics, regex_text
from kpax.proto.error_codes import (
    FencedInstanceIdError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kpax.proto.error_families import CLASSIC_MEMBER_FENCED_ERRORS, COORDINATOR_ERRORS, code_in
from kpax.proto.errors import KafkaError, error_for_code
from kpax.proto.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

log = logging.getLogger("kpax.consumer.group")

__all__ = ["ClassicGroup"]


class ClassicGroup(GroupBase):
    """The driver of a :class:`~kpax.consumer.classic_state.ClassicMachine`
    (which holds the member's state, member id and generation): it sends the
    requests, calls the listener and fires the machine's events."""

    fenced_note = (
        "its partitions are lost (not committed: whoever gets them next, this member "
        "too, starts from the committed offsets) and it rejoins"
    )

    def __init__(self, cluster: Cluster, settings: ConsumerSettings, member: Membership) -> None:
        super().__init__(cluster, settings, member)
        self.assignors: list[Assignor] = [
            get_assignor(a) for a in settings.partition_assignment_strategy
        ]
        self.cooperative = all("cooperative" in a.rebalance_protocols for a in self.assignors)
        #: The member's state and identity (the only code that changes them).
        self.fsm = ClassicMachine(f"group {self.group_id!r}")
        self._task: asyncio.Task[Any] | None = None
        self._heartbeat: asyncio.Task[Any] | None = None
        self.rebalances = 0
        #: Partition counts of the topics the last assignment was made from
        #: (this member's subscription; the leader's: the whole group's).
        self._assigned_counts: dict[str, int] = {}
        self._watched: set[str] = set()

    # ------------------------------------------------------------ the machine

    @property
    def member_id(self) -> str:
        return self.fsm.member_id

    @property
    def generation(self) -> int:
        return self.fsm.generation

    def in_group(self) -> bool:
        return self.fsm.generation >= 0

    def commit_identity(self) -> tuple[int, str]:
        return self.fsm.identity()

    def poll_expired(self) -> bool:
        return self.fsm.state is ClassicState.POLL_EXPIRED

    def _poll_resumed(self) -> None:
        if self.fsm.state is ClassicState.POLL_EXPIRED:
            self.fsm.polled()
            self._moved()

    def _moved(self) -> None:
        """After each event: mirror the machine into ``stable`` and wake the
        membership task when a round is due."""
        if self.fsm.stable:
            self.stable.set()
        else:
            self.stable.clear()
        if self.fsm.join_due:
            self._wake.set()

    def _ask_rejoin(self) -> None:
        self.fsm.rejoin()
        self._moved()

    # ------------------------------------------------------------ public

    def subscribe(self, topics: list[str]) -> None:
        self.pattern = None
        self.cluster.all_topics = False
        self.subscription = sorted(set(topics))
        self._rejoin()

    def subscribe_pattern(self, pattern: Pattern) -> None:
        """Subscribe to the topics ``pattern`` matches (``re.fullmatch``), matched
        again against every metadata refresh (all topics, every
        ``metadata_max_age_ms``): a change of the matched set rejoins."""
        self.pattern = compile_pattern(pattern)
        self.cluster.all_topics = True
        self.subscription = self._matched()
        self._rejoin()

    def _rejoin(self) -> None:
        self.fsm.subscribe()
        self._moved()
        if self._task is None:
            self.start()
            self._task = self.spawn(self._run())
            self.spawn(self._watch_metadata())

    def _matched(self) -> list[str]:
        assert self.pattern is not None
        return matching_topics(
            compile_pattern(self.pattern),
            self.cluster.snapshot.topics,
            exclude_internal=self.settings.exclude_internal_topics,
        )

    def _counts(self, topics: set[str]) -> dict[str, int]:
        out = {}
        for t in topics:
            info = self.cluster.snapshot.topics.get(t)
            if info is not None and info.partitions:
                out[t] = len(info.partitions)
        return out

    async def _watch_metadata(self) -> None:
        """Rejoin when a watched topic appears, disappears or gains partitions (as
        the Java consumer does): a subscription may name topics that do not exist
        yet. Missing topics are looked up every ``retry_backoff_max_ms`` (at
        least 1 s); the others are checked against every metadata refresh."""
        interval = max(self._backoff[1] / 1000, 1.0)
        seen = 0.0  # the metadata a pattern was last matched against
        while not self._closed:
            if self.pattern is None:
                await asyncio.sleep(interval)
            else:
                await asyncio.sleep(min(interval, self.cluster.metadata_max_age))
                snapshot = self.cluster.snapshot
                if snapshot.updated_at != seen:
                    seen = snapshot.updated_at
                    matched = self._matched()
                    if matched != self.subscription:
                        log.info(
                            "group %s: pattern %r matches %s now (was %s): rejoining",
                            self.group_id,
                            regex_text(self.pattern),
                            matched,
                            self.subscription,
                        )
                        self.subscription = matched
                        self._ask_rejoin()
                        continue
            if self.fsm.state is not ClassicState.STABLE:
                continue
            watched = set(self.subscription) | self._watched
            counts = self._counts(watched)
            if len(counts) < len(watched):
                missing = sorted(watched - set(counts))
                try:
                    await self.cluster.refresh(missing)
                except KafkaError as exc:
                    log.debug("group %s: metadata for %s: %s", self.group_id, missing, exc)
                    continue
                counts = self._counts(watched)
            if counts != self._assigned_counts and self.stable.is_set():
                log.info(
                    "group %s: subscribed topics changed (%s -> %s): rejoining",
                    self.group_id,
                    self._assigned_counts,
                    counts,
                )
                self._ask_rejoin()

    def on_generation_error(self, code: int, sent_with: tuple[int, str] | None = None) -> bool:
        """ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID about this member's current
        generation: it is out of the group, as Java resets it: the generation is
        dropped (and the member id on UNKNOWN_MEMBER_ID), the partitions are lost
        at the next join (``on_partitions_lost``, no commit: another member may
        own them) and the member rejoins. REBALANCE_IN_PROGRESS: rejoin, keeping
        the generation and the partitions. A commit answered while this member
        is joining, or that carried an older generation than its current one,
        changes nothing: the join decides what it owns."""
        if sent_with is not None and (self.fsm.joining or sent_with != self.fsm.identity()):
            return False
        fenced = code_in(code, CLASSIC_MEMBER_FENCED_ERRORS)
        if fenced:
            if sent_with is not None:
                log.info(
                    "group %s: a commit found generation %d gone (%s): this member's "
                    "partitions are lost; rejoining",
                    self.group_id,
                    self.generation,
                    error_for_code(code).__name__,
                )
            self.fsm.fenced(unknown_member=code_in(code, UnknownMemberIdError))
        self._ask_rejoin()
        return fenced

    # ------------------------------------------------------------ membership loop

    async def _run(self) -> None:
        failures = 0
        while not self._closed:
            if not self.fsm.join_due:
                await self._wake.wait()
                self._wake.clear()
                continue
            try:
                await self._join_once()
                failures = 0
            except KafkaError as exc:
                if self.fsm.in_round:  # whatever failed it: the member joins again
                    self.fsm.round_failed()
                    self._moved()
                if not exc.retriable and not isinstance(exc, _RetryJoin):
                    self.fsm.fail(exc)
                    self._moved()
                    raise
                failures += 1
                log.info("group %s: join failed (%s), retrying", self.group_id, exc)
                await asyncio.sleep(self.requests.delay(failures))

    def _protocols(self) -> list[Any]:
        owned = sorted(self.member._assigned_partitions())
        out = []
        for a in self.assignors:
            sub = MemberSubscription(
                topics=list(self.subscription),
                user_data=a.subscription_user_data(owned, self.generation),
                owned_partitions=owned if self.cooperative else [],
                generation_id=self.generation,
                rack_id=self.settings.client_rack,
            )
            out.append(
                JoinGroupRequest.JoinGroupRequestProtocol(
                    name=a.name, metadata=encode_subscription(sub)
                )
            )
        return out

    async def _join_once(self) -> None:
        self.fsm.start_round()
        self._moved()
        self._stop_heartbeat()
        if self.pattern is not None:  # join with what the pattern matches now
            with contextlib.suppress(KafkaError):
                await self.cluster.refresh(all_topics=True)
            self.subscription = self._matched()
        owned = self.member._assigned_partitions()
        if owned and self.generation < 0:
            # Out of the group (a commit found the generation gone): another member
            # may own these now, so they are lost, never committed (as Java does).
            await self.revoke(owned, lost=True)
        elif not self.cooperative:
            await self.revoke(owned)
        if self.fsm.send_join():
            await self._join_and_sync()

    async def _join_and_sync(self) -> None:
        rebalance_timeout = self.settings.max_poll_interval_ms
        join_timeout = rebalance_timeout / 1000 + 5.0
        while True:
            req = JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.settings.session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type="consumer",
                protocols=self._protocols(),
                reason="kpax: joining" if self.generation < 0 else "kpax: rejoining",
            )
            resp = await self.coordinator_request(req, what="JoinGroup", timeout=join_timeout)
            code = resp.error_code
            if code_in(code, MemberIdRequiredError):
                if not self.fsm.member_id_required(resp.member_id):
                    return  # left meanwhile
                continue
            if code:
                await self._join_error(code, "JoinGroup", getattr(resp, "error_message", None))
            break
        generation = resp.generation_id
        if not self.fsm.joined(resp.member_id, generation):
            return  # left meanwhile
        protocol = resp.protocol_name
        assignments: list[Any] = []
        self._watched = set()
        if resp.leader == resp.member_id and not resp.skip_assignment:
            assignments = await self._lead(protocol, resp.members, generation)
        else:
            with contextlib.suppress(KafkaError):
                await self.cluster.refresh(self.subscription)
        self._assigned_counts = self._counts(set(self.subscription) | self._watched)
        sreq = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=protocol,
            assignments=assignments,
        )
        sresp = await self.coordinator_request(sreq, what="SyncGroup", timeout=join_timeout)
        if sresp.error_code:
            await self._join_error(sresp.error_code, "SyncGroup", None)
        if not self.fsm.synced():
            return  # left meanwhile
        self._moved()
        self.rebalances += 1
        target = set(decode_assignment(sresp.assignment).partitions) if sresp.assignment else set()
        owned = self.member._assigned_partitions()
        revoked = owned - target
        added = target - owned
        log.info(
            "group %s: generation %d member %s got %d partitions (+%d -%d)",
            self.group_id,
            generation,
            self.member_id,
            len(target),
            len(added),
            len(revoked),
        )
        self._start_heartbeat()
        kept = owned & target
        if kept:
            # Kept across the rebalance: their positions are this member's to commit
            # in the new generation, even where they equal what it last committed
            # (a commit refused during the rebalance, or one a zombie overwrote).
            self.member._forget_committed(kept)
        if revoked:
            await self.revoke(revoked)
            if self.cooperative:
                self._ask_rejoin()  # let the moved partitions go to their new owner
        await self.assign(added)
        self.fsm.assigned()
        self._moved()

    async def _join_error(self, code: int, what: str, message: str | None) -> None:
        err = error_for_code(code)
        fenced = issubclass(err, CLASSIC_MEMBER_FENCED_ERRORS)
        self.fsm.round_failed(fenced=fenced, unknown_member=issubclass(err, UnknownMemberIdError))
        self._moved()
        if fenced:
            lost = self.member._assigned_partitions()
            if lost:
                await self.revoke(lost, lost=True)
        if issubclass(err, (RebalanceInProgressError, *CLASSIC_MEMBER_FENCED_ERRORS)):
            raise _RetryJoin(f"{what} for group {self.group_id!r}: {err.__name__}")
        if issubclass(err, COORDINATOR_ERRORS):
            self.coordinator_dead()
        raise err(
            f"{what} for group {self.group_id!r} as member {self.member_id!r}",
            error_message=message,
        )

    async def _lead(self, protocol: str, members: list[Any], generation: int) -> list[Any]:
        assignor = next(a for a in self.assignors if a.name == protocol)
        subs: dict[str, MemberSubscription] = {}
        topics: set[str] = set()
        for m in members:
            sub = decode_subscription(m.metadata)
            sub.group_instance_id = m.group_instance_id
            subs[m.member_id] = sub
            topics.update(sub.topics)
        await self.cluster.refresh(topics)
        self._watched = topics  # the leader watches every member's topics
        counts = self._counts(topics)
        result = assignor.assign(counts, subs)
        return [
            SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=mid, assignment=encode_assignment(a)
            )
            for mid, a in result.items()
        ]

    # ------------------------------------------------------------ heartbeat

    def _start_heartbeat(self) -> None:
        self._stop_heartbeat()
        self._heartbeat = self.spawn(self._heartbeat_loop(self.generation, self.member_id))

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    async def _heartbeat_loop(self, generation: int, member_id: str) -> None:
        interval = self.settings.heartbeat_interval_ms / 1000
        session = self.settings.session_timeout_ms / 1000
        last_ok = time.monotonic()
        while not self._closed:
            await asyncio.sleep(interval)
            if self.poll_overdue():
                log.warning(
                    "group %s: no poll for more than max_poll_interval_ms (%d ms): leaving "
                    "the group; the member rejoins at its next poll",
                    self.group_id,
                    self.settings.max_poll_interval_ms,
                )
                member_id = self.fsm.member_id
                self.fsm.poll_timeout(static=self.instance_id is not None)
                self._moved()
                await self._send_leave("consumer poll timeout has expired", member_id)
                lost = self.member._assigned_partitions()
                if lost:
                    await self.revoke(lost, lost=True)
                return
            req = HeartbeatRequest(
                group_id=self.group_id,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=self.instance_id,
            )
            try:
                resp = await self._send_heartbeat(req, min(self._timeout, session))
            except KafkaError as exc:
                if time.monotonic() - last_ok > session:
                    log.warning("group %s: heartbeats failing: %s", self.group_id, exc)
                continue
            code = resp.error_code
            if not code:
                last_ok = time.monotonic()
                continue
            err = error_for_code(code)
            if issubclass(err, COORDINATOR_ERRORS):
                continue  # (answered so past the deadline: the next beat finds it again)
            if issubclass(err, RebalanceInProgressError):
                self._ask_rejoin()
                return
            if issubclass(err, CLASSIC_MEMBER_FENCED_ERRORS):
                self.on_generation_error(code)
                lost = self.member._assigned_partitions()
                if lost:
                    await self.revoke(lost, lost=True)
                return
            fatal: KafkaError
            if issubclass(err, FencedInstanceIdError):
                fatal = err(
                    f"group {self.group_id!r}: another consumer uses group_instance_id "
                    f"{self.instance_id!r}"
                )
            else:
                fatal = err(f"Heartbeat for group {self.group_id!r}")
            self.fsm.fail(fatal)
            self._moved()
            raise fatal

    async def _send_heartbeat(self, req: HeartbeatRequest, timeout: float) -> Any:
        """One Heartbeat on the coordinator route, within ``timeout``: a moved
        coordinator (or a broken connection) is forgotten by the request path
        (its one table), so the next beat finds it again; the beat itself is not
        resent (the heartbeat interval is its retry schedule). Answers are
        returned, a coordinator error's too."""

        async def send(broker: Broker) -> Any:
            resp = await broker.request(req, timeout=timeout)
            if code_in(resp.error_code, COORDINATOR_ERRORS):
                moved = error_for_code(resp.error_code)(
                    f"Heartbeat for group {self.group_id!r} to {broker.describe()}"
                )
                moved.response = resp  # type: ignore[attr-defined]
                raise moved
            return resp

        try:
            return await self.requests.call(
                f"Heartbeat for group {self.group_id!r}",
                ToCoordinator(self.group_id, GROUP),
                send,
                timeout=timeout,
                retry=once,  # the next beat, an interval later, is the retry
            )
        except KafkaError as exc:
            answered = getattr(exc, "response", None)
            if answered is None:
                raise
            return answered

    # ------------------------------------------------------------ leave

    async def _send_leave(self, reason: str, member_id: str) -> None:
        if not member_id:
            return
        limit = min(self._timeout, 5.0)

        async def send(broker: Broker) -> Any:
            if await broker.api_version(LeaveGroupRequest) >= 3:
                req = LeaveGroupRequest(
                    group_id=self.group_id,
                    members=[
                        LeaveGroupRequest.MemberIdentity(
                            member_id=member_id,
                            group_instance_id=self.instance_id,
                            reason=reason,
                        )
                    ],
                )
            else:
                req = LeaveGroupRequest(group_id=self.group_id, member_id=member_id)
            return await broker.request(req, timeout=limit)

        try:
            resp = await self.requests.call(
                f"LeaveGroup for group {self.group_id!r}",
                ToCoordinator(self.group_id, GROUP),
                send,
                timeout=limit,
            )
            if resp.error_code:
                log.info("group %s: LeaveGroup: error %d", self.group_id, resp.error_code)
        except (KafkaError, asyncio.TimeoutError) as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)

    async def leave(self) -> None:
        """Revoke (with the listener and auto-commit), then leave unless static.
        A round or heartbeat still under way changes nothing from now on."""
        self.fsm.leave()
        self._moved()
        self._stop_heartbeat()
        await self.revoke(self.member._assigned_partitions())
        if self.instance_id is None:
            await self._send_leave("the consumer is being closed", self.fsm.member_id)
        self.fsm.left()
        self._moved()


class _RetryJoin(KafkaError):
    retriable = True
