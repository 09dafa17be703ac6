"""kpax.ParallelConsumer against a real broker: the targets of issue 32.

- **Speed-up**: 20,000 keyed records (1,000 keys, 4 partitions), a handler that
  sleeps 5 ms, ``max_concurrency=200``: at least 30x faster than the plain
  consumer loop, every key's records processed in offset order. The plain loop
  (poll, handle each record, commit after each poll) would take 100 s on the
  whole topic, so it is timed on its first 500 records and extrapolated: its
  time per record is the handler's sleep plus the loop's cost, the same for
  every record (one at a time, nothing overlaps), so 20,000 records take 40
  times as long as 500.
- **SIGKILL and restart**: a child process consumes with a parallel consumer
  and is SIGKILLed in the middle; a second child finishes. Every record is
  processed at least once, records processed by both runs are at most the
  window (``max_records_in_flight``), and the second run redoes no record
  before the committed offset nor any the committed metadata records as done.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.parallel.codec import decode
from tests.wait import eventually

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, n: int, keys: int) -> None:
    with kpax.Producer(bootstrap, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, key=b"k%d" % (i % keys))
        p.flush(30)


def test_thirty_times_the_plain_loop_in_key_order(kafka, topic):
    name = topic(4)
    n, keys = 20_000, 1000
    _produce(kafka.bootstrap, name, n, keys)
    lock = threading.Lock()
    done: dict[tuple[int, bytes], list[int]] = collections.defaultdict(list)
    marks: list[float] = []
    pc = kpax.ParallelConsumer(
        kafka.bootstrap,
        group_id="pc-" + uuid.uuid4().hex[:8],
        auto_offset_reset="earliest",
        ordering="key",
        max_concurrency=200,
    )

    count = [0]

    def handle(rec):
        if not marks:
            marks.append(time.monotonic())  # (a race of the first few: harmless)
        time.sleep(0.005)
        with lock:
            done[rec.partition, rec.key].append(rec.offset)
            count[0] += 1
            if count[0] == n:
                marks.append(time.monotonic())
                pc.stop()

    with pc:
        pc.subscribe([name])
        pc.run(handle, handle_signals=False)
    parallel = marks[-1] - marks[0]
    for where, offsets in done.items():
        assert offsets == sorted(offsets), where
    assert sum(map(len, done.values())) == n

    sample = 500
    with kpax.Consumer(
        kafka.bootstrap,
        group_id="plain-" + uuid.uuid4().hex[:8],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as c:
        c.subscribe([name])
        got, start = 0, None
        while got < sample:
            records = c.poll(1.0)
            for _rec in records:
                if start is None:
                    start = time.monotonic()
                time.sleep(0.005)
                got += 1
            if records:
                c.commit()
        plain = (time.monotonic() - start) * n / got
    speedup = plain / parallel
    print(
        f"\nparallel consumer: {n} records in {parallel:.2f}s; plain loop: {got} in "
        f"{plain * got / n:.2f}s, {n} extrapolated to {plain:.1f}s; speed-up {speedup:.1f}x"
    )
    assert speedup >= 30, (parallel, plain)


CHILD = textwrap.dedent(
    """
    import os, sys, time
    import kpax
    bootstrap, group, topic, out = sys.argv[1:5]
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def handle(rec):
        time.sleep(0.02)
        os.write(fd, b"%d %d\\n" % (rec.partition, rec.offset))

    pc = kpax.ParallelConsumer(
        bootstrap, group_id=group, group_instance_id="the-child", session_timeout_ms=6000,
        auto_offset_reset="earliest", max_concurrency=50, max_records_in_flight=1000,
        commit_interval_ms=500,
    )
    pc.subscribe([topic])
    pc.run(handle)
    pc.close()
    """
)


def _lines(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        p, o = line.split()
        out.append((int(p), int(o)))
    return out


def test_sigkill_in_the_middle_then_restart(kafka, topic, tmp_path):
    name = topic(4)
    n, window = 8000, 1000
    _produce(kafka.bootstrap, name, n, keys=400)
    group = "pc-kill-" + uuid.uuid4().hex[:8]
    first, second = tmp_path / "first", tmp_path / "second"
    args = [sys.executable, "-c", CHILD, kafka.bootstrap, group, name]

    child = subprocess.Popen([*args, str(first)])
    try:
        eventually(lambda: len(_lines(first)) >= 2500, 60, interval=0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    run1 = _lines(first)
    tps = [TP(name, p) for p in range(4)]
    with kpax.Consumer(kafka.bootstrap, group_id=group) as c:
        committed = c.committed(tps)
        ends = c.end_offsets(tps)
    everything = {(tp.partition, o) for tp in tps for o in range(ends[tp])}
    assert len(everything) == n
    points = {tp.partition: om.offset if om is not None else 0 for tp, om in committed.items()}
    recorded: set[tuple[int, int]] = set()
    for tp, om in committed.items():
        if om is not None:  # (a partition the first run never reached: none)
            for start, end in decode(om.metadata, om.offset) or []:
                recorded.update((tp.partition, o) for o in range(start, end))

    child = subprocess.Popen([*args, str(second)])
    try:

        def all_done() -> bool:
            return {*run1, *_lines(second)} >= everything

        eventually(all_done, 90, interval=0.1)
        child.send_signal(signal.SIGTERM)  # a graceful stop
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
    run2 = _lines(second)
    assert len(run1) == len(set(run1)) and len(run2) == len(set(run2))
    assert {*run1, *run2} == everything  # every record at least once
    duplicates = set(run1) & set(run2)
    before_point = [(p, o) for p, o in run2 if o < points[p]]
    print(
        f"\nSIGKILL after {len(run1)} records (committed offsets "
        f"{[points[p] for p in range(4)]}, {len(recorded)} more recorded "
        f"done in the metadata); the restart processed {len(run2)}: {len(duplicates)} "
        f"duplicates (window {window}), {len(before_point)} before the committed offsets, "
        f"{len(set(run2) & recorded)} of those recorded done"
    )
    assert len(duplicates) <= window
    assert not before_point  # nothing before the committed point redone
    assert not set(run2) & recorded  # nor what the metadata recorded as done
