"""Running one simulation: seeds, the virtual clocks, the loop and the in-process Kafka.

Role: :func:`simulate` runs ``scenario(sim)`` -- a coroutine function given a
:class:`~kpax.testing.sim.kafka.SimKafka` -- to its end on a fresh
:class:`~kpax.testing.sim.loop.VirtualTimeLoop`, with the module-level
``random`` seeded (kpax draws jitter and correlation ids from it) and, while it
runs, ``time.monotonic()`` and ``time.time()`` reading the loop's virtual clock
(:func:`virtual_clocks`): code that measures time with them (deadlines, record
timestamps) sees the same time as the loop's timers. (The C send path stamps
records with the real clock; the virtual one starts at the real time, so the
two agree to within the run's length.) Returns what the scenario
returned; a scenario stuck for good raises
:class:`~kpax.testing.sim.loop.SimulationDeadlock`, one busy at one instant
for ever :class:`~kpax.testing.sim.loop.SimulationLivelock`, one that runs past
``max_virtual`` seconds a TimeoutError.

The same seed gives the same run, as long as the scenario draws its own
randomness from a seeded ``random.Random`` and the process's ``PYTHONHASHSEED``
is the same (the order of sets of strings depends on it; ``make test-sim`` sets
it).

Imports: kpax.testing.sim.{kafka,loop} and the standard library.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.loop import VirtualTimeLoop

__all__ = ["simulate", "virtual_clocks"]

T = TypeVar("T")


@contextlib.contextmanager
def virtual_clocks(loop: VirtualTimeLoop, epoch: float) -> Iterator[None]:
    """While in the block, ``time.monotonic()`` is the loop's time,
    ``time.time()`` is ``epoch`` plus it, and ``uuid.uuid4()`` draws from the
    seeded ``random`` (member ids, transactional ids: names that decide who
    leads a group or gets which partition)."""
    saved = time.monotonic, time.time, uuid.uuid4
    time.monotonic = loop.time
    time.time = lambda: epoch + loop.time()
    uuid.uuid4 = lambda: uuid.UUID(int=random.getrandbits(128), version=4)
    try:
        yield
    finally:
        time.monotonic, time.time, uuid.uuid4 = saved


def simulate(
    scenario: Callable[[SimKafka], Awaitable[T]],
    *,
    seed: int = 0,
    brokers: int | Iterable[int] = 3,
    topics: Mapping[str, int] | None = None,
    config: Mapping[str, Any] | None = None,
    max_virtual: float = 3600.0,
) -> T:
    """See the module docstring."""
    random.seed(seed)
    loop = VirtualTimeLoop()
    # The wall clock now: records stamped by the C send path (which reads the
    # real clock) then agree with the fake broker's clock to within the run's
    # length (only timestamps depend on it, never what happens).
    epoch = time.time()
    try:
        with virtual_clocks(loop, epoch):
            sim = SimKafka(loop, brokers, topics=topics, config=config, seed=seed, epoch=epoch)

            async def bounded() -> T:
                return await asyncio.wait_for(scenario(sim), max_virtual)

            return loop.run_until_complete(bounded())
    finally:
        with virtual_clocks(loop, epoch):
            _cancel_all(loop)
        loop.close()


def _cancel_all(loop: VirtualTimeLoop) -> None:
    """End every task the run left behind, the killed processes' too.

    A killed process's tasks never ran again; left pending, they would be
    closed by the garbage collector at some later, arbitrary point (inside
    another test), running their ``finally`` blocks there. So the dead are
    brought back for their last rites: every task is cancelled and the loop
    runs until they end (at most 600 virtual seconds), then async generators are
    closed and what is left (a task whose wake-up the kill cancelled never
    ends) has its coroutine closed here, on this loop's clocks.
    """
    loop.dead.clear()
    tasks = [t for t in {*asyncio.all_tasks(loop), *loop.corpses} if not t.done()]
    loop.corpses.clear()
    stuck: list[asyncio.Task[Any]] = []
    if tasks:
        for task in tasks:
            task.cancel()
        del task  # (no reference outlives the collection below)
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.wait(tasks, timeout=600.0))
        stuck = [t for t in tasks if not t.done()]  # whose wake-up died with the kill
    del tasks
    with contextlib.suppress(BaseException):
        loop.run_until_complete(loop.shutdown_asyncgens())
    # A stuck task's coroutine is closed here (the scenario may still hold the
    # task), outside the loop: its ``async with`` exits and ``finally`` blocks
    # run with no running loop, so a client's close() there cannot start the
    # coroutines it made, which then warn "never awaited" once collected. It
    # is the killed process's cleanup not happening, as in a real kill; the
    # warnings would say nothing about kpax.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning
        )
        while stuck:
            task = stuck.pop()
            task._log_destroy_pending = False  # type: ignore[attr-defined]
            with contextlib.suppress(BaseException):  # (one that awaits in a finally)
                task.get_coro().close()
            del task
        gc.collect()
        gc.collect()
