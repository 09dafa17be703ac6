"""kpax.ParallelConsumer and kpax.aio.ParallelConsumer through FakeKafka: the
engine's behaviour with real clients, in seconds -- ordering (key, partition,
unordered) with concurrency beyond the partition count, retries that do not
stall other keys, the dead-letter topic and the error callback, back-pressure
(the window, then paused partitions), a rebalance between two parallel
consumers (classic and KIP-848) with no record processed twice, a restart that
skips the records done beyond the committed offset, a broker refusing the
metadata as too large, signals."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import signal
import threading
import time

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.parallel.codec import decode
from tests.wait import eventually

FAST = {"auto_offset_reset": "earliest", "session_timeout_ms": 10_000, "heartbeat_interval_ms": 300}


def produce(bootstrap: str, topic: str, n: int, keys: int, partitions: int = 1) -> None:
    """``n`` records ``v<i>`` with key ``k<i % keys>``; a key's records all in
    partition ``key % partitions``."""
    with kpax.Producer(bootstrap, linger_ms=2) as p:
        for i in range(n):
            k = i % keys
            p.send(topic, b"v%d" % i, key=b"k%d" % k, partition=k % partitions)
        p.flush(10)


class Running:
    """A sync parallel consumer's ``run`` on a thread."""

    def __init__(self, pc: kpax.ParallelConsumer, handler) -> None:
        self.pc = pc
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, args=(handler,), daemon=True)
        self.thread.start()

    def _main(self, handler) -> None:
        try:
            self.pc.run(handler)
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 30) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return"


class Log:
    """What handlers did, thread-safe: per (partition, key) the offsets in the
    order they finished; how many ran at once, overall and per key."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: dict[tuple[int, bytes], list[int]] = collections.defaultdict(list)
        self.count = 0
        self.now = 0
        self.peak = 0
        self.per_key: collections.Counter = collections.Counter()
        self.per_partition: collections.Counter = collections.Counter()
        self.key_peak = 0
        self.partition_peak = 0

    def start(self, rec) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.per_key[rec.partition, rec.key] += 1
            self.per_partition[rec.partition] += 1
            self.key_peak = max(self.key_peak, self.per_key[rec.partition, rec.key])
            self.partition_peak = max(self.partition_peak, self.per_partition[rec.partition])

    def end(self, rec) -> int:
        with self.lock:
            self.now -= 1
            self.per_key[rec.partition, rec.key] -= 1
            self.per_partition[rec.partition] -= 1
            self.done[rec.partition, rec.key].append(rec.offset)
            self.count += 1
            return self.count


def _in_order(log: Log) -> None:
    for where, offsets in log.done.items():
        assert offsets == sorted(offsets), where


def _committed_metadata(fake, group: str, topic: str, partition: int) -> tuple[int, str]:
    c = fake.call(lambda cl: cl.offsets.get(group)[topic, partition])
    return c.offset, c.metadata or ""


# ---------------------------------------------------------------- ordering


def test_key_order_with_more_concurrency_than_partitions(fake_kafka):
    fake_kafka.create_topic("o", 2)
    produce(fake_kafka.bootstrap, "o", 400, keys=20, partitions=2)
    log = Log()
    pc = kpax.ParallelConsumer(fake_kafka.bootstrap, group_id="g-key", max_concurrency=16, **FAST)
    # 8 different keys of one partition must run at once to pass this barrier
    barrier = threading.Barrier(8, timeout=20)

    def handle(rec):
        log.start(rec)
        if rec.offset < 4:  # the first records of 4 keys of each partition
            barrier.wait()
        time.sleep(0.005)
        if log.end(rec) == 400:
            pc.stop()

    with pc:
        pc.subscribe(["o"])
        run = Running(pc, handle)
        run.join()
        assert run.error is None
        m = pc.metrics()
    _in_order(log)
    assert log.key_peak == 1  # never two records of one key at once
    assert log.peak > 8  # well beyond the 2 partitions
    assert m["records-processed-total"] == 400
    assert m["records-in-flight"] == 0
    assert fake_kafka.committed("g-key") == {("o", 0): 200, ("o", 1): 200}


def test_partition_order_runs_one_record_per_partition(fake_kafka):
    fake_kafka.create_topic("po", 3)
    produce(fake_kafka.bootstrap, "po", 90, keys=9, partitions=3)
    log = Log()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap, group_id="g-part", ordering="partition", max_concurrency=16, **FAST
    )

    def handle(rec):
        log.start(rec)
        time.sleep(0.002)
        if log.end(rec) == 90:
            pc.stop()

    with pc:
        pc.subscribe(["po"])
        Running(pc, handle).join()
    assert log.partition_peak == 1
    by_partition = collections.defaultdict(list)
    for (p, _k), offsets in log.done.items():
        by_partition[p] += offsets
    assert {p: len(o) for p, o in by_partition.items()} == {0: 30, 1: 30, 2: 30}


def test_unordered_runs_one_keys_records_at_once(fake_kafka):
    fake_kafka.create_topic("u", 1)
    produce(fake_kafka.bootstrap, "u", 40, keys=1)
    barrier = threading.Barrier(8, timeout=20)
    log = Log()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap, group_id="g-un", ordering="unordered", max_concurrency=8, **FAST
    )

    def handle(rec):
        log.start(rec)
        if rec.offset < 8:
            barrier.wait()  # 8 records of the one key at once
        if log.end(rec) == 40:
            pc.stop()

    with pc:
        pc.subscribe(["u"])
        Running(pc, handle).join()
    assert log.peak == 8 and log.key_peak == 8
    assert fake_kafka.committed("g-un") == {("u", 0): 40}


# ---------------------------------------------------------------- failures


def test_retries_with_backoff_do_not_stall_other_keys(fake_kafka):
    fake_kafka.create_topic("r", 1)
    with kpax.Producer(fake_kafka.bootstrap) as p:
        p.send("r", b"a0", key=b"a", partition=0)
        for i in range(20):
            p.send("r", b"b%d" % i, key=b"b", partition=0)
        p.send("r", b"a1", key=b"a", partition=0)
        p.flush(10)
    events: list[tuple[str, float]] = []
    attempts = collections.Counter()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap,
        group_id="g-retry",
        max_attempts=3,
        retry_delay_ms=200,
        **FAST,
    )

    def handle(rec):
        attempts[rec.value] += 1
        if rec.value == b"a0" and attempts[rec.value] < 3:
            events.append(("a0 failed", time.monotonic()))
            raise RuntimeError("not yet")
        events.append((rec.value.decode(), time.monotonic()))
        if len(events) == 2 + 22:
            pc.stop()

    with pc:
        pc.subscribe(["r"])
        Running(pc, handle).join()
        m = pc.metrics()
    names = [e for e, _ in events]
    first_fail = names.index("a0 failed")
    a0_done = names.index("a0")
    # key b went on while a0 waited for its retries; a1 only after a0
    assert all(f"b{i}" in names[first_fail:a0_done] for i in range(20))
    assert names.index("a1") > a0_done
    fails = [t for e, t in events if e == "a0 failed"]
    done_at = events[a0_done][1]
    assert fails[1] - fails[0] >= 0.19 and done_at - fails[1] >= 0.39  # 200 ms, doubling
    assert (m["records-failed-total"], m["records-retried-total"]) == (2, 2)
    assert fake_kafka.committed("g-retry") == {("r", 0): 22}


def test_dead_letter_topic_gets_the_record_with_why(fake_kafka):
    fake_kafka.create_topic("d", 2)
    fake_kafka.create_topic("d.DLT", 1)
    produce(fake_kafka.bootstrap, "d", 40, keys=4, partitions=2)
    done = Log()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap,
        group_id="g-dlt",
        max_attempts=2,
        retry_delay_ms=10,
        dead_letter_topic="{topic}.DLT",
        **FAST,
    )

    def handle(rec):
        if rec.value == b"v17":
            raise ValueError(f"boom at {rec.offset}")
        if done.end(rec) == 39:
            pc.stop()

    with pc:
        pc.subscribe(["d"])
        Running(pc, handle).join()
        assert pc.metrics()["records-dead-lettered-total"] == 1
    assert fake_kafka.committed("g-dlt") == {("d", 0): 20, ("d", 1): 20}
    with kpax.Consumer(fake_kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP("d.DLT", 0)])
        (dead,) = eventually(lambda: c.poll(0.2), 10)
    assert (dead.key, dead.value) == (b"k1", b"v17")
    headers = dict(dead.headers)
    assert headers == {
        "kpax.dlt.topic": b"d",
        "kpax.dlt.partition": b"1",
        "kpax.dlt.offset": b"8",  # partition 1 holds the odd values: v17 is its 9th
        "kpax.dlt.group": b"g-dlt",
        "kpax.dlt.attempts": b"2",
        "kpax.dlt.error.type": b"ValueError",
        "kpax.dlt.error.message": b"boom at 8",
    }


def test_error_callback_takes_a_given_up_record(fake_kafka):
    fake_kafka.create_topic("e", 1)
    produce(fake_kafka.bootstrap, "e", 10, keys=2)
    given_up = []
    count = Log()

    def on_error(rec, exc):
        given_up.append((rec.offset, repr(exc), threading.current_thread().name))
        if count.end(rec) == 10:
            pc.stop()

    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap, group_id="g-cb", max_attempts=1, on_error=on_error, **FAST
    )

    def handle(rec):
        if rec.offset == 3:
            raise KeyError("x")
        if count.end(rec) == 10:
            pc.stop()

    with pc:
        pc.subscribe(["e"])
        Running(pc, handle).join()
    assert [(o, e) for o, e, _ in given_up] == [(3, "KeyError('x')")]
    assert given_up[0][2].startswith("kpax-parallel-handler")  # on the handlers' pool
    assert fake_kafka.committed("g-cb") == {("e", 0): 10}


def test_with_nowhere_to_go_run_raises_and_the_record_stays_uncommitted(fake_kafka):
    fake_kafka.create_topic("n", 1)
    produce(fake_kafka.bootstrap, "n", 10, keys=10)
    pc = kpax.ParallelConsumer(fake_kafka.bootstrap, group_id="g-fatal", max_attempts=2, **FAST)

    def handle(rec):
        if rec.offset == 5:
            raise ZeroDivisionError("no")

    with pc:
        pc.subscribe(["n"])
        with pytest.raises(ZeroDivisionError, match="no"):
            pc.run(handle, handle_signals=False)
    offset, metadata = _committed_metadata(fake_kafka, "g-fatal", "n", 0)
    assert offset == 5  # the failed record is processed again after a restart
    assert set(decode(metadata, 5) or []) <= {(6, 10)}  # what finished after it, if it did


# ---------------------------------------------------------------- back-pressure


def test_back_pressure_window_then_paused_partitions(fake_kafka):
    fake_kafka.create_topic("bp", 2)
    produce(fake_kafka.bootstrap, "bp", 200, keys=40, partitions=2)
    gate = threading.Event()
    seen_window = []
    log = Log()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap,
        group_id="g-bp",
        max_concurrency=5,
        max_records_in_flight=30,
        **FAST,
    )

    def handle(rec):
        gate.wait(30)
        if log.end(rec) == 200:
            pc.stop()

    with pc:
        pc.subscribe(["bp"])
        run = Running(pc, handle)

        def stuck():
            m = pc.metrics()
            seen_window.append(m["records-window"])
            return m["records-window"] == 30 and m["records-in-flight"] == 5 and m

        m = eventually(stuck, 10)
        assert m["records-queued"] == 25
        # full and stuck for a second: the partitions are paused
        m = eventually(lambda: pc.metrics()["fetch-paused"] == 1 and pc.metrics(), 10)
        assert pc.aio.consumer.paused() == pc.assignment()
        gate.set()
        run.join()
        m = pc.metrics()
    assert max(seen_window) <= 30
    assert m["fetch-paused"] == 0 and m["records-window"] == 0
    assert log.count == 200
    assert fake_kafka.committed("g-bp") == {("bp", 0): 100, ("bp", 1): 100}


def test_back_pressure_by_bytes(fake_kafka):
    fake_kafka.create_topic("bb", 1)
    with kpax.Producer(fake_kafka.bootstrap) as p:
        for i in range(60):
            p.send("bb", b"x" * 100, key=b"%d" % i)
        p.flush(10)
    gate = threading.Event()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap,
        group_id="g-bb",
        max_concurrency=2,
        max_bytes_in_flight=1000,
        max_poll_records=5,
        **FAST,
    )
    log = Log()

    def handle(rec):
        gate.wait(30)
        if log.end(rec) == 60:
            pc.stop()

    with pc:
        pc.subscribe(["bb"])
        run = Running(pc, handle)
        m = eventually(lambda: pc.metrics()["bytes-window"] >= 1000 and pc.metrics(), 10)
        # the bound is checked before each poll: at most one poll (5 records) past it
        assert m["bytes-window"] <= 1000 + 5 * 102
        gate.set()
        run.join()
    assert fake_kafka.committed("g-bb") == {("bb", 0): 60}


# ---------------------------------------------------------------- rebalance and restart


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_rebalance_between_two_parallel_consumers_processes_each_record_once(fake_kafka, protocol):
    fake_kafka.create_topic("rb", 4)
    produce(fake_kafka.bootstrap, "rb", 600, keys=40, partitions=4)
    lock = threading.Lock()
    processed: list[tuple[str, int, int]] = []
    seq: dict[tuple[int, bytes], list[tuple[int, int]]] = collections.defaultdict(list)
    everyone_done = threading.Event()
    opts = dict(FAST, group_id=f"g-rb-{protocol}", max_concurrency=8, group_protocol=protocol)
    if protocol == "classic":
        opts["heartbeat_interval_ms"] = 200

    def handler(name):
        def handle(rec):
            time.sleep(0.01)
            with lock:
                processed.append((name, rec.partition, rec.offset))
                seq[rec.partition, rec.key].append((len(processed), rec.offset))
                if len(processed) >= 600:
                    everyone_done.set()

        return handle

    a = kpax.ParallelConsumer(fake_kafka.bootstrap, **opts)
    b = kpax.ParallelConsumer(fake_kafka.bootstrap, **opts)
    try:
        a.subscribe(["rb"])
        run_a = Running(a, handler("a"))
        eventually(lambda: len(processed) >= 100, 20)
        b.subscribe(["rb"])
        run_b = Running(b, handler("b"))
        eventually(lambda: a.assignment() and b.assignment(), 20)
        assert everyone_done.wait(60), f"{len(processed)} of 600"
        eventually(
            lambda: fake_kafka.committed(opts["group_id"]) == {("rb", p): 150 for p in range(4)},
            20,
        )
        a.stop()
        b.stop()
        run_a.join()
        run_b.join()
    finally:
        a.close()
        b.close()
    where = collections.Counter((p, o) for _n, p, o in processed)
    assert len(where) == 600 and max(where.values()) == 1  # each record once
    assert {n for n, _p, _o in processed} == {"a", "b"}
    for key, items in seq.items():  # key order across the hand-over
        assert [o for _s, o in items] == sorted(o for _s, o in items), key


def test_restart_skips_records_done_beyond_the_committed_offset(fake_kafka):
    fake_kafka.create_topic("rs", 1)
    produce(fake_kafka.bootstrap, "rs", 30, keys=30)
    hold = threading.Event()
    first = Log()
    opts = dict(FAST, group_id="g-rs", ordering="unordered", max_concurrency=10)
    pc = kpax.ParallelConsumer(fake_kafka.bootstrap, drain_timeout_ms=200, **opts)

    def handle(rec):
        if rec.offset == 3:
            hold.wait(30)  # still running at the stop: not done
            return
        if first.end(rec) == 29:
            pc.stop()

    try:
        pc.subscribe(["rs"])
        Running(pc, handle).join()
    finally:
        pc.close()
        hold.set()
    offset, metadata = _committed_metadata(fake_kafka, "g-rs", "rs", 0)
    assert offset == 3
    assert decode(metadata, 3) == [(4, 30)]
    again = []
    pc2 = kpax.ParallelConsumer(fake_kafka.bootstrap, **opts)
    with pc2:
        pc2.subscribe(["rs"])

        def handle2(rec):
            again.append(rec.offset)

        run = Running(pc2, handle2)
        eventually(lambda: fake_kafka.committed("g-rs") == {("rs", 0): 30}, 20)
        assert pc2.metrics()["records-skipped-total"] == 26
        pc2.stop()
        run.join()
    assert again == [3]


def test_metadata_refused_as_too_large_falls_back_to_the_point(fake_kafka, monkeypatch, caplog):
    monkeypatch.setattr("kpax.testing.fake.commits.MAX_METADATA", 10)
    fake_kafka.create_topic("big", 1)
    produce(fake_kafka.bootstrap, "big", 20, keys=20)
    hold = threading.Event()
    log = Log()
    pc = kpax.ParallelConsumer(
        fake_kafka.bootstrap,
        group_id="g-big",
        ordering="unordered",
        drain_timeout_ms=200,
        **FAST,
    )

    def handle(rec):
        if rec.offset == 2:
            hold.wait(30)
            return
        if log.end(rec) == 19:
            pc.stop()

    caplog.set_level(logging.WARNING, "kpax.parallel")
    try:
        pc.subscribe(["big"])
        Running(pc, handle).join()
    finally:
        pc.close()
        hold.set()
    assert _committed_metadata(fake_kafka, "g-big", "big", 0) == (2, "")
    assert "refused a completed-offsets map as too large" in caplog.text


def test_close_from_another_thread_ends_run_and_commits(fake_kafka):
    fake_kafka.create_topic("cl", 1)
    produce(fake_kafka.bootstrap, "cl", 20, keys=20)
    log = Log()
    pc = kpax.ParallelConsumer(fake_kafka.bootstrap, group_id="g-cl", **FAST)

    def handle(rec):
        time.sleep(0.01)
        log.end(rec)

    pc.subscribe(["cl"])
    run = Running(pc, handle)
    eventually(lambda: log.count == 20, 20)
    pc.close()  # from this thread, while run() blocks in the other
    run.join()
    assert run.error is None
    assert fake_kafka.committed("g-cl") == {("cl", 0): 20}
    with pytest.raises(kpax.ClientClosedError):
        pc.run(handle)


def test_assign_without_subscribing(fake_kafka):
    fake_kafka.create_topic("as", 2)
    produce(fake_kafka.bootstrap, "as", 20, keys=4, partitions=2)
    log = Log()
    pc = kpax.ParallelConsumer(fake_kafka.bootstrap, group_id="g-as", **FAST)

    def handle(rec):
        if log.end(rec) == 10:
            pc.stop()

    with pc:
        pc.assign([TP("as", 1)])
        Running(pc, handle).join()
    assert {p for p, _k in log.done} == {1}
    assert fake_kafka.committed("g-as") == {("as", 1): 10}


# ---------------------------------------------------------------- asyncio face, signals


def test_asyncio_face_runs_tasks_up_to_max_concurrency(fake_kafka):
    fake_kafka.create_topic("aio", 1)
    produce(fake_kafka.bootstrap, "aio", 300, keys=300)

    async def main() -> tuple[int, int]:
        now = peak = done = 0
        async with kpax.aio.ParallelConsumer(
            fake_kafka.bootstrap, group_id="g-aio", max_concurrency=50, **FAST
        ) as pc:
            await pc.subscribe(["aio"])

            async def handle(rec):
                nonlocal now, peak, done
                now += 1
                peak = max(peak, now)
                await asyncio.sleep(0.02)
                now -= 1
                done += 1
                if done == 300:
                    pc.stop()

            await pc.run(handle)
        return peak, done

    peak, done = asyncio.run(main())
    assert (peak, done) == (50, 300)
    assert fake_kafka.committed("g-aio") == {("aio", 0): 300}


def _cpu_work(rec) -> int:  # (module level: a process pool pickles it)
    return sum(i * i for i in range(20_000)) + os.getpid() * 0


def test_asyncio_face_with_a_process_pool_for_cpu_bound_handlers(fake_kafka):
    fake_kafka.create_topic("pp", 2)
    produce(fake_kafka.bootstrap, "pp", 60, keys=6, partitions=2)

    async def main() -> float:
        async with kpax.aio.ParallelConsumer(
            fake_kafka.bootstrap, group_id="g-pp", max_concurrency=4, **FAST
        ) as pc:
            await pc.subscribe(["pp"])
            with concurrent.futures.ProcessPoolExecutor(2) as pool:
                run = asyncio.ensure_future(pc.run(_cpu_work, executor=pool))
                deadline = time.monotonic() + 30
                while pc.metrics().get("records-processed-total", 0) < 60:
                    assert time.monotonic() < deadline and not run.done()
                    await asyncio.sleep(0.05)
                pc.stop()
                await run
            return pc.metrics()["records-processed-total"]

    assert asyncio.run(main()) == 60
    assert fake_kafka.committed("g-pp") == {("pp", 0): 30, ("pp", 1): 30}


def test_sigterm_stops_run_gracefully(fake_kafka):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    fake_kafka.create_topic("sig", 1)
    produce(fake_kafka.bootstrap, "sig", 10, keys=10)
    before = signal.getsignal(signal.SIGTERM)
    count = Log()

    def handle(rec):
        if count.end(rec) == 10:
            os.kill(os.getpid(), signal.SIGTERM)

    with kpax.ParallelConsumer(fake_kafka.bootstrap, group_id="g-sig", **FAST) as pc:
        pc.subscribe(["sig"])
        pc.run(handle)  # returns on SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert fake_kafka.committed("g-sig") == {("sig", 0): 10}
