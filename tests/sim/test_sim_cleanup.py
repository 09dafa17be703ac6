"""What simulate() does with a killed process's tasks once the run is over.

A killed process's pending work (a timer, a connection's callbacks) never runs
again, so its cleanup can wait for ever: simulate() ends what it can and
collects the rest. Collected outside the loop, an ``async with`` block's exit
then runs with no running loop, as a kpax client's close() did in the
transaction simulation, leaving "coroutine ... was never awaited" warnings in
every run's report.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from types import TracebackType

from kpax.testing.sim import simulate
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.loop import VirtualTimeLoop


async def _cleanup() -> None:
    await asyncio.sleep(0)


class _ClosesLikeAClient:
    """Its exit waits for a cleanup coroutine, bounded, swallowing errors (as close() does)."""

    async def __aenter__(self) -> _ClosesLikeAClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(_cleanup(), 1.0)


class _WaitsForWhatTheKillCancelled:
    """Its exit waits for a future a timer of the process would have resolved."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = loop.create_future()
        loop.call_later(100.0, self.done.set_result, None)

    async def __aenter__(self) -> _WaitsForWhatTheKillCancelled:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.done


def test_a_killed_process_stuck_in_its_cleanup_leaves_no_never_awaited_warning() -> None:
    async def process() -> None:
        async with _ClosesLikeAClient(), _WaitsForWhatTheKillCancelled():
            await asyncio.sleep(50.0)

    async def scenario(sim: SimKafka) -> str:
        loop = sim.loop
        assert isinstance(loop, VirtualTimeLoop)
        task = loop.spawn("victim", process())
        await asyncio.sleep(1.0)
        loop.kill("victim")
        await asyncio.sleep(1.0)
        return "done" if not task.done() else "ended early"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert simulate(scenario, seed=1, brokers=1) == "done"
        gc.collect()  # what simulate() left for the collector is finalized here
    never_awaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []
