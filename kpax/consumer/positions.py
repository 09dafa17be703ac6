"""Consumer positions the fetcher cannot fetch from yet: resets and epoch validation.

Role: the :class:`~kpax.consumer.fetcher.Fetcher` hands :class:`Positions`
the partitions whose position is unknown (new assignment, reset) or must be
validated, each as a task on the consumer's event loop.

Unknown positions (AWAITING_RESET in the partition's
:class:`~kpax.consumer.position_state.PositionMachine`) are resolved from the
committed offsets (``committed_lookup``: the group's, passed at construction)
or by ListOffsets, per the partition's reset strategy or ``auto_offset_reset``
("none": a NoOffsetForPartitionError naming the partition). Each answer is an
event of the partition's machine (found, validated, truncated, fail); a
partition whose state changed meanwhile (a seek, a reset: its ``gen`` moved)
is left alone. A position whose leader epoch
is in doubt (FENCED/UNKNOWN_LEADER_EPOCH, leader moves) is validated with
OffsetForLeaderEpoch; log truncation below it (KIP-320, also found from a
Fetch response's diverging epoch) moves it back to the divergence point, with
"none" a LogTruncationError. An offset out of range with "none" fails the
partition with an error naming its valid range. A topic deleted and re-created
under the same name (another topic id in the metadata: the fetcher finds it)
has its positions found again as for a new assignment
(:meth:`Positions.topic_recreated`). ``fail`` stops a partition
with an error the buffer delivers (the fetcher uses it too).

Imports: kpax.cluster.cluster, kpax.consumer.{buffer, errors, offsets, options,
position_state, state},
kpax.proto.errors, kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from kpax.cluster.cluster import Cluster
from kpax.consumer.buffer import FetchBuffer
from kpax.consumer.errors import LogTruncationError, NoOffsetForPartitionError
from kpax.consumer.offsets import EARLIEST, LATEST, end_offsets_for_epochs, list_offsets
from kpax.consumer.options import ConsumerSettings
from kpax.consumer.position_state import FetchState, Reset
from kpax.consumer.state import PartitionState
from kpax.proto.errors import KafkaError, RecordPosition, error_for_code
from kpax.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger("kpax.consumer")

__all__ = ["CommittedLookup", "Positions"]

CommittedLookup = Callable[
    [list[TopicPartition]], Awaitable[dict[TopicPartition, OffsetAndMetadata | None]]
]


class Positions:
    """Finds and checks the positions of a consumer's partitions (one per Fetcher)."""

    def __init__(
        self,
        cluster: Cluster,
        states: dict[TopicPartition, PartitionState],
        buffer: FetchBuffer,
        settings: ConsumerSettings,
        *,
        committed_lookup: CommittedLookup | None = None,
    ) -> None:
        self.cluster = cluster
        self.states = states
        self.buffer = buffer
        self.isolation = settings.isolation
        self.reset_policy = settings.auto_offset_reset
        #: Committed offsets of partitions to start from (the group's; None: no group).
        self.committed_lookup = committed_lookup
        self._backoff = settings.retry_backoff
        self._api_timeout = settings.api_timeout
        #: Partitions with a reset or a validation under way (the fetcher marks
        #: them when it starts one, so that it does not start another).
        self.resetting: set[TopicPartition] = set()
        #: Futures of :meth:`changed`, done by :meth:`notify`.
        self._waiters: list[asyncio.Future[None]] = []
        #: Why a partition's position is being found again, when it is not the
        #: usual reason (for the error auto_offset_reset="none" raises).
        self._why: dict[TopicPartition, str] = {}

    def changed(self) -> asyncio.Future[None]:
        """A future done at the next end of a reset or validation, or failure of a
        partition (what ``position()`` waits for, instead of polling)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def notify(self) -> None:
        """Wake the :meth:`changed` waiters: some partition's position may be known."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` left the assignment."""
        self.resetting.discard(tp)
        self._why.pop(tp, None)

    def restart_from(self) -> str:
        """Where a position found anew starts (for log lines)."""
        policy = f"auto_offset_reset={self.reset_policy!r}"
        if self.committed_lookup is not None:
            return f"the group's committed offset, else {policy}"
        return policy

    def topic_recreated(self, st: PartitionState, topic_id: uuid.UUID) -> None:
        """``st``'s topic was deleted and re-created (``topic_id`` is the new one's):
        its position belongs to the old topic, so it is found again as for a newly
        assigned partition -- the group's committed offset, else ``auto_offset_reset``
        ("none": a NoOffsetForPartitionError saying why). Records fetched from the old
        topic and not yet taken are dropped."""
        # (a new gen: whatever was fetched for the old topic is dropped)
        st.await_reset(Reset.COMMITTED if self.committed_lookup is not None else Reset.POLICY)
        st.committed = None
        st.high_watermark = st.last_stable_offset = st.log_start_offset = -1
        self._why[st.tp] = f"topic {st.tp.topic!r} was deleted and re-created (id {topic_id})"

    async def reset(self, parts: list[PartitionState]) -> None:
        """Give ``parts`` a position: the committed offset or the reset policy's."""
        try:
            # (seeked or revoked since the fetcher asked: nothing to find)
            todo = [st for st in parts if st.state is FetchState.AWAITING_RESET]
            gens = {st.tp: st.gen for st in todo}
            committed: list[PartitionState] = []
            by_spec: dict[TopicPartition, int] = {}
            for st in todo:
                how = st.reset or Reset.POLICY
                if how is Reset.COMMITTED:
                    committed.append(st)
                else:
                    self._reset_spec(st, how, by_spec)
            if committed and self.committed_lookup is not None:
                found = await self.committed_lookup([st.tp for st in committed])
                for st in committed:
                    om = found.get(st.tp)
                    if om is not None and om.offset >= 0 and st.gen == gens[st.tp]:
                        epoch = om.leader_epoch
                        st.found(om.offset, epoch, validate=epoch >= 0)
                        st.committed = om.offset
                    elif st.gen == gens[st.tp]:
                        self._reset_spec(st, Reset.POLICY, by_spec)
            elif committed:
                for st in committed:
                    self._reset_spec(st, Reset.POLICY, by_spec)
            if by_spec:
                found2 = await list_offsets(
                    self.cluster,
                    by_spec,
                    isolation_level=self.isolation,
                    timeout=self._api_timeout,
                    retry_backoff=self._backoff,
                )
                for tp, (offset, _ts, _epoch) in found2.items():
                    cur = self.states.get(tp)
                    if cur is not None and cur.gen == gens[tp] and cur.assigned:
                        cur.found(offset)
            for st in parts:
                if st.position is not None:
                    self._why.pop(st.tp, None)
        finally:
            for st in parts:
                self.resetting.discard(st.tp)
            self.notify()

    def _reset_spec(self, st: PartitionState, how: Reset, out: dict[TopicPartition, int]) -> None:
        name = self.reset_policy if how is Reset.POLICY else how.value
        if name == "earliest":
            out[st.tp] = EARLIEST
        elif name == "latest":
            out[st.tp] = LATEST
        else:
            why = self._why.pop(st.tp, None)
            exc = NoOffsetForPartitionError(
                f"no committed offset and no valid position for partition {st.tp} "
                f"(auto_offset_reset='none'{'; ' + why if why else ''}): seek() first"
            )
            self.fail(st, exc)

    def fail(self, st: PartitionState, exc: BaseException, *, drop_in_flight: bool = False) -> None:
        """Stop fetching ``st`` (FAIL); the buffer delivers ``exc`` after its records."""
        st.fail(exc, drop_in_flight=drop_in_flight)
        self.buffer.put((st, exc))
        self.notify()

    async def validate(self, parts: list[PartitionState]) -> None:
        """Check the positions of ``parts`` against their leaders' logs (KIP-320)."""
        try:
            # (seeked, reset or revoked since the fetcher asked: nothing to check)
            waiting = [st for st in parts if st.state is FetchState.AWAITING_VALIDATION]
            todo = {
                st.tp: st for st in waiting if st.position_epoch >= 0 and st.position is not None
            }
            for st in waiting:
                if st.tp not in todo:
                    st.validated()  # no epoch to check the position against
            if not todo:
                return
            gens = {tp: st.gen for tp, st in todo.items()}
            found = await end_offsets_for_epochs(
                self.cluster,
                {tp: st.position_epoch for tp, st in todo.items()},
                timeout=self._api_timeout,
                retry_backoff=self._backoff,
            )
            for tp, (epoch, end) in found.items():
                st = todo[tp]
                if st.gen != gens[tp] or st.state is not FetchState.AWAITING_VALIDATION:
                    continue
                if not self.maybe_truncated(st, epoch, end):
                    st.validated()
        finally:
            for st in parts:
                self.resetting.discard(st.tp)
            self.notify()

    def maybe_truncated(self, st: PartitionState, epoch: int, end: int) -> bool:
        """The leader's log for ``epoch`` ends at ``end``: below the position, truncation
        (TRUNCATED, or FAIL with auto_offset_reset="none"). True when it was."""
        pos = st.position
        if pos is None or end < 0 or end >= pos or st.state is FetchState.FAILED:
            return False
        if self.reset_policy == "none":
            self.fail(
                st,
                LogTruncationError(
                    f"partition {st.tp}: log truncated to offset {end} (epoch {epoch}) below "
                    f"the consumer's position {pos}"
                ),
            )
            return True
        log.warning(
            "partition %s: log truncated below position %d, resetting to %d", st.tp, pos, end
        )
        st.truncated(end, epoch)
        return True

    async def out_of_range(self, st: PartitionState, code: int, offset: int) -> None:
        """Fail ``st`` with an error naming the partition, the offset and the
        partition's valid range (``topic_partition``, ``offset``; ``next_offset``:
        the nearest offset in range, when the range could be looked up)."""
        gen = st.gen
        nearest: int | None = None
        try:
            lo = await list_offsets(
                self.cluster, {st.tp: EARLIEST}, isolation_level=self.isolation, timeout=5.0
            )
            hi = await list_offsets(
                self.cluster, {st.tp: LATEST}, isolation_level=self.isolation, timeout=5.0
            )
            start, end = lo[st.tp][0], hi[st.tp][0]
            valid = f"log start {start}, high watermark {end}"
            nearest = start if offset < start else end
        except KafkaError as exc:
            valid = f"valid range unknown: {exc.message}"
        if st.gen == gen:
            tp = st.tp
            how = "seek to an offset in range to go on"
            if nearest is not None:
                how += (
                    f" (the nearest: seek(TopicPartition({tp.topic!r}, {tp.partition}), {nearest}))"
                )
            err = error_for_code(code)(
                f"fetch offset {offset} of partition {tp} is out of range ({valid}) "
                f"and auto_offset_reset='none': {how}"
            )
            if isinstance(err, RecordPosition):  # OffsetOutOfRangeError
                err.topic_partition = st.tp
                err.offset = offset
                err.next_offset = nearest
            self.fail(st, err)
