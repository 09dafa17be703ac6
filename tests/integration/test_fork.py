"""Clients across ``fork()``: in the child every call of a client made before
the fork raises ForkedClientError at once (no future that never completes, no
flush or close that hangs, no record silently dropped); the parent's client
keeps working; a client made in the child works.

Each child runs its calls and writes one line per call to a pipe as it
finishes, so a call that hangs is named when the parent gives up on it. The
calls are both methods bound before the fork (``p.flush``) and looked up in
the child (``lambda: p.send(...)``)."""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import os
import select
import signal
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import kpax
from kpax import TopicPartition as TP
from tests.wait import eventually

pytestmark = pytest.mark.integration

CHILD_LIMIT = 20.0  # seconds a child may take before the parent says it hung


def _attempt(w: int, name: str, call: Callable[[], Any]) -> None:
    started = time.monotonic()
    try:
        result = call()
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        line = {"call": name, "outcome": "ok", "value": repr(result)[:200]}
    except BaseException as exc:  # (the child reports everything)
        line = {"call": name, "outcome": type(exc).__name__, "message": str(exc)}
    line["seconds"] = time.monotonic() - started
    os.write(w, (json.dumps(line) + "\n").encode())


def in_child(calls: dict[str, Callable[[], Any]]) -> dict[str, dict[str, Any]]:
    """Fork; in the child, run each call (a coroutine's result is run to the
    end) and report; return {call: its line}. Fails if the child hangs."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(r)
            for name, call in calls.items():
                _attempt(w, name, call)
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    deadline = time.monotonic() + CHILD_LIMIT
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([r], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                done = [json.loads(x)["call"] for x in data.splitlines()]
                hung = next(n for n in calls if n not in done)
                pytest.fail(f"the child hung in {hung}() (finished: {done})")
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return {line["call"]: line for line in map(json.loads, data.splitlines())}


def assert_refused(results: dict[str, dict[str, Any]], *names: str) -> None:
    for name in names:
        line = results[name]
        assert line["outcome"] == "ForkedClientError", line
        assert "before a fork()" in line["message"] and "after fork" in line["message"], line
        assert line["seconds"] < 1.0, line  # at once


def test_producer_in_a_forked_child_refuses_every_call(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap, linger_ms=1) as p:
        assert p.send(t, b"before").result(30).offset == 0
        bound_send = p.send
        results = in_child(
            {
                "send": lambda: p.send(t, b"in the child"),
                "send (bound before)": lambda: bound_send(t, b"in the child"),
                "send(headers)": lambda: p.send(t, b"x", headers=[("h", b"1")]),
                "send_many": lambda: p.send_many(t, [b"a", b"b"]),
                "flush": p.flush,
                "partitions_for": lambda: p.partitions_for(t),
                "close": p.close,
            }
        )
        assert_refused(results, *results)
        # the parent's producer keeps working
        assert p.send(t, b"after").result(30).offset == 1
        p.flush()
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(t, 0)])
        got: list[bytes] = []
        eventually(lambda: got.extend(r.value for r in c.poll(0.2)) or len(got) >= 2)
    assert got == [b"before", b"after"]  # nothing of the child's


def test_consumer_admin_and_share_consumer_in_a_forked_child(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap) as p:
        p.send(t, b"0").result(30)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with (
        kpax.Consumer(kafka.bootstrap, group_id=group, auto_offset_reset="earliest") as c,
        kpax.Admin(kafka.bootstrap) as admin,
        kpax.ShareConsumer(kafka.bootstrap, group_id=f"s-{group}") as share,
    ):
        c.assign([TP(t, 0)])
        share.subscribe([t])
        results = in_child(
            {
                "poll": lambda: c.poll(0.5),
                "poll (bound before)": functools.partial(c.poll, 0.5),
                "iterate": lambda: next(iter(c)),
                "commit": c.commit,
                "position": lambda: c.position(TP(t, 0)),
                "consumer close": c.close,
                "describe_cluster": admin.describe_cluster,
                "list_topics": admin.list_topics,
                "admin close": admin.close,
                "share poll": lambda: share.poll(0.5),
                "share iterate": lambda: next(iter(share)),
                "share close": share.close,
            }
        )
        assert_refused(results, *results)
        # the parent's clients keep working
        got: list[bytes] = []
        eventually(lambda: got.extend(r.value for r in c.poll(0.2)) or got)
        assert got == [b"0"]
        c.commit()
        assert t in admin.list_topics()
        share.poll(0.1)


def test_asyncio_clients_forked_inside_a_running_loop(kafka, topic):
    t = topic(partitions=1)

    async def main() -> dict[str, dict[str, Any]]:
        async with (
            kpax.aio.Producer(kafka.bootstrap) as p,
            kpax.aio.Consumer(kafka.bootstrap) as c,
            kpax.aio.Admin(kafka.bootstrap) as admin,
        ):
            await p.send_and_wait(t, b"before")
            results = in_child(
                {
                    "send": lambda: p.send(t, b"child"),
                    "flush": p.flush,
                    "close": p.close,
                    "assign": lambda: c.assign([TP(t, 0)]),
                    "poll": c.poll,
                    "describe_cluster": admin.describe_cluster,
                }
            )
            assert (await p.send_and_wait(t, b"after")).offset == 1  # the parent's works
            return results

    assert_refused(
        asyncio.run(main()), "send", "flush", "close", "assign", "poll", "describe_cluster"
    )


def test_a_client_made_in_the_child_works(kafka, topic):
    t = topic(partitions=1)
    with kpax.Producer(kafka.bootstrap) as parent:
        parent.send(t, b"parent").result(30)

        def make_and_send() -> int:
            with kpax.Producer(kafka.bootstrap) as p:
                return p.send(t, b"child").result(30).offset

        results = in_child({"send": make_and_send})
    assert results["send"]["outcome"] == "ok" and results["send"]["value"] == "1"


_shared: kpax.Producer | None = None


def _mp_worker(out: Any) -> None:
    assert _shared is not None
    try:
        _shared.send("x", b"y")
        out.put("sent")
    except kpax.ForkedClientError as exc:
        out.put(f"ForkedClientError: {exc}")


def test_multiprocessing_fork_worker_gets_a_clear_error(kafka):
    global _shared
    ctx = multiprocessing.get_context("fork")
    with kpax.Producer(kafka.bootstrap) as p:
        _shared = p
        try:
            out = ctx.Queue()
            proc = ctx.Process(target=_mp_worker, args=(out,))
            proc.start()
            answer = out.get(timeout=CHILD_LIMIT)
            proc.join(CHILD_LIMIT)
        finally:
            _shared = None
    assert answer.startswith("ForkedClientError: send() on a kpax.Producer created in process")
