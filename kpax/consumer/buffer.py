"""The fetched-records buffer: the hand-off point between I/O and the application.

Role: the fetcher (on the event loop) appends fetches (:class:`Chunk`: one
partition's records from one Fetch response; for the sync face mostly checked
batches whose records are built when taken) and errors; the application takes records from
it, whole chunks at a time, on its own thread (sync face) or on the loop
(asyncio face), where the records are built (:meth:`Chunk.build_upto`, and
batch by batch during an iteration). Appending and taking never wait on
each other: a ``collections.deque`` (atomic append/popleft) holds the chunks,
a ``threading.Condition`` wakes a blocked sync taker, an ``asyncio.Event``
wakes an async one. Taking advances the partition's ``position`` and tells
the fetcher (``on_drained``) when a partition has room for another fetch.

A partition's error (queued by the fetcher after the records before it) is
raised when the taker reaches it, and then again at every take, before any
record, for as long as the partition stays failed with it (as the Java
client does): until a seek clears it, or the partition is unassigned. While
the partition is paused its error is not raised, so the others can be read.

Iteration (``for rec in consumer``) takes a whole chunk and hands out its
records one by one from list iterators (one per batch, chained in C), with no
work per record. The chunk
being read is remembered (:meth:`FetchBuffer.start_reading`): the
partition's position as the application sees it -- for ``commit()``,
``position()`` and auto-commit -- is the offset after the last record handed
out (:meth:`FetchBuffer.read_position`); records not handed out when the loop
stops (``break``, an exception) go back to the head of the buffer, so the
next poll returns them (:meth:`FetchBuffer.finish_reading`); and a seek,
pause or revocation of that partition first ends the reading at the records
already handed out (:meth:`FetchBuffer.settle_reading`).

What the application has *processed* (what automatic commits may send, see
:meth:`FetchBuffer.processed_position`) lags the position: records handed out
are processed only once the application asks for more (Java's rule: calling
``poll()`` again means the previous batch is done; an iteration is done with a
record when it asks for the next one). Takes are numbered; a take notes, per
partition it hands records of, the position before them and its own number
(``PartitionState.in_hand``, ``in_hand_take``: once per chunk), and the note
holds only while that take is the last one -- the next take forgets every
note by counting, touching no partition. During an iteration the record in
hand is found from the chunk being read, at commit time, so handing out a
record costs nothing more.

Also runs rebalance-listener calls that must happen on the application's
thread (see :meth:`FetchBuffer.call_in_app`).

Imports: kpax.consumer.state, kpax.consumer.record, kpax.metrics,
kpax.proto.records.v2 (parse_rows), kpax.proto.gc_pause, the standard library.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable, Iterator
from itertools import chain
from operator import length_hint
from typing import Any, NamedTuple

from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.metrics import Sensor
from kpax.proto.gc_pause import gc_paused
from kpax.proto.records.v2 import parse_rows

__all__ = ["Chunk", "FetchBuffer"]


class Chunk:
    """Records of one partition from one fetch; ``pos`` is how many were taken.

    The fetcher may give, instead of records, ``sources``: lists of records and,
    mostly, batches checked but not yet turned into records (the arguments of
    ``parse_rows``, see :meth:`RecordBatchV2.checked_rows`). The records are then
    built by :meth:`build`, on the taking thread, when the chunk is taken: not on
    the I/O thread, which stays free to read the next fetch, and just before the
    application reads them (the same CPU, its caches warm)."""

    __slots__ = (
        "gen",
        "next_epoch",
        "next_offset",
        "pending",
        "pos",
        "records",
        "sources",
        "state",
    )

    def __init__(  # noqa: PLR0917
        self,
        state: PartitionState,
        records: list[ConsumerRecord],
        next_offset: int,
        next_epoch: int,
        gen: int,
        sources: collections.deque[Any] | None = None,
        pending: int = 0,
    ) -> None:
        self.state = state
        #: The records built so far (all of them when ``sources`` is None).
        self.records = records
        #: What the rest is built from, in order: ``(n, list of records)`` or
        #: ``(n, parse_rows arguments)``, n records each; ``pending`` in all.
        self.sources = sources
        self.pending = pending
        self.next_offset = next_offset
        self.next_epoch = next_epoch
        self.gen = gen
        self.pos = 0

    def build_upto(self, want: int) -> None:
        """Build from ``sources`` until ``want`` records past ``pos`` are built (or
        all are), the records before ``pos`` (taken) let go (taking thread only)."""
        recs = self.records
        if self.pos:
            del recs[: self.pos]
            self.pos = 0
        sources = self.sources
        # Only untracked records and lists are made: the cyclic GC's passes over them
        # (the allocations trigger one every few batches) would cost more than building.
        with gc_paused():
            while sources and len(recs) < want:
                n, src = sources.popleft()
                recs.extend(src if type(src) is list else parse_rows(*src))
                self.pending -= n


class _Reading(NamedTuple):
    """The chunk an iteration is handing out: ``records``, the list being read now
    (the chunk's next batch once it is read through, see
    :meth:`FetchBuffer.start_reading`), ``it`` the iterator over it (the records
    handed out are ``len(records) - length_hint(it)``), and ``before`` the last
    record handed out before ``records`` (None at the chunk's start). Replaced,
    never changed, as the iteration moves on: one read sees a consistent view."""

    chunk: Chunk
    records: list[ConsumerRecord]
    it: Iterator[ConsumerRecord]
    before: ConsumerRecord | None


class _AppCall:
    """A function the application's thread must run (rebalance listener)."""

    __slots__ = ("fn", "future", "loop")

    def __init__(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self.fn = fn
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()


class FetchBuffer:
    def __init__(self, consumed: Sensor | None = None) -> None:
        #: records-consumed (kpax.metrics): recorded once per take, never per record.
        self._consumed = consumed
        self._items: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        #: Held while a chunk's records are handed out and its partition's position
        #: moves (once per chunk, never per record), and by :meth:`freeze`.
        self._lock = threading.Lock()
        self._event: asyncio.Event | None = None
        #: Called (on the taking thread) when a partition's buffered count drops.
        self.on_drained: Callable[[PartitionState], None] = lambda s: None
        #: Called (on the taking thread) when a take hands records out: the
        #: consumer notes the group identity they were handed out under.
        self.on_handout: Callable[[], None] | None = None
        self._closed = False
        #: Partitions whose error was raised and stands (taking thread only).
        self._failed: dict[PartitionState, BaseException] = {}
        #: What an iteration is handing out (see :class:`_Reading`), or None.
        self._reading: _Reading | None = None
        #: The number of the last take (take or take_chunk): a partition's
        #: ``in_hand`` holds while its ``in_hand_take`` is this (taking thread writes).
        self._take_no = 0

    # ------------------------------------------------------------ loop side

    def put(self, item: Any) -> None:
        self._items.append(item)
        self._notify()

    def put_error(self, exc: BaseException) -> None:
        """Queue an error that is no partition's for the next take to raise; the
        same error again while one is still queued last is not queued twice (a
        failing request retried every backoff must not fill the buffer while
        the application does not poll)."""
        items = self._items
        if items:
            last = items[-1]
            if (
                isinstance(last, tuple)
                and last[0] is None
                and type(last[1]) is type(exc)
                and str(last[1]) == str(exc)
            ):
                return
        self.put((None, exc))

    def _notify(self) -> None:
        if self._event is not None:
            self._event.set()
        with self._cond:
            self._cond.notify_all()

    def call_in_app(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        """Queue ``fn`` for the application's thread (run at its next poll)."""
        call = _AppCall(fn, asyncio.get_running_loop())
        self.put(call)
        return call.future

    def close(self) -> None:
        self._closed = True
        self._notify()

    def freeze(self, states: list[PartitionState]) -> None:
        """Stop handing out records of ``states`` (being revoked): their positions
        are final once this returns, whatever thread is taking."""
        with self._lock:
            for st in states:
                self._settle_locked(st)
                st.revoke()

    # ------------------------------------------------------------ iteration

    def start_reading(self, chunk: Chunk) -> Iterator[ConsumerRecord]:
        """An iterator over a chunk from :meth:`take_chunk`, remembered as the one
        being read until :meth:`finish_reading`. A chunk's records not built yet are
        built a batch at a time as the iteration reaches them, and a batch's records
        are let go once it is read (memory in use stays one batch's, warm in the
        caches); the iterator is C code over lists (``itertools.chain``), with no
        Python call per record."""
        recs = chunk.records
        it = iter(recs)
        self._reading = _Reading(chunk, recs, it, None)
        if not chunk.sources:
            return it
        if not recs:  # the first batch now: a position is read from built records
            self._build_next(chunk)
            reading = self._reading
            assert reading is not None
            it = reading[2]
        return chain.from_iterable(self._batches(chunk, it))

    def _batches(
        self, chunk: Chunk, first: Iterator[ConsumerRecord]
    ) -> Iterator[Iterator[ConsumerRecord]]:
        """The iterators over ``chunk``'s records, a batch at a time, built as needed."""
        yield first
        while chunk.sources and self._build_next(chunk):
            reading = self._reading
            assert reading is not None
            yield reading[2]

    def _build_next(self, chunk: Chunk) -> bool:
        """Build the records of ``chunk``'s next source, to be read next (every record
        built before was handed out); False when the reading ended meanwhile (a
        seek, pause or revocation settled it)."""
        sources = chunk.sources
        assert sources
        n, src = sources.popleft()
        rows = src if type(src) is list else parse_rows(*src)  # outside the lock
        with self._lock:
            reading = self._reading
            if reading is None or reading.chunk is not chunk:
                return False
            old = reading.records
            chunk.records = rows
            chunk.pending -= n
            self._reading = _Reading(chunk, rows, iter(rows), old[-1] if old else reading.before)
        return True

    def finish_reading(self, chunk: Chunk, it: Iterator[ConsumerRecord]) -> None:
        """The iteration over ``chunk`` ended: records it did not hand out go back
        to the head of the buffer, and the partition's position to the first of
        them (unless the partition was sought, paused or revoked meanwhile)."""
        with self._lock:
            reading = self._reading
            if reading is not None and reading.chunk is chunk:
                self._reading = None
                recs = reading.records
                done = len(recs) - length_hint(reading.it)
                last = recs[done - 1] if done else reading.before
            else:  # settled: its records were cut after those handed out
                recs = chunk.records
                done = len(recs)
                last = None
            state = chunk.state
            if chunk.gen != state.gen or not state.assigned:
                return
            if last is not None:  # the record in hand is not processed until more are asked for
                state.in_hand = last.offset
                state.in_hand_epoch = last.leader_epoch
                state.in_hand_take = self._take_no
            rest = recs[done:]
            if chunk.sources:
                for _n, src in chunk.sources:
                    rest.extend(src if type(src) is list else parse_rows(*src))
            chunk.sources = None
            if not rest:
                return
            back = Chunk(state, rest, chunk.next_offset, chunk.next_epoch, chunk.gen)
            first = rest[0]
            state.position = first.offset
            state.position_epoch = first.leader_epoch
            state.takes -= 1  # buffered again
            self._items.appendleft(back)

    def read_position(self, state: PartitionState) -> tuple[int, int] | None:
        """(offset, leader epoch) after the last record an iteration handed out of
        ``state``'s chunk being read, or None when none is being read."""
        reading = self._reading
        if reading is None:
            return None
        chunk, recs, it, before = reading
        if chunk.state is not state or chunk.gen != state.gen:
            return None
        done = len(recs) - length_hint(it)
        if done >= len(recs) and not chunk.pending:
            return None  # all handed out: the position is the chunk's end
        last = recs[done - 1] if done else before
        if last is None:
            return recs[0].offset, recs[0].leader_epoch
        return last.offset + 1, last.leader_epoch

    def processed_position(self, state: PartitionState) -> tuple[int, int] | None:
        """(offset, leader epoch) before which the application has processed every
        record of ``state``'s partition -- what automatic commits may send -- or
        None when the position is unknown. Records handed out count as processed
        once the application asks for more: until then it is the position before
        the last take's records, and during an iteration the offset of the record
        in hand. Safe to call from any thread (reads the position first, so a
        take racing with it can only make the answer earlier)."""
        pos, epoch = state.position, state.position_epoch
        take_no = self._take_no
        reading = self._reading
        if reading is not None:
            chunk, recs, it, before = reading
            if chunk.state is state and chunk.gen == state.gen:
                done = len(recs) - length_hint(it)
                rec = recs[done - 1] if done else before
                if rec is not None:
                    return rec.offset, rec.leader_epoch
        if state.in_hand_take == take_no:
            held = state.in_hand
            if held is not None:
                return held, state.in_hand_epoch
        if pos is None:
            return None
        return pos, epoch

    def holds(self, state: PartitionState) -> bool:
        """Has the application records of ``state`` it has not moved past?"""
        return state.in_hand_take == self._take_no

    def settle_reading(self, state: PartitionState) -> None:
        """End the reading of ``state``'s chunk at the records already handed out,
        and put the position after them (before a seek, pause or revocation)."""
        with self._lock:
            self._settle_locked(state)

    def _settle_locked(self, state: PartitionState) -> None:
        reading = self._reading
        if reading is None or reading.chunk.state is not state:
            return
        chunk, recs, it, before = reading
        done = len(recs) - length_hint(it)
        last = recs[done - 1] if done else before
        if last is not None and chunk.gen == state.gen:  # the record in hand: not processed yet
            state.in_hand = last.offset
            state.in_hand_epoch = last.leader_epoch
            state.in_hand_take = self._take_no
        pos = self.read_position(state)
        if pos is not None:
            state.position, state.position_epoch = pos
        del recs[done:]  # the iterator ends there
        chunk.records = recs
        chunk.sources = None  # and builds no more
        chunk.pending = 0
        self._reading = None

    def clear(self) -> None:
        for item in list(self._items):
            if isinstance(item, _AppCall) and not item.future.done():
                item.future.cancel()
        self._items.clear()
        self._failed.clear()

    def __len__(self) -> int:
        return len(self._items)

    # ------------------------------------------------------------ taker side

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records (maybe none), without waiting.

        Raises an error the fetcher queued, and again at every later take while its
        partition stays failed; runs queued listener calls. The records of the
        previous take count as processed from now on.
        """
        # The application asks for more: what earlier takes handed out is processed.
        take_no = self._take_no = self._take_no + 1
        if self._failed:
            self._raise_failed()
        items = self._items
        out: list[ConsumerRecord] = []
        while items and len(out) < max_records:
            item = items[0]
            if type(item) is not Chunk:
                if out:
                    if self._consumed is not None:
                        self._consumed.record(len(out))
                    if self.on_handout is not None:
                        self.on_handout()
                    return out  # records first; the error or call at the next take
                items.popleft()
                self._take_other(item)
                continue
            state = item.state
            want = max_records - len(out)
            if item.sources:
                # outside the lock: a seek from the loop need not wait for it
                item.build_upto(want)
            with self._lock:
                if item.gen != state.gen or not state.assigned:
                    items.popleft()
                    state.takes += 1
                    drained = True
                else:
                    recs = item.records
                    start = item.pos
                    if start == 0 and len(recs) <= want and not item.pending:
                        if out:
                            out.extend(recs)
                        else:
                            out = recs
                        end = len(recs)
                    else:
                        end = min(len(recs), start + want)
                        out.extend(recs[start:end])
                    if end > start and state.in_hand_take != take_no:
                        # in hand until the next take (noted before the position moves)
                        state.in_hand = state.position
                        state.in_hand_epoch = state.position_epoch
                        state.in_hand_take = take_no
                    if end >= len(recs) and not item.pending:
                        items.popleft()
                        state.position = item.next_offset
                        state.position_epoch = item.next_epoch
                        state.takes += 1
                        drained = True
                    else:
                        item.pos = end
                        last = recs[end - 1]
                        state.position = last.offset + 1
                        state.position_epoch = last.leader_epoch
                        drained = False
            if drained:
                self.on_drained(state)
        if out:
            if self._consumed is not None:
                self._consumed.record(len(out))
            if self.on_handout is not None:
                self.on_handout()
        return out

    def _take_other(self, item: Any) -> None:
        """Act on a queued item that is not records: run a listener call, or raise
        an error (a partition's error stands until a seek or unassignment)."""
        if isinstance(item, _AppCall):
            self._run_app_call(item)
            return
        state, exc = item
        if state is None:
            raise exc
        if state.assigned and state.error is exc:
            # The partition stays stopped (state.error) until a seek.
            self._failed[state] = exc
            if not state.paused:
                raise exc.with_traceback(None)

    def take_chunk(self) -> Chunk | None:
        """The next whole chunk (for iteration: its records not yet taken), or
        None if the buffer is empty. Errors and listener calls queued before it
        are acted on first, as :meth:`take` does. The records of the previous
        take count as processed from now on."""
        # The application asks for more: what earlier takes handed out is processed.
        take_no = self._take_no = self._take_no + 1
        if self._failed:
            self._raise_failed()
        items = self._items
        while items:
            item = items[0]
            if type(item) is not Chunk:
                items.popleft()
                self._take_other(item)
                continue
            state = item.state
            with self._lock:
                items.popleft()
                state.takes += 1
                live = item.gen == state.gen and state.assigned
                recs = item.records[item.pos :] if item.pos else item.records
                count = len(recs) + item.pending
                if live:
                    if count and state.in_hand_take != take_no:
                        # in hand until the next take (noted before the position moves)
                        state.in_hand = state.position
                        state.in_hand_epoch = state.position_epoch
                        state.in_hand_take = take_no
                    state.position = item.next_offset
                    state.position_epoch = item.next_epoch
            self.on_drained(state)
            if live and count:
                if self._consumed is not None:
                    self._consumed.record(count)
                if self.on_handout is not None:
                    self.on_handout()
                if item.pos:
                    rest = Chunk(state, recs, item.next_offset, item.next_epoch, item.gen)
                    rest.sources, rest.pending = item.sources, item.pending
                    return rest
                return item
        return None

    def _raise_failed(self) -> None:
        """Raise the error of the first partition still failed and not paused."""
        first: BaseException | None = None
        for state, exc in list(self._failed.items()):
            if not state.assigned or state.error is not exc:
                del self._failed[state]  # seeked or unassigned since
            elif first is None and not state.paused:
                first = exc
        if first is not None:
            raise first.with_traceback(None)  # raised again and again: no growing traceback

    def run_app_calls(self) -> None:
        """Run listener calls waiting at the head of the buffer (no records taken)."""
        items = self._items
        while items and isinstance(items[0], _AppCall):
            self._run_app_call(items.popleft())

    def _run_app_call(self, call: _AppCall) -> None:
        try:
            result = call.fn()
        except BaseException as exc:
            call.loop.call_soon_threadsafe(_set_exception, call.future, exc)
            return
        call.loop.call_soon_threadsafe(_set_result, call.future, result)

    def wait_sync(self, timeout: float) -> bool:
        """Block the calling thread until something is buffered (or timeout/close)."""
        if self._items or self._closed:
            return True
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._items and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    async def wait_async(self, timeout: float) -> bool:
        if self._items or self._closed:
            return True
        if self._event is None:
            self._event = asyncio.Event()
        self._event.clear()
        if self._items:
            return True
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            return bool(self._items)
        return True


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)
