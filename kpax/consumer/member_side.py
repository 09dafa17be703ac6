"""The consumer's side of group membership: what the group code asks of the consumer.

Role: :class:`MemberSide` is what :class:`~kpax.consumer.group.GroupBase` (and the
classic and KIP-848 members) hold as their ``member`` (the
:class:`~kpax.consumer.group.Membership` protocol): it adds and removes the
consumer's partitions as the group assigns and revokes them, says which offsets
a commit sends (the positions the application consumed; for automatic commits
only what it processed: at-least-once, Java's rule; or what ``store_offsets``
stored), waits for the application to move past the records of partitions being
revoked, calls the rebalance listener and records a fatal error. It reads and
changes the consumer's partition states, buffer and fetcher.

Imports: kpax.consumer.{group,position_state,state}, kpax.metrics, kpax.structs,
kpax.user_callbacks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kpax.consumer.group import call_maybe_async
from kpax.consumer.position_state import Reset
from kpax.consumer.state import PartitionState
from kpax.metrics import Metrics
from kpax.structs import OffsetAndMetadata, TopicPartition
from kpax.user_callbacks import call_user

if TYPE_CHECKING:
    from kpax.consumer.client import AsyncConsumer

log = logging.getLogger("kpax.consumer")


class MemberSide:
    """The consumer ``c`` as the group code sees it (module docstring)."""

    def __init__(self, consumer: AsyncConsumer) -> None:
        self.c = consumer
        #: The consumer's counters (the group records commits in them).
        self.metrics_registry: Metrics | None = consumer.metrics_registry

    def _assigned_partitions(self) -> set[TopicPartition]:
        return set(self.c.states)

    def _add_partitions(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            if tp not in self.c.states:
                self.c.states[tp] = PartitionState(tp, Reset.COMMITTED)
        self.c._wake_fetcher()

    def _remove_partitions(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self.c._stored.pop(tp, None)
            self.c._eof_at.pop(tp, None)
            st = self.c.states.pop(tp, None)
            if st is not None:
                self.c.buffer.settle_reading(st)
                st.revoke()
                if self.c.fetcher is not None:
                    self.c.fetcher.forget(tp)
        self.c._wake_fetcher()
        if self.c.fetcher is not None:
            self.c.fetcher.positions.notify()  # a position() waiting for one of them ends

    def _freeze_partitions(self, tps: set[TopicPartition]) -> None:
        self.c.buffer.freeze([self.c.states[tp] for tp in tps if tp in self.c.states])

    def _consumed_offsets(
        self, changed_only: bool = False
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Each partition's position as the application has consumed it (during an
        iteration: after the last record handed out). ``changed_only``: leave out
        partitions whose position is the committed offset this member last knew
        (what commits send: re-committing it could only write back a stale offset
        after another member moved it on, e.g. around a coordinator failover)."""
        out = {}
        read = self.c.buffer.read_position
        for tp, st in list(self.c.states.items()):
            if st.position is not None:  # (None: awaiting a reset)
                pos = read(st)
                if pos is not None:
                    om = OffsetAndMetadata(pos[0], "", pos[1])
                else:
                    om = OffsetAndMetadata(st.position, "", st.position_epoch)
                if changed_only and om.offset == st.committed:
                    continue
                out[tp] = om
        return out

    def _processed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What automatic commits send: each partition's offset before which the
        application has processed every record (``FetchBuffer.processed_position``:
        records handed out count once it asks for more; after a plain ``close()``
        the positions), for partitions where that is past the committed offset
        this member last knew. Never behind a commit this member made (an
        explicit ``commit()`` while records are in hand says they are processed).

        With ``enable_auto_offset_store=False``: what ``store_offsets``
        stored instead, where past the committed offset."""
        if not self.c.settings.enable_auto_offset_store:
            return self._stored_offsets(changed_only=True)
        if self.c._in_hand_processed:
            return self._consumed_offsets(changed_only=True)
        out = {}
        processed = self.c.buffer.processed_position
        for tp, st in list(self.c.states.items()):
            if st.position is None:  # awaiting a reset
                continue
            mark = processed(st)
            if mark is None:
                continue
            committed = st.committed
            if committed is not None and mark[0] <= committed:
                continue
            out[tp] = OffsetAndMetadata(mark[0], "", mark[1])
        return out

    def _stored_offsets(
        self, changed_only: bool = False
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """What ``store_offsets`` stored, per assigned partition (``changed_only``:
        only where it is not the committed offset this member last knew)."""
        out = {}
        for tp, om in list(self.c._stored.items()):
            st = self.c.states.get(tp)
            if st is None or (changed_only and om.offset == st.committed):
                continue
            out[tp] = om
        return out

    def _commit_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What ``commit()`` without offsets sends: the positions (after every
        record handed out), or with ``enable_auto_offset_store=False`` what
        ``store_offsets`` stored."""
        if not self.c.settings.enable_auto_offset_store:
            return self._stored_offsets(changed_only=True)
        return self._consumed_offsets(changed_only=True)

    async def _wait_processed(self, tps: set[TopicPartition], timeout: float) -> None:
        """Wait, at most ``timeout`` seconds, until the application has moved past
        the records of ``tps`` it holds (asked for more: the next ``poll()`` or
        iteration step), so that a revocation commits them. Returns at once while
        the consumer closes or unsubscribes (the application is not polling)."""
        buffer = self.c.buffer
        states = [st for tp, st in list(self.c.states.items()) if tp in tps]
        deadline = time.monotonic() + timeout
        while not self.c._leaving and any(buffer.holds(st) for st in states):
            if time.monotonic() >= deadline:
                log.info(
                    "revoking %s while the application still holds records of them "
                    "(no poll for %.1fs): committing only what it moved past",
                    sorted(tps),
                    timeout,
                )
                return
            await asyncio.sleep(0.005)

    def _on_committed(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """The group accepted these offsets (the group code calls this)."""
        for tp, om in offsets.items():
            st = self.c.states.get(tp)
            if st is not None:
                st.committed = om.offset

    def _forget_committed(self, tps: set[TopicPartition]) -> None:
        """The next commit sends the positions of ``tps`` even if unchanged since
        the committed offset this member last knew (the group code calls this for
        partitions kept across a rebalance)."""
        for tp in tps:
            st = self.c.states.get(tp)
            if st is not None:
                st.committed = None

    async def _call_listener(self, method: str, tps: set[TopicPartition]) -> None:
        listener = self.c.listener
        if listener is None:
            return
        fn = getattr(listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(listener, "on_partitions_revoked", None)
        if fn is None:
            return
        try:
            if self.c.listener_runner is not None and not self.c._closed:
                await self.c.listener_runner(lambda: fn(tps))
            else:
                await call_maybe_async(fn, tps)
        except Exception:  # a failing listener must not stop group membership
            log.exception("rebalance listener %s failed", method)

    def _fail(self, exc: BaseException) -> None:
        """A fatal error (the group code calls this): every poll raises it from
        now on, and ``error_callback`` hears of it."""
        first = self.c._fatal is None
        self.c._fatal = exc
        self.c.buffer.put((None, exc))
        callback = self.c.settings.error_callback
        if first and callback is not None:
            call_user(callback, exc, "error_callback", log)
