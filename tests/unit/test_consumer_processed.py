"""What automatic commits may send, without a broker: the buffer's "processed"
position (Java's rule: records handed out count as processed once the
application asks for more -- the next ``poll()``, the next record of an
iteration) and the consumer's ``processed_offsets()``/``wait_processed()``.

Positions (what ``commit()`` and ``position()`` see) run ahead of it: they
include the batch or record in the application's hands."""

from __future__ import annotations

import asyncio
import collections
import time

import pytest

from kpax.consumer.buffer import Chunk, FetchBuffer
from kpax.consumer.classic import ClassicGroup
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.fetcher import _ROW_SLOTS
from kpax.consumer.kip848 import ConsumerGroup
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.proto.records import Record, decode_batches, encode_batch
from kpax.structs import OffsetAndMetadata
from kpax.structs import TopicPartition as TP

#: How _chunk makes chunks: "built" (a list of records) or "lazy" (record batches of
#: 4 records checked but not built, as the fetcher gives them: built as read).
_KIND = {"kind": "built"}


@pytest.fixture(autouse=True, params=["built", "lazy"])
def chunk_kind(request: pytest.FixtureRequest):
    _KIND["kind"] = request.param
    yield request.param
    _KIND["kind"] = "built"


def _chunk(st: PartitionState, start: int, n: int, epoch: int = 0) -> Chunk:
    st.puts += 1
    if _KIND["kind"] == "lazy":
        sources: collections.deque = collections.deque()
        for first in range(start, start + n, 4):
            offsets = range(first, min(first + 4, start + n))
            data = encode_batch(
                [Record(value=b"%d" % o, timestamp=0) for o in offsets],
                base_offset=first,
                partition_leader_epoch=epoch,
            )
            (batch,) = decode_batches(data)
            template = ConsumerRecord(st.tp.topic, st.tp.partition, 0, 0, 0, None, None, (), epoch)
            sources.append(batch.checked_rows(template, _ROW_SLOTS))
        return Chunk(st, [], start + n, epoch, st.gen, sources, n)
    recs = [
        ConsumerRecord(st.tp.topic, st.tp.partition, o, 0, 0, None, b"%d" % o, (), epoch)
        for o in range(start, start + n)
    ]
    return Chunk(st, recs, start + n, epoch, st.gen)


def _state(p: int = 0, position: int = 0) -> PartitionState:
    st = PartitionState(TP("t", p))
    st.seek(position)
    return st


def _reader(buf: FetchBuffer):
    """What the consumers' iteration does with the buffer."""
    while True:
        chunk = buf.take_chunk()
        if chunk is None:
            return
        it = buf.start_reading(chunk)
        try:
            yield from it
        finally:
            buf.finish_reading(chunk, it)


def _processed(buf: FetchBuffer, st: PartitionState) -> int | None:
    mark = buf.processed_position(st)
    return None if mark is None else mark[0]


def test_a_polled_batch_is_processed_when_the_next_poll_comes():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 25))
    assert _processed(buf, st) == 0
    assert [r.offset for r in buf.take(10)] == list(range(10))
    assert st.position == 10 and _processed(buf, st) == 0  # the batch is in hand
    assert [r.offset for r in buf.take(10)] == list(range(10, 20))
    assert st.position == 20 and _processed(buf, st) == 10
    assert len(buf.take(10)) == 5
    assert buf.take(10) == []  # an empty poll still says the last batch is done
    assert _processed(buf, st) == 25


def test_only_the_partitions_a_poll_returned_wait_for_the_next_poll():
    buf = FetchBuffer()
    a, b = _state(0, 0), _state(1, 100)
    buf.put(_chunk(a, 0, 3))
    buf.put(_chunk(b, 100, 3))
    assert len(buf.take(4)) == 4  # a: 0..2, b: 100
    assert (_processed(buf, a), _processed(buf, b)) == (0, 100)
    buf.put(_chunk(a, 3, 2))
    assert len(buf.take(3)) == 3  # b: 101, 102; a: 3
    assert (_processed(buf, a), _processed(buf, b)) == (3, 101)
    assert (a.position, b.position) == (4, 103)
    assert [r.offset for r in buf.take(10)] == [4]
    assert (_processed(buf, a), _processed(buf, b)) == (4, 103)
    buf.take(10)
    assert (_processed(buf, a), _processed(buf, b)) == (5, 103)


def test_iteration_processes_a_record_when_it_asks_for_the_next():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 3, epoch=4))
    buf.put(_chunk(st, 3, 3, epoch=4))
    reader = _reader(buf)
    assert next(reader).offset == 0
    assert buf.processed_position(st) == (0, 4)  # offset 0 is in hand
    assert buf.read_position(st) == (1, 4)  # what commit()/position() see
    assert next(reader).offset == 1
    assert _processed(buf, st) == 1
    next(reader)
    assert _processed(buf, st) == 2
    assert next(reader).offset == 3  # the first chunk is done: asked past its end
    assert _processed(buf, st) == 3
    assert [r.offset for r in reader] == [4, 5]
    assert _processed(buf, st) == 6 == st.position


def test_an_iteration_left_by_an_exception_keeps_the_record_in_hand_unprocessed():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 10))
    reader = _reader(buf)
    for rec in reader:
        if rec.offset == 4:
            break
    reader.close()  # what an exception or a break in the loop body does
    assert st.position == 5  # records 5..9 go back to the buffer
    assert _processed(buf, st) == 4  # 4 was in hand: not known to be processed
    # the application goes on (caught the error, or iterates again): 4 is done
    assert [r.offset for r in buf.take(3)] == [5, 6, 7]
    assert _processed(buf, st) == 5


def test_the_last_record_of_a_chunk_in_hand_at_a_break_is_not_processed():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 3))
    reader = _reader(buf)
    assert [next(reader).offset for _ in range(3)] == [0, 1, 2]
    reader.close()
    assert st.position == 3 and _processed(buf, st) == 2


def test_a_break_at_the_end_of_a_batch_gives_back_the_later_batches():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 10, epoch=2))  # lazy: batches 0-3, 4-7, 8-9
    reader = _reader(buf)
    assert [next(reader).offset for _ in range(4)] == [0, 1, 2, 3]
    assert buf.read_position(st) == (4, 2)
    assert buf.processed_position(st) == (3, 2)
    reader.close()
    assert st.position == 4 and _processed(buf, st) == 3
    assert [r.offset for r in buf.take(5)] == [4, 5, 6, 7, 8]  # across batches
    assert st.position == 9
    assert [r.offset for r in _reader(buf)] == [9]
    assert st.position == 10 and _processed(buf, st) == 10


def test_a_seek_mid_iteration_builds_no_more_of_the_chunk():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 12))
    reader = _reader(buf)
    assert [next(reader).offset for _ in range(5)] == [0, 1, 2, 3, 4]
    buf.settle_reading(st)
    assert st.position == 5 and _processed(buf, st) == 4
    st.seek(50)
    assert list(reader) == []
    assert _processed(buf, st) == 50


def test_a_seek_or_pause_mid_iteration_keeps_the_record_in_hand():
    buf = FetchBuffer()
    st = _state()
    buf.put(_chunk(st, 0, 10))
    reader = _reader(buf)
    assert [next(reader).offset for _ in range(3)] == [0, 1, 2]
    buf.settle_reading(st)  # what seek/pause/revocation do first
    assert st.position == 3 and _processed(buf, st) == 2
    st.seek(50)
    assert _processed(buf, st) == 2
    assert list(reader) == []  # the application asks for more: the seek counts
    assert _processed(buf, st) == 50


async def test_a_listener_call_during_iteration_does_not_drop_records_at_a_break():
    buf = FetchBuffer()
    a, b = _state(0, 0), _state(1, 0)
    ran = []
    buf.call_in_app(lambda: ran.append(1))
    buf.put(_chunk(a, 0, 5))
    buf.put(_chunk(b, 0, 5))
    reader = _reader(buf)
    assert [next(reader).offset for _ in range(2)] == [0, 1] and ran == [1]
    reader.close()  # a break on a-1
    assert (a.position, _processed(buf, a)) == (2, 1)
    # b was never handed out: nothing of it counts as processed, and nothing is lost
    assert (b.position, _processed(buf, b)) == (0, 0)
    assert [(r.partition, r.offset) for r in buf.take(100)] == [(0, 2), (0, 3), (0, 4)] + [
        (1, o) for o in range(5)
    ]


# ---------------------------------------------------------------- the consumer


def _consumer(*states: PartitionState) -> AsyncConsumer:
    c = AsyncConsumer("127.0.0.1:1", group_id="g")
    for st in states:
        c.states[st.tp] = st
    return c


def test_processed_offsets_lag_the_positions_by_what_is_in_hand():
    a, b = _state(0, 0), _state(1, 7)
    c = _consumer(a, b)
    c.buffer.put(_chunk(a, 0, 10))
    c.buffer.take(4)
    assert c._member._consumed_offsets(changed_only=True) == {
        a.tp: OffsetAndMetadata(4, "", 0),
        b.tp: OffsetAndMetadata(7, "", -1),
    }
    # a: 0..3 in hand; b: nothing in hand, its position is processed
    assert c._member._processed_offsets() == {
        a.tp: OffsetAndMetadata(0, "", -1),
        b.tp: OffsetAndMetadata(7, "", -1),
    }
    c._member._on_committed(c._member._processed_offsets())
    assert c._member._processed_offsets() == {}  # nothing new
    c.buffer.take(4)
    assert c._member._processed_offsets() == {a.tp: OffsetAndMetadata(4, "", 0)}


def test_processed_offsets_never_go_behind_a_commit_of_this_member():
    a = _state(0, 0)
    c = _consumer(a)
    c.buffer.put(_chunk(a, 0, 10))
    c.buffer.take(10)
    # commit() with records in hand:
    c._member._on_committed(c._member._consumed_offsets(changed_only=True))
    assert a.committed == 10
    assert c._member._processed_offsets() == {}  # not 0: the application said 0..9 are done


def test_a_seek_back_is_committed_again():
    a = _state(0, 0)
    c = _consumer(a)
    c._started = True
    c.buffer.put(_chunk(a, 0, 10))
    c.buffer.take(10)
    c.buffer.take(10)
    c._member._on_committed(c._member._processed_offsets())
    assert a.committed == 10
    c.seek(a.tp, 3)  # a plain method (its result may be awaited)
    assert c._member._processed_offsets() == {a.tp: OffsetAndMetadata(3, "", -1)}


def test_a_plain_close_counts_the_records_in_hand_as_processed():
    a = _state(0, 0)
    c = _consumer(a)
    c.buffer.put(_chunk(a, 0, 10))
    c.buffer.take(4)
    assert c._member._processed_offsets() == {a.tp: OffsetAndMetadata(0, "", -1)}
    c._in_hand_processed = True  # what close() sets (commit_in_hand=True, the default)
    assert c._member._processed_offsets() == {a.tp: OffsetAndMetadata(4, "", 0)}


async def test_wait_processed_waits_for_the_application_to_ask_for_more():
    a, b = _state(0, 0), _state(1, 0)
    c = _consumer(a, b)
    c.buffer.put(_chunk(a, 0, 10))
    c.buffer.take(5)
    # nothing of b in hand: no wait
    t0 = time.monotonic()
    await c._member._wait_processed({b.tp}, 5.0)
    assert time.monotonic() - t0 < 1.0

    c._member._freeze_partitions({a.tp})  # a revocation: no more records of a reach the application

    async def app() -> None:
        await asyncio.sleep(0.1)
        assert c.buffer.take(5) == []  # the next poll

    task = asyncio.ensure_future(app())
    t0 = time.monotonic()
    await c._member._wait_processed({a.tp}, 5.0)
    waited = time.monotonic() - t0
    await task
    assert 0.05 < waited < 2.0
    assert c._member._processed_offsets()[a.tp].offset == 5


async def test_wait_processed_is_bounded_and_skipped_while_leaving():
    a = _state(0, 0)
    c = _consumer(a)
    c.buffer.put(_chunk(a, 0, 10))
    c.buffer.take(5)
    t0 = time.monotonic()
    await c._member._wait_processed({a.tp}, 0.2)
    assert 0.15 < time.monotonic() - t0 < 2.0
    assert c._member._processed_offsets()[a.tp].offset == 0  # still in hand
    c._leaving = True  # close() / unsubscribe(): the application is not polling
    t0 = time.monotonic()
    await c._member._wait_processed({a.tp}, 5.0)
    assert time.monotonic() - t0 < 0.1


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_revocation_waits_less_than_the_session_timeout(protocol: str) -> None:
    c = AsyncConsumer(
        "127.0.0.1:1", group_id="g", session_timeout_ms=6000, heartbeat_interval_ms=500
    )
    cls = ClassicGroup if protocol == "classic" else ConsumerGroup
    group = cls(c.cluster, c.settings, c)
    assert 0 < group.processed_wait() <= 3.0  # heartbeats may wait behind it
