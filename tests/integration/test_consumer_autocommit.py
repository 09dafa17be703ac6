"""Auto-commit is at-least-once (the Java consumer's rule), against a real broker.

An application that crashes while it processes records must find, after a
restart, every record it had not finished: automatic commits (the
``auto_commit_interval_ms`` timer, revocation, close) send only what the
application moved past -- for ``poll()`` the records of earlier polls, for
iteration the records before the one in hand. A child process consumes with a
100 ms auto-commit interval, reports each record it starts and finishes, hangs
on one record and is SIGKILLed there; the group's committed offset must not be
past that record, and a restart reads it and everything after it.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from typing import Any

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.integration.test_consumer import produce

pytestmark = pytest.mark.integration

FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300, "auto_offset_reset": "earliest"}

#: The application: auto-commit every 100 ms, batches of 10, each record
#: "processed" in 20 ms and reported; on offset ``stop`` it hangs (and is killed).
CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    import kpax
    bootstrap, group, topic, face, mode, stop = sys.argv[1:7]
    stop = int(stop)
    opts = dict(
        group_id=group, auto_offset_reset="earliest", auto_commit_interval_ms=100,
        max_poll_records=10, session_timeout_ms=6000, heartbeat_interval_ms=300,
    )

    def say(*words):
        print(*words, flush=True)

    def handle(rec):
        say("start", rec.offset)
        if rec.offset == stop:
            say("hang", rec.offset)
            time.sleep(600)
        time.sleep(0.02)
        say("done", rec.offset)

    async def ahandle(rec):
        say("start", rec.offset)
        if rec.offset == stop:
            say("hang", rec.offset)
            await asyncio.sleep(600)  # the loop (and its auto-commit timer) runs on
        await asyncio.sleep(0.02)
        say("done", rec.offset)

    if face == "sync":
        c = kpax.Consumer(bootstrap, **opts)
        c.subscribe([topic])
        if mode == "poll":
            while True:
                recs = c.poll(1.0)
                if recs:
                    say("batch", recs[0].offset, recs[-1].offset)
                for rec in recs:
                    handle(rec)
        else:
            for rec in c:
                handle(rec)
    else:
        async def main():
            async with kpax.aio.Consumer(bootstrap, **opts) as c:
                await c.subscribe([topic])
                if mode == "poll":
                    while True:
                        recs = await c.poll(1.0)
                        if recs:
                            say("batch", recs[0].offset, recs[-1].offset)
                        for rec in recs:
                            await ahandle(rec)
                else:
                    async for rec in c:
                        await ahandle(rec)

        asyncio.run(main())
    """
)


def gid() -> str:
    return "g-" + uuid.uuid4().hex[:10]


def group_offset(bootstrap: str, group: str, tp: TP) -> int | None:
    with kpax.Admin(bootstrap) as a:
        om = a.list_group_offsets(group).get(tp)
    return None if om is None else om.offset


class Child:
    """The child process and its report lines (read by a thread)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[list[str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def until(self, word: str, timeout: float = 60.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"the child never said {word!r}; it said {self.seen}"
            try:
                words = self.lines.get(timeout=left).split()
            except queue.Empty:
                continue
            self.seen.append(words)
            if words and words[0] == word:
                return words

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.mark.parametrize(
    ("face", "mode", "stop"),
    [
        ("sync", "poll", 13),
        ("sync", "iter", 13),
        ("sync", "iter", 0),
        ("aio", "poll", 13),
        ("aio", "iter", 13),
    ],
)
def test_a_crash_mid_batch_leaves_nothing_unprocessed_committed(
    kafka: Any, topic: Any, face: str, mode: str, stop: int
) -> None:
    t = topic()
    tp = TP(t, 0)
    produce(kafka.bootstrap, t, 100)
    g = gid()
    child = Child(kafka.bootstrap, g, t, face, mode, str(stop))
    try:
        child.until("hang")
        done = [int(w[1]) for w in child.seen if w[0] == "done"]
        assert done == list(range(stop))  # the first unprocessed record is `stop`
        if mode == "poll":
            batch = [int(x) for x in [w for w in child.seen if w[0] == "batch"][-1][1:]]
            assert batch[0] <= stop < batch[1], batch  # killed mid-batch
            # what earlier polls returned (Java: committed by the poll that got this batch)
            expected = batch[0]
        else:
            expected = stop  # the records before the one in hand
        # Watch the committed offset for 15 auto-commit intervals while the child
        # hangs on `stop` (a commit past it would be a loss); it must reach `expected`.
        seen: list[int | None] = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline or (seen[-1] or 0) < expected:
            seen.append(group_offset(kafka.bootstrap, g, tp))
            assert time.monotonic() < deadline + 15, f"committed offsets {seen}"
            time.sleep(0.05)
        worst = max(o for o in seen if o is not None) if any(o is not None for o in seen) else None
        assert worst is not None and worst <= stop, (
            f"committed offset {worst} while the application was on offset {stop} "
            f"(processed: {done}); committed over time: {sorted(set(filter(None, seen)))}"
        )
        assert seen[-1] == expected
    finally:
        child.kill()
    assert group_offset(kafka.bootstrap, g, tp) == expected
    # A restart (the same group) gets every record not processed, from `expected` on.
    with kpax.Consumer(kafka.bootstrap, group_id=g, enable_auto_commit=False, **FAST) as c:
        c.assign([tp])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while (not got or got[-1] < 99) and time.monotonic() < deadline:
            got.extend(r.offset for r in c.poll(0.5))
    assert got == list(range(expected, 100))


# ---------------------------------------------------------------- revocation


def _hold_a_batch(c: kpax.Consumer, total: int) -> list[kpax.ConsumerRecord]:
    """Poll until ``total`` records were returned: every batch but the last is
    processed (a later poll came); the last one, returned, is in hand."""
    got: list[list[kpax.ConsumerRecord]] = []
    deadline = time.monotonic() + 30
    while sum(map(len, got)) < total:
        assert time.monotonic() < deadline, f"{sum(map(len, got))} of {total} records"
        recs = c.poll(0.2)
        if recs:
            got.append(recs)
    assert len(got) >= 2, "one batch only: nothing processed before the one in hand"
    return got[-1]


def _second_member_joins(bootstrap: str, g: str, t: str, also: Any = None) -> set[TP]:
    """A second member joins (the first one's partitions are revoked); returns
    its assignment once it has one, calling ``also()`` while it waits."""
    with kpax.Consumer(
        bootstrap,
        group_id=g,
        enable_auto_commit=False,
        partition_assignment_strategy="range",
        **FAST,
    ) as c2:
        c2.subscribe([t])
        deadline = time.monotonic() + 30
        while not c2.assignment():
            assert time.monotonic() < deadline, "the second member got no partition"
            c2.poll(0.1)
            if also is not None:
                also()
        return c2.assignment()


def test_a_revocation_while_the_application_holds_a_batch_does_not_commit_it(
    kafka: Any, topic: Any
) -> None:
    t = topic(partitions=2)
    tp = TP(t, 0)
    produce(kafka.bootstrap, t, 30, partition=0)
    g = gid()
    with kpax.Consumer(
        kafka.bootstrap,
        group_id=g,
        max_poll_records=10,
        auto_commit_interval_ms=60000,  # only the revocation commits here
        partition_assignment_strategy="range",
        **FAST,
    ) as c1:
        c1.subscribe([t])
        held = _hold_a_batch(c1, 20)
        first_unprocessed = held[0].offset
        assert 0 < first_unprocessed < 20 <= held[-1].offset + 1
        assert group_offset(kafka.bootstrap, g, tp) is None
        # c1 never polls again: its revocation waits (half the 6 s session timeout)
        # for it to move past the batch, then commits only what it had processed
        _second_member_joins(kafka.bootstrap, g, t)
        assert group_offset(kafka.bootstrap, g, tp) == first_unprocessed


def test_a_revocation_commits_a_batch_the_application_finishes_meanwhile(
    kafka: Any, topic: Any
) -> None:
    t = topic(partitions=2)
    tp = TP(t, 0)
    produce(kafka.bootstrap, t, 20, partition=0)
    g = gid()
    with kpax.Consumer(
        kafka.bootstrap,
        group_id=g,
        max_poll_records=10,
        auto_commit_interval_ms=60000,
        partition_assignment_strategy="range",
        **FAST,
    ) as c1:
        c1.subscribe([t])
        held = _hold_a_batch(c1, 20)
        assert held[-1].offset == 19
        group = c1.aio.group
        assert group is not None

        def c1_polls_once_the_rebalance_began() -> None:
            if not group.stable.is_set():  # c1 is rejoining (eager: revoking first)
                assert c1.poll(0) == []  # the held batch is processed: no duplicate

        assignment = _second_member_joins(
            kafka.bootstrap, g, t, also=c1_polls_once_the_rebalance_began
        )
        # Java's rebalance waits for poll(): nothing the application finished is
        # read again by the next owner.
        assert group_offset(kafka.bootstrap, g, tp) == 20
        assert assignment


# ---------------------------------------------------------------- close


class Boom(Exception):
    pass


def _expected(batches: list[list[int]], mode: str, ending: str, stop: int) -> int:
    if mode == "iter":
        return stop if ending == "raise" else stop + 1
    batch = next(b for b in batches if b[0] <= stop <= b[-1])
    return batch[0] if ending == "raise" else batch[-1] + 1


def _sync_loop(
    c: kpax.Consumer, mode: str, ending: str, stop: int, batches: list[list[int]]
) -> None:
    def handle(rec: kpax.ConsumerRecord) -> bool:
        if rec.offset == stop and ending == "raise":
            raise Boom(rec.offset)  # the record in hand is not processed
        return rec.offset == stop  # processed; stop the loop here

    if mode == "poll":
        while True:
            recs = c.poll(0.5)
            batches.append([r.offset for r in recs])
            stopped = [handle(r) for r in recs]  # the whole batch is processed
            if any(stopped):
                return
    for rec in c:
        if handle(rec):
            break


async def _aio_loop(
    c: kpax.aio.Consumer, mode: str, ending: str, stop: int, batches: list[list[int]]
) -> None:
    def handle(rec: kpax.ConsumerRecord) -> bool:
        if rec.offset == stop and ending == "raise":
            raise Boom(rec.offset)
        return rec.offset == stop

    if mode == "poll":
        while True:
            recs = await c.poll(0.5)
            batches.append([r.offset for r in recs])
            stopped = [handle(r) for r in recs]
            if any(stopped):
                return
    async for rec in c:
        if handle(rec):
            break


@pytest.mark.parametrize(
    ("face", "mode", "ending", "how"),
    [
        ("sync", "poll", "raise", "subscribe"),
        ("sync", "poll", "normal", "subscribe"),
        ("sync", "iter", "raise", "subscribe"),
        ("sync", "iter", "break", "subscribe"),
        ("sync", "poll", "raise", "assign"),
        ("sync", "iter", "raise", "assign"),
        ("aio", "poll", "raise", "subscribe"),
        ("aio", "poll", "normal", "subscribe"),
        ("aio", "iter", "raise", "subscribe"),
        ("aio", "iter", "break", "subscribe"),
    ],
)
def test_close_commits_what_was_processed(
    kafka: Any, topic: Any, face: str, mode: str, ending: str, how: str
) -> None:
    """``with consumer:`` left by an exception commits only what the application
    moved past; a plain close (after the loop, or a ``break`` after processing a
    record) commits everything poll or iteration returned, as Java's close."""
    t = topic()
    tp = TP(t, 0)
    produce(kafka.bootstrap, t, 40)
    g = gid()
    stop = 13
    opts = dict(group_id=g, max_poll_records=10, auto_commit_interval_ms=60000, **FAST)
    batches: list[list[int]] = []
    if face == "sync":
        try:
            with kpax.Consumer(kafka.bootstrap, **opts) as c:
                if how == "assign":
                    c.assign([tp])
                else:
                    c.subscribe([t])
                _sync_loop(c, mode, ending, stop, batches)
        except Boom:
            assert ending == "raise"
    else:

        async def run() -> None:
            try:
                async with kpax.aio.Consumer(kafka.bootstrap, **opts) as c:
                    await c.subscribe([t])
                    await _aio_loop(c, mode, ending, stop, batches)
            except Boom:
                assert ending == "raise"

        asyncio.run(run())
    assert group_offset(kafka.bootstrap, g, tp) == _expected(batches, mode, ending, stop)


@pytest.mark.parametrize("face", ["sync", "aio"])
def test_a_traced_consumer_left_by_an_exception_commits_only_what_was_processed(
    kafka: Any, topic: Any, face: str
) -> None:
    pytest.importorskip("opentelemetry")
    import kpax.otel

    t = topic()
    tp = TP(t, 0)
    produce(kafka.bootstrap, t, 40)
    g = gid()
    opts = dict(group_id=g, auto_commit_interval_ms=60000, **FAST)
    with pytest.raises(Boom):
        if face == "sync":
            with kpax.otel.instrument(kpax.Consumer(kafka.bootstrap, **opts)) as c:
                c.subscribe([t])
                for rec in c:
                    if rec.offset == 13:
                        raise Boom
        else:

            async def run() -> None:
                async with kpax.otel.instrument(kpax.aio.Consumer(kafka.bootstrap, **opts)) as c:
                    await c.subscribe([t])
                    async for rec in c:
                        if rec.offset == 13:
                            raise Boom

            asyncio.run(run())
    assert group_offset(kafka.bootstrap, g, tp) == 13
