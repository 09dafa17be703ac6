"""kpax.parallel.workers.HandlerThreads: handler calls on threads, their
outcomes back on the event loop in batches (one wake-up for many), exceptions
delivered as outcomes; ``submit`` works as any executor's."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kpax.parallel.workers import HandlerThreads


def test_outcomes_come_back_on_the_loop_in_batches():
    async def main() -> tuple[list, list[int], set[str]]:
        loop = asyncio.get_running_loop()
        pool = HandlerThreads(8)
        outcomes: list = []
        batches: list[int] = []
        names: set[str] = set()
        done = asyncio.Event()

        def deliver(batch):
            assert threading.current_thread() is threading.main_thread()  # on the loop
            batches.append(len(batch))
            outcomes.extend(batch)
            if len(outcomes) == 200:
                done.set()

        def handler(i):
            names.add(threading.current_thread().name)
            time.sleep(0.001)
            if i % 50 == 7:
                raise ValueError(i)

        pool.bind(loop, deliver)
        for i in range(200):
            pool.call(handler, i, f"token-{i}")
        await asyncio.wait_for(done.wait(), 20)
        pool.shutdown()
        return outcomes, batches, names

    outcomes, batches, names = asyncio.run(main())
    assert sorted(t for t, _ in outcomes) == sorted(f"token-{i}" for i in range(200))
    failed = {t: repr(e) for t, e in outcomes if e is not None}
    assert failed == {f"token-{i}": f"ValueError({i})" for i in (7, 57, 107, 157)}
    assert len(batches) < 200  # several outcomes per wake-up
    assert len(names) == 8 and all(n.startswith("kpax-parallel-handler-") for n in names)


def test_submit_is_an_executors():
    pool = HandlerThreads(2)
    assert pool.submit(lambda a, b: a + b, 2, b=3).result(5) == 5
    with pytest.raises(KeyError):
        pool.submit(lambda: {}["x"]).result(5)
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(print)
