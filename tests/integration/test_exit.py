"""Records sent without flush() or close() before the interpreter exits are
delivered at exit, within a bound, or reported loudly with their count; a
client collected unclosed warns (ResourceWarning) and closes in the
background, and its I/O thread ends.

The exit cases run tiny scripts in a fresh interpreter against the real
broker (or a broker that accepts connections and never answers a Produce:
tests/hostile_server.py's ``silent`` mode)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import weakref

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.hostile_server import HostileServer
from tests.wait import eventually

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_script(
    code: str, *args: str, timeout: float = 60
) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    return proc, time.monotonic() - started


def read_all(bootstrap: str, topic: str, n: int) -> list[bytes]:
    got: list[bytes] = []
    with kpax.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(topic, 0)])
        eventually(lambda: got.extend(r.value for r in c.poll(0.2)) or len(got) >= n, timeout=30)
    return got


def test_records_sent_without_flush_are_delivered_at_exit(kafka, topic):
    """A module-level producer, one only a function held (collected before exit)
    and a forked child that exits normally: every record reaches the topic,
    nothing is reported, the child closes nothing of its parent's."""
    t = topic(partitions=1)
    proc, _ = run_script(
        """
        import gc, os, sys
        import kpax
        bootstrap, topic = sys.argv[1:]
        p = kpax.Producer(bootstrap, linger_ms=2000)  # (nothing sent before exit)
        for i in range(500):
            p.send(topic, b"%d" % i)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # the child's exit: atexit runs, and must not touch p
        os.waitpid(pid, 0)

        def scoped():
            q = kpax.Producer(bootstrap, linger_ms=2000)
            for i in range(500, 600):
                q.send(topic, b"%d" % i)

        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scoped()
            gc.collect()
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        print("exiting without flush", flush=True)
        """,
        kafka.bootstrap,
        t,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "exiting without flush"
    assert "not delivered" not in proc.stderr, proc.stderr
    got = read_all(kafka.bootstrap, t, 600)
    assert sorted(int(v) for v in got) == list(range(600))


def test_undeliverable_records_are_reported_with_their_count_within_the_bound():
    """The broker accepts the connection and never answers a Produce: the exit
    waits at most delivery_timeout_ms, then says how many records were lost;
    an asyncio producer whose loop has ended, and a producer collected
    unclosed (closed in the background), are reported too."""
    with HostileServer("silent") as server:
        proc, took = run_script(
            """
            import asyncio, gc, sys
            import kpax
            bootstrap = sys.argv[1]
            conf = dict(
                linger_ms=0, request_timeout_ms=1500, delivery_timeout_ms=3000,
                enable_idempotence=False, acks=1,
            )
            p = kpax.Producer(bootstrap, **conf)
            for i in range(7):
                p.send("lost", b"%d" % i)

            def scoped():  # a producer collected unclosed: closed in the background
                q = kpax.Producer(bootstrap, **conf)
                for i in range(5):
                    q.send("lost", b"%d" % i)

            scoped()
            gc.collect()

            async def main():
                a = kpax.aio.Producer(bootstrap, linger_ms=60000)
                await a.start()
                for i in range(3):
                    await a.send("lost-aio", b"%d" % i)
                globals()["kept"] = a  # (never closed; its loop ends with asyncio.run)

            asyncio.run(main())
            print("exiting", flush=True)
            """,
            server.address,
        )
    assert proc.stdout.strip() == "exiting", proc.stderr
    assert took < 3.0 + 12.0, took  # the bound (delivery_timeout_ms) and a start-up margin
    err = proc.stderr
    lost = (
        "kpax.Producer (client_id='kpax'): 7 record(s) sent without flush() or close() "
        "were not delivered before the interpreter exited"
    )
    assert lost in err and err.count("7 record(s)") == 1, err
    assert "kpax.aio.Producer (client_id='kpax'): 3 record(s)" in err, err
    assert "its event loop has ended" in err, err
    assert (
        "kpax.Producer (client_id='kpax'): 5 record(s) were not delivered: the producer was "
        "garbage-collected without close()" in err
    ), err


@pytest.mark.parametrize(
    "make",
    [
        "kpax.Producer(b)",
        "kpax.Consumer(b)",
        "kpax.Admin(b)",
        "kpax.ShareConsumer(b, group_id='g')",
    ],
)
def test_an_unclosed_client_warns_resource_warning(kafka, make):
    proc, _ = run_script(
        f"""
        import gc, sys, threading, time
        import kpax
        b = sys.argv[1]
        c = {make}
        del c
        gc.collect()
        deadline = time.monotonic() + 20
        while any(t.name.startswith("kpax") for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the I/O thread did not end"
            time.sleep(0.02)
        print("thread ended", flush=True)
        """,
        kafka.bootstrap,
    )
    name = make.split("(")[0]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "thread ended"
    # -W error::ResourceWarning: raised in __del__, so printed as "Exception ignored"
    assert f"ResourceWarning: unclosed {name}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("make", ["Producer", "Consumer", "Admin"])
def test_an_unclosed_asyncio_client_warns_resource_warning(kafka, make):
    proc, _ = run_script(
        f"""
        import asyncio, gc, sys
        import kpax
        b = sys.argv[1]

        async def main():
            c = kpax.aio.{make}(b)
            await c.start()

        asyncio.run(main())
        gc.collect()
        print("done", flush=True)
        """,
        kafka.bootstrap,
    )
    assert proc.stdout.strip() == "done", proc.stderr
    assert f"ResourceWarning: unclosed kpax.aio.{make}" in proc.stderr, proc.stderr


def test_an_unreferenced_producer_delivers_and_its_thread_ends(kafka, topic):
    t = topic(partitions=1)

    def io_threads() -> list[threading.Thread]:
        return [th for th in threading.enumerate() if th.name == "kpax-producer"]

    before = set(io_threads())

    def scoped() -> weakref.ref[kpax.Producer]:
        p = kpax.Producer(kafka.bootstrap, linger_ms=2000)
        for i in range(100):
            p.send(t, b"%d" % i)
        p.send(t, b"100", headers=[("h", b"v")])  # (the C path's slow path too)
        return weakref.ref(p)

    with pytest.warns(ResourceWarning, match="unclosed kpax.Producer"):
        ref = scoped()
        gc.collect()
    assert ref() is None  # nothing kept the producer alive
    eventually(lambda: not set(io_threads()) - before)  # its I/O thread ended
    got = read_all(kafka.bootstrap, t, 101)
    assert sorted(int(v) for v in got) == list(range(101))


def test_a_closed_client_neither_warns_nor_keeps_a_thread(kafka):
    group = f"g-{uuid.uuid4().hex[:8]}"
    with kpax.Consumer(kafka.bootstrap, group_id=group) as c:
        ref = weakref.ref(c)
    del c
    gc.collect()
    assert ref() is None
