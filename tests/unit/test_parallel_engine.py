"""The parallel consumer's state machine (kpax.parallel.engine), driven directly
in virtual time: random records, handler outcomes and commits, and after every
step the rules a user relies on -- the commit point never moves back and never
passes an incomplete record, the metadata names only done records and fits its
budget, one record per key (or partition) at a time in offset order, the
window bound holds, and a restart from the last commit skips exactly what it
recorded as done."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.consumer.record import ConsumerRecord
from kpax.parallel.codec import decode
from kpax.parallel.engine import DROP, GIVE_UP, RETRY, Engine, EngineSettings
from kpax.structs import OffsetAndMetadata
from kpax.structs import TopicPartition as TP

T0, T1 = TP("t", 0), TP("t", 1)


def rec(tp: TP, offset: int, key: bytes | None, value: bytes = b"v") -> ConsumerRecord:
    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, key, value, (), 3)


class Model:
    """What the test knows: every record given to the engine, what was done."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.next = {T0: 0, T1: 0}
        self.received: dict[TP, dict[int, ConsumerRecord]] = {T0: {}, T1: {}}
        self.done: dict[TP, set[int]] = {T0: set(), T1: set()}
        self.started: dict[tuple[TP, object], list[int]] = {}
        self.running: dict[int, object] = {}  # id(work) -> work
        self.points: dict[TP, int] = {}
        self.last_committed: dict[TP, OffsetAndMetadata] = {}

    def check(self) -> None:
        e = self.engine
        s = e.settings
        assert e.running <= s.max_concurrency
        assert e.window_records <= s.max_records
        assert e.running == len(self.running)
        units = [w.unit for w in self.running.values() if w.state == 1]
        if s.ordering != "unordered":
            assert len(units) == len(set(units)), "two records of one unit running"
        for tp, part in e.parts.items():
            incomplete = [o for o in self.received[tp] if o not in self.done[tp]]
            assert list(part.incomplete) == incomplete
            window = len(incomplete) + len(part.pending)
            assert part.records >= window


def _key_order(model: Model) -> None:
    for (tp, _unit), offsets in model.started.items():
        firsts = list(dict.fromkeys(offsets))  # first start of each record
        assert firsts == sorted(firsts), (tp, offsets)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    ordering=st.sampled_from(["key", "partition", "unordered"]),
    max_concurrency=st.integers(1, 6),
    max_records=st.integers(1, 40),
    max_attempts=st.sampled_from([1, 2, 3, None]),
    max_metadata=st.sampled_from([0, 30, 60, 4096]),
)
def test_commits_ordering_and_window(
    data, ordering, max_concurrency, max_records, max_attempts, max_metadata
):
    e = Engine(
        EngineSettings(
            ordering=ordering,
            max_concurrency=max_concurrency,
            max_records=max_records,
            max_attempts=max_attempts,
            retry_delay=1.0,
            retry_delay_max=4.0,
            max_metadata_bytes=max_metadata,
        )
    )
    m = Model(e)
    now = 0.0
    snaps = []
    for _ in range(data.draw(st.integers(1, 60))):
        step = data.draw(st.sampled_from(["add", "take", "finish", "time", "commit", "answer"]))
        if step == "add":
            tp = data.draw(st.sampled_from([T0, T1]))
            n = data.draw(st.integers(0, e.room()))
            batch = []
            for _ in range(n):
                m.next[tp] += data.draw(st.integers(1, 3))  # gaps: compacted offsets
                key = data.draw(st.sampled_from([b"a", b"b", b"c", None]))
                batch.append(rec(tp, m.next[tp], key))
            e.add(batch, now)
            for r in batch:
                m.received[tp][r.offset] = r
        elif step == "take":
            for w in e.take(now, data.draw(st.integers(1, 5))):
                m.running[id(w)] = w
                unit = w.unit if ordering != "unordered" else None
                m.started.setdefault((w.part.tp, unit), []).append(w.offset)
        elif step == "finish" and m.running:
            w = data.draw(st.sampled_from(sorted(m.running.values(), key=lambda w: w.offset)))
            del m.running[id(w)]
            if data.draw(st.booleans()):
                e.succeeded(w, now)
                m.done[w.part.tp].add(w.offset)
            else:
                what = e.failed(w, now)
                assert what in (RETRY, GIVE_UP, DROP)
                if what == GIVE_UP:  # the dead-letter topic took it
                    assert max_attempts is not None and w.attempts == max_attempts
                    e.succeeded(w, now)
                    m.done[w.part.tp].add(w.offset)
                else:
                    assert w.ready_at >= now + 1.0
        elif step == "time":
            now += data.draw(st.sampled_from([0.5, 1.0, 5.0]))
        elif step == "commit":
            snap = e.snapshot()
            if snap:
                snaps.append(snap)
        elif step == "answer" and snaps:
            snap = snaps.pop(0)  # the group answers commits in order
            if data.draw(st.booleans()):
                e.committed(snap)
                for tp, om in snap.offsets.items():
                    assert om.offset >= m.points.get(tp, 0), "the commit point moved back"
                    m.points[tp] = om.offset
                    m.last_committed[tp] = om
            else:
                e.commit_failed(snap)
        # what any snapshot says is true of the records
        for snap in snaps:
            for tp, om in snap.offsets.items():
                assert len(om.metadata) <= max_metadata
                incomplete = [o for o in m.received[tp] if o not in m.done[tp]]
                assert all(om.offset <= o for o in incomplete), "the point passed a record"
                for start, end in decode(om.metadata, om.offset) or []:
                    for o in range(start, end):
                        assert o not in incomplete, f"{o} recorded done but it is not"
        m.check()
    _key_order(m)
    # a restart from the last commits skips what they recorded, and only that
    for tp, om in m.last_committed.items():
        fresh = Engine(EngineSettings(ordering=ordering))
        assert fresh.assign(tp, om)
        replay = [r for o, r in sorted(m.received[tp].items()) if o >= om.offset]
        added = fresh.add(replay, 0.0)
        recorded = {o for s, e2 in decode(om.metadata, om.offset) or [] for o in range(s, e2)}
        assert fresh.skipped == len([r for r in replay if r.offset in recorded])
        assert added == len(replay) - fresh.skipped
        assert not recorded & {o for o in m.received[tp] if o not in m.done[tp]}


def test_key_order_and_other_keys_go_on_while_one_waits_for_a_retry():
    e = Engine(EngineSettings(ordering="key", max_concurrency=10, retry_delay=1.0))
    e.add([rec(T0, 0, b"a"), rec(T0, 1, b"a"), rec(T0, 2, b"b"), rec(T0, 3, b"b")], 0.0)
    first = e.take(0.0)
    assert [w.offset for w in first] == [0, 2]  # one per key
    a0, b2 = first
    assert e.failed(a0, 0.0) == RETRY
    e.succeeded(b2, 0.0)
    assert [w.offset for w in e.take(0.5)] == [3]  # key b goes on, a waits
    assert e.next_retry() == 1.0
    assert [w.offset for w in e.take(1.0)] == [0]  # a's retry, then a's next
    e.succeeded(a0, 1.0)
    assert [w.offset for w in e.take(1.0)] == [1]


def test_partition_and_unordered():
    e = Engine(EngineSettings(ordering="partition", max_concurrency=10))
    e.add([rec(T0, i, b"%d" % i) for i in range(3)] + [rec(T1, 0, b"x")], 0.0)
    assert sorted(w.offset for w in e.take(0.0)) == [0, 0]  # one per partition
    u = Engine(EngineSettings(ordering="unordered", max_concurrency=2))
    u.add([rec(T0, i, b"k") for i in range(5)], 0.0)
    assert [w.offset for w in u.take(0.0)] == [0, 1]


def test_give_up_after_the_attempts_and_backoff_doubles():
    e = Engine(EngineSettings(max_attempts=3, retry_delay=0.1, retry_delay_max=0.15))
    e.add([rec(T0, 0, b"a")], 0.0)
    (w,) = e.take(0.0)
    assert e.failed(w, 0.0) == RETRY and w.ready_at == 0.1
    assert e.take(0.09) == []
    assert e.take(0.1) == [w]
    assert e.failed(w, 1.0) == RETRY and abs(w.ready_at - 1.15) < 1e-9  # capped
    assert e.take(1.15) == [w]
    assert e.failed(w, 2.0) == GIVE_UP and e.running == 1
    e.succeeded(w, 2.0)
    assert e.snapshot().offsets == {T0: OffsetAndMetadata(1, "", 3)}


def test_window_room_counts_records_and_bytes_until_committed():
    e = Engine(EngineSettings(max_records=3, max_bytes=10))
    e.add([rec(T0, 0, b"k", b"1234"), rec(T0, 1, b"k", b"1234")], 0.0)
    assert e.window_bytes == 10 and e.room() == 0  # bytes full
    w0 = e.take(0.0)[0]
    e.succeeded(w0, 0.0)
    assert e.room() == 0  # done, not yet committed
    snap = e.snapshot()
    assert snap.offsets == {T0: OffsetAndMetadata(1, "", 3)}
    e.committed(snap)
    assert e.window_records == 1 and e.window_bytes == 5 and e.room() == 2


def test_done_beyond_the_point_goes_in_the_metadata_and_leaves_the_window():
    e = Engine(EngineSettings(ordering="unordered", max_concurrency=10))
    e.add([rec(T0, o, b"k") for o in range(10, 15)], 0.0)
    works = e.take(0.0)
    for w in works[1:]:
        e.succeeded(w, 0.0)
    snap = e.snapshot()
    om = snap.offsets[T0]
    assert om.offset == 10
    assert decode(om.metadata, 10) == [(11, 15)]
    e.committed(snap)
    assert e.window_records == 1  # only offset 10
    assert not e.snapshot()  # nothing changed: nothing to commit
    e.succeeded(works[0], 0.0)
    assert e.snapshot().offsets[T0] == OffsetAndMetadata(15, "", 3)


def test_restart_skips_done_records_and_keeps_the_map_until_passed():
    first = Engine(EngineSettings(ordering="unordered", max_concurrency=10))
    first.add([rec(T0, o, b"k") for o in range(6)], 0.0)
    works = first.take(0.0)
    for w in works:
        if w.offset in (2, 4, 5):
            first.succeeded(w, 0.0)
    om = first.snapshot().offsets[T0]
    assert (om.offset, decode(om.metadata, 0)) == (0, [(2, 3), (4, 6)])
    again = Engine(EngineSettings(ordering="unordered", max_concurrency=10))
    assert again.assign(T0, om)
    # before any record arrives, the map is kept as it is (nothing to commit)
    assert not again.snapshot()
    assert again.add([rec(T0, o, b"k") for o in range(3)], 0.0) == 2  # 2 skipped
    assert not again.snapshot()  # still the same state
    w0 = again.take(0.0, 1)[0]
    again.succeeded(w0, 0.0)
    # the part of the map beyond what arrived is still committed
    om = again.snapshot().offsets[T0]
    assert (om.offset, decode(om.metadata, 1)) == (1, [(2, 3), (4, 6)])
    assert again.add([rec(T0, o, b"k") for o in range(3, 7)], 0.0) == 2  # 3 and 6
    assert sorted(w.offset for w in again.take(0.0)) == [1, 3, 6]


def test_a_reset_before_the_committed_offset_forgets_the_map():
    e = Engine(EngineSettings(ordering="unordered"))
    om = OffsetAndMetadata(100, "", -1)
    e.assign(T0, om)
    assert e.add([rec(T0, 5, b"k")], 0.0) == 1  # e.g. truncation, reset to earliest
    assert e.add([rec(T0, 4, b"k")], 0.0) == 0  # older than what arrived: ignored


def test_revoke_drops_queued_and_waiting_keeps_running_then_remove():
    e = Engine(EngineSettings(ordering="key", max_concurrency=1, retry_delay=1.0))
    e.add([rec(T0, 0, b"a"), rec(T0, 1, b"b"), rec(T1, 0, b"a")], 0.0)
    (w,) = e.take(0.0)
    e.revoke([T0])
    assert e.running_in([T0]) == 1
    e.succeeded(w, 0.0)
    assert e.running_in([T0]) == 0
    assert e.snapshot([T0]).offsets == {T0: OffsetAndMetadata(1, "", 3)}
    e.remove([T0])
    assert [x.part.tp for x in e.take(0.0)] == [T1]
    assert e.window_records == 1


def test_a_completion_after_removal_counts_only_its_slot():
    e = Engine(EngineSettings(ordering="key", max_concurrency=2))
    e.add([rec(T0, 0, b"a")], 0.0)
    (w,) = e.take(0.0)
    e.remove([T0])
    assert e.window_records == 0
    e.assign(T0, None)
    e.add([rec(T0, 0, b"a")], 0.0)
    e.succeeded(w, 0.0)  # the old assignment's work
    assert e.running == 0
    (new,) = e.take(0.0)  # the new one is not disturbed
    assert new is not w and new.offset == 0
    e.revoke([T0])
    assert e.failed(new, 0.0) == DROP and e.running == 0


def test_unusable_map_is_reported():
    e = Engine(EngineSettings())
    assert not e.assign(T0, OffsetAndMetadata(3, "kpax-pc:9:r:AAA", -1))
    assert e.assign(T1, OffsetAndMetadata(3, "some other client", -1))


def test_metadata_budget_shrinks_to_none():
    e = Engine(EngineSettings(ordering="unordered", max_metadata_bytes=4096))
    e.add([rec(T0, o, b"k") for o in range(3)], 0.0)
    ws = e.take(0.0)
    e.succeeded(ws[2], 0.0)
    refused = len(e.snapshot().offsets[T0].metadata)
    assert refused > 12
    assert e.shrink_metadata(5000) == 2048  # at least halved
    assert e.shrink_metadata(refused) == 0  # below what was refused: too small for any map
    e.succeeded(ws[1], 0.0)
    assert e.snapshot().offsets[T0] == OffsetAndMetadata(0, "", 3)
