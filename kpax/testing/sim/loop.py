"""An asyncio event loop on virtual time whose connections are in memory, for simulations.

Role: :class:`VirtualTimeLoop` runs kpax's asyncio clients exactly as the
standard loop does, with two differences that make a run a function of its
inputs alone:

- **time is virtual**: ``loop.time()`` starts at 0 and moves only when the
  loop has nothing to run -- it then jumps to the next timer (an
  ``asyncio.sleep(30)`` takes no wall time). A loop with nothing to run and no
  timer is stuck for good: :class:`SimulationDeadlock` is raised instead of
  blocking forever, naming the tasks still waiting;
- **connections are in memory**: ``create_connection(factory, host, port)``
  reaches a listener registered with :meth:`VirtualTimeLoop.listen` (the
  in-process Kafka's brokers); bytes written on one side are delivered to the
  other by loop callbacks, in order, after the delay the network was given
  (:class:`MemoryNetwork`). An address nobody listens on is refused
  (ConnectionRefusedError), as a closed port is.

**Processes**: a simulation may run several "processes" on the one loop --
clients that crash independently. :meth:`VirtualTimeLoop.spawn` runs a
coroutine as process ``name``; every task, callback and timer it makes (and
every connection it opens) belongs to it. :meth:`VirtualTimeLoop.kill` is a
SIGKILL: its connections are reset, and nothing of it ever runs again -- no
``finally``, no ``close()``, no last commit or LeaveGroup -- while the others go on.

Nothing here reads the wall clock or uses a thread, so the same program with
the same seeds (``random.seed`` for the module-level generator kpax uses for
jitter and correlation ids, and ``PYTHONHASHSEED`` for the order of sets of
strings) makes the same calls in the same order every time.

Imports: kpax.testing.sim.{process,transport} and the standard library.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from kpax.testing.sim.process import PROCESS
from kpax.testing.sim.transport import Acceptor, MemoryNetwork, MemoryTransport

__all__ = ["SimulationDeadlock", "SimulationLivelock", "VirtualTimeLoop"]

#: The most one jump of the clock may skip (as the standard loop's longest select).
_MAX_JUMP = 24 * 3600.0


class SimulationDeadlock(RuntimeError):
    """The loop has nothing to run, no timer and no byte in transit: every task
    waits for something that can never happen."""


class SimulationLivelock(RuntimeError):
    """Callbacks keep running while the clock stands still: something re-schedules
    itself at once for ever (a busy loop), and no timer can fire again."""


#: Loop rounds at one instant that make a livelock: each round runs every ready
#: callback, so this counts the longest chain of callbacks scheduling the next
#: with no time passing (a real program's chains are far shorter).
LIVELOCK_ROUNDS = 200_000


class _VirtualSelector:
    """What the base loop polls for I/O: nothing is ever ready on a socket (there
    are none); the time the loop would block is skipped instead."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._instant = -1.0
        self._rounds = 0

    def select(self, timeout: float | None) -> list[Any]:
        if timeout is None:
            raise SimulationDeadlock(self._loop.describe_waiting())
        loop = self._loop
        if not getattr(loop, "_ready", None):  # idle (else a 0 timeout: callbacks to run)
            loop.advance_to_next_timer(min(timeout, _MAX_JUMP))
        now = loop.time()
        if now != self._instant:
            self._instant, self._rounds = now, 0
        else:
            self._rounds += 1
            if self._rounds > LIVELOCK_ROUNDS:
                self._rounds = 0
                raise SimulationLivelock(
                    f"{LIVELOCK_ROUNDS:,} loop rounds at t={now:.6f} with callbacks "
                    f"to run every time and the clock standing still; "
                    f"{loop.describe_tasks()}"
                )
        return []

    def close(self) -> None:
        pass

    def get_map(self) -> dict[Any, Any]:
        return {}


class VirtualTimeLoop(asyncio.BaseEventLoop):
    """See the module docstring. ``loop.network`` holds the in-memory listeners
    and the per-link delays and faults."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        # (0: a timer fires only once the clock is past it -- never early, while
        # other callbacks run, at a time that then never comes)
        self._clock_resolution = 0.0
        self._selector = _VirtualSelector(self)
        self.network = MemoryNetwork(self)
        #: Processes killed: their callbacks never run again.
        self.dead: set[str] = set()
        self._handles: dict[str, weakref.WeakSet[asyncio.Handle]] = {}
        self._tasks: dict[str, weakref.WeakSet[asyncio.Task[Any]]] = {}
        #: The killed processes' tasks, held until the run's end (see ``kill``).
        self.corpses: list[asyncio.Task[Any]] = []

    # ------------------------------------------------------------ time

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (the loop does it when idle)."""
        self._now += seconds

    def advance_to_next_timer(self, seconds: float) -> None:
        """The loop is idle for ``seconds``, until its next timer: the clock moves
        to that timer's time at least (a timer a few ulps away would otherwise
        never come: ``now + 1e-16 == now`` in floating point, and code that waits
        for "the time left" until a deadline would wait for ever)."""
        scheduled: list[asyncio.TimerHandle] = getattr(self, "_scheduled", [])
        target = self._now + seconds
        if scheduled and seconds < _MAX_JUMP:
            # just past it: the base loop runs the timers strictly before now
            target = max(target, math.nextafter(scheduled[0].when(), math.inf))
        self._now = target

    # ------------------------------------------------------------ base loop hooks

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass  # call_soon_threadsafe: one thread here, the ready queue is seen next round

    def close(self) -> None:
        self.network.close_all()
        super().close()

    # ------------------------------------------------------------ processes

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as process ``name`` (see the module docstring)."""
        if name in self.dead:
            raise ValueError(f"process {name!r} was killed; spawn another name")
        ctx = contextvars.copy_context()
        ctx.run(PROCESS.set, name)
        task: asyncio.Task[Any] = ctx.run(self.create_task, coro, name=name)  # (a copy of ctx)
        return task

    def kill(self, name: str) -> int:
        """SIGKILL process ``name``: its connections reset, none of its callbacks,
        timers or tasks runs again. Returns how many connections it had open."""
        self.dead.add(name)
        for handle in list(self._handles.pop(name, ())):
            handle.cancel()
        # Its tasks are held here: garbage, they would be finalized by the
        # collector at any later moment (in the middle of other code), running
        # their cleanup there; simulate() ends them itself once the run is over.
        self.corpses.extend(self._tasks.pop(name, ()))
        return self.network.cut_process(name)

    def _owned(self, handle: asyncio.Handle, context: contextvars.Context | None) -> None:
        proc = PROCESS.get() if context is None else context.get(PROCESS)
        if proc is None:
            return
        if proc in self.dead:
            handle.cancel()
            return
        handles = self._handles.get(proc)
        if handles is None:
            handles = self._handles[proc] = weakref.WeakSet()
        handles.add(handle)

    def create_task(  # type: ignore[override]
        self,
        coro: Coroutine[Any, Any, Any],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        if context is None:  # (the keyword is Python 3.11's)
            task = super().create_task(coro, name=name)
        else:
            task = super().create_task(coro, name=name, context=context)  # type: ignore[call-arg,unused-ignore]
        proc = PROCESS.get() if context is None else context.get(PROCESS)
        if proc is not None:
            tasks = self._tasks.get(proc)
            if tasks is None:
                tasks = self._tasks[proc] = weakref.WeakSet()
            tasks.add(task)
        return task

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = super().call_soon(callback, *args, context=context)
        self._owned(handle, context)
        return handle

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        handle = super().call_at(when, callback, *args, context=context)
        self._owned(handle, context)
        return handle

    # ------------------------------------------------------------ connections

    def listen(self, host: str, port: int, acceptor: Acceptor) -> None:
        """Connections to ``host:port`` are handed to ``acceptor`` (see
        :class:`~kpax.testing.sim.transport.MemoryNetwork`)."""
        self.network.listen(host, port, acceptor)

    def unlisten(self, host: str, port: int) -> None:
        self.network.unlisten(host, port)

    async def create_connection(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        **kwargs: Any,
    ) -> tuple[MemoryTransport, asyncio.BaseProtocol]:
        if kwargs.get("ssl"):
            raise NotImplementedError("TLS is not simulated")
        if host is None or port is None:
            raise ValueError("create_connection needs a host and a port here")
        return await self.network.connect(protocol_factory, host, port)

    # ------------------------------------------------------------ diagnosis

    def describe_waiting(self) -> str:
        return (
            f"the simulation is stuck at t={self._now:.3f}s: nothing to run, no timer, no "
            f"bytes in transit; {self.describe_tasks()}"
        )

    def describe_tasks(self) -> str:
        """The tasks not done, and where each one is (the first 20)."""
        tasks = [t for t in asyncio.all_tasks(self) if not t.done()]
        names = ", ".join(sorted(t.get_name() + ": " + _where(t) for t in tasks)[:20])
        return f"{len(tasks)} task(s) not done: {names}"


def _where(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    frame = getattr(coro, "cr_frame", None)
    if frame is None:
        return getattr(coro, "__qualname__", repr(coro))
    return f"{frame.f_code.co_qualname}:{frame.f_lineno}"
