"""A seeded schedule of faults for a simulation: what goes wrong, where and when.

Role: :class:`Chaos` runs on the simulation's loop beside the clients under
test and, at random moments drawn from its own ``random.Random(seed)``, does
one of the things that happen to a real cluster (:data:`KINDS`):

- ``move_leader``: a partition's leadership moves to another live broker (its
  leader epoch goes up; the old leader answers NOT_LEADER_OR_FOLLOWER);
- ``offline``: a partition has no leader for a while, then gets one back;
- ``cut``: every connection of a broker is reset (bytes in transit both ways
  lost), as when a network path or a process dies;
- ``restart``: a broker stops (connections reset, new ones refused, its
  partitions and coordinators move to live brokers) and comes back later;
- ``error``: the next request of a kind (Produce, Fetch, a group API...) to
  some broker is answered with a retriable error;
- ``drop_after``: the next such request is applied and its connection
  dropped unanswered (the client cannot know it was applied);
- ``delay``: a broker's links get slow for a while;
- ``move_coordinator``: a group's (or a transactional id's) coordinator moves
  to another broker.

Every fault it made is in :attr:`Chaos.log` with the virtual time, so a failing
run says what happened; the same seed makes the same faults at the same times
in the same run. ``kinds`` narrows what it may do (a scenario about groups needs
no partition offline for minutes), ``brokers_alive`` keeps at least that many
brokers up.

Imports: kpax.testing.sim.kafka, kpax.testing.fake.codes and the standard library.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kpax.testing.fake.codes import code_of_name
from kpax.testing.sim.kafka import SimKafka

__all__ = ["DEFAULT_APIS", "KINDS", "RETRIABLE_ERRORS", "Chaos"]

KINDS = (
    "move_leader",
    "offline",
    "cut",
    "restart",
    "error",
    "drop_after",
    "delay",
    "move_coordinator",
)

#: Retriable errors an ``error`` fault answers with, per API.
RETRIABLE_ERRORS: dict[str, tuple[str, ...]] = {
    "Produce": ("NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS"),
    "Fetch": ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH", "FETCH_SESSION_ID_NOT_FOUND"),
    "Metadata": ("LEADER_NOT_AVAILABLE",),
    "ListOffsets": ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"),
    "FindCoordinator": ("COORDINATOR_NOT_AVAILABLE",),
    "OffsetCommit": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "OffsetFetch": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "JoinGroup": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "SyncGroup": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "Heartbeat": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "ConsumerGroupHeartbeat": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "InitProducerId": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "AddPartitionsToTxn": ("CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS"),
    "AddOffsetsToTxn": ("CONCURRENT_TRANSACTIONS", "NOT_COORDINATOR"),
    "TxnOffsetCommit": ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"),
    "EndTxn": ("CONCURRENT_TRANSACTIONS", "NOT_COORDINATOR"),
}
#: The APIs ``error`` and ``drop_after`` hit unless told (the transaction APIs
#: only when named: a scenario with transactions passes ``apis``).
DEFAULT_APIS = tuple(k for k in RETRIABLE_ERRORS if "Txn" not in k)


@dataclass
class Chaos:
    """See the module docstring. ``topics``: the topics whose partitions may move
    or go offline; ``groups``: the groups whose coordinator may move;
    ``transactional_ids``: those whose transaction coordinator may move too;
    ``apis``: the APIs ``error`` and ``drop_after`` may hit; ``mean_gap``: mean
    seconds between faults (exponential); ``max_outage``: the longest a
    partition stays offline, a broker down or a link slow."""

    sim: SimKafka
    seed: int
    topics: Sequence[str] = ()
    groups: Sequence[str] = ()
    kinds: Sequence[str] = KINDS
    transactional_ids: Sequence[str] = ()
    apis: Sequence[str] = DEFAULT_APIS
    mean_gap: float = 0.5
    max_outage: float = 2.0
    brokers_alive: int = 1
    #: (virtual time, what was done), in order.
    log: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {KINDS}")
        self.rng = random.Random(self.seed)
        self._task: asyncio.Task[None] | None = None
        #: Outages to end: (is it a broker start, how to end it).
        self._pending: dict[asyncio.TimerHandle, tuple[bool, Callable[[], None]]] = {}

    # ------------------------------------------------------------ running

    def start(self) -> Chaos:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="chaos")
        return self

    async def stop(self) -> None:
        """No more faults; what is broken is mended at once (brokers started,
        partitions online, links fast)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        pending, self._pending = self._pending, {}
        for handle in pending:
            handle.cancel()
        # brokers first: a partition whose replicas were all down comes back with them
        for _broker, mend in sorted(pending.values(), key=lambda fm: not fm[0]):
            mend()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.rng.expovariate(1.0 / self.mean_gap))
            kind = self.rng.choice(list(self.kinds))
            done = getattr(self, "_" + kind)()
            if done:
                self.log.append((round(self.sim.loop.time(), 6), done))

    def _later(
        self, delay: float, fn: Callable[[], object], what: str, *, broker: bool = False
    ) -> None:
        """``fn`` (the end of an outage) in ``delay`` seconds, or at :meth:`stop`."""
        loop = self.sim.loop

        def mend() -> None:
            fn()
            self.log.append((round(loop.time(), 6), what))

        def run() -> None:
            self._pending.pop(handle, None)
            mend()

        handle = loop.call_later(delay, run)
        self._pending[handle] = (broker, mend)

    def report(self) -> str:
        """The faults made, one per line (for an assertion message)."""
        return "\n".join(f"  t={t:.3f}s {what}" for t, what in self.log) or "  (none)"

    # ------------------------------------------------------------ what it knows

    def _alive(self) -> list[int]:
        state = self.sim.cluster.state
        return sorted(n for n, b in state.brokers.items() if b.alive)

    def _partition(self) -> tuple[str, int] | None:
        state = self.sim.cluster.state
        choices = [
            (t, p)
            for t in self.topics
            if t in state.topics
            for p in range(len(state.topics[t].partitions))
        ]
        return self.rng.choice(choices) if choices else None

    def _outage(self) -> float:
        return self.rng.uniform(0.05, self.max_outage)

    # ------------------------------------------------------------ the faults

    def _move_leader(self) -> str | None:
        tp = self._partition()
        alive = self._alive()
        if tp is None:
            return None
        p = self.sim.cluster.state.partition(*tp)
        if p is None or p.leader < 0:
            return None
        others = [n for n in alive if n != p.leader and n in p.replicas] or [
            n for n in alive if n != p.leader
        ]
        if not others:
            return None
        to = self.rng.choice(others)
        self.sim.call(lambda c: c.move_leader(tp[0], tp[1], to))
        return f"leader of {tp[0]}-{tp[1]} moved to broker {to}"

    def _offline(self) -> str | None:
        tp = self._partition()
        if tp is None:
            return None
        p = self.sim.cluster.state.partition(*tp)
        if p is None or p.leader < 0:
            return None
        self.sim.call(lambda c: c.set_offline(*tp))
        self._later(self._outage(), lambda: self._online(tp), f"{tp[0]}-{tp[1]} online again")
        return f"{tp[0]}-{tp[1]} offline"

    def _online(self, tp: tuple[str, int]) -> None:
        p = self.sim.cluster.state.partition(*tp)
        if p is None or p.leader >= 0:
            return
        if any(self.sim.cluster.state.is_alive(r) for r in p.replicas):
            self.sim.call(lambda c: c.set_online(*tp))
        # (else it comes back with the first of its replicas to start)

    def _cut(self) -> str | None:
        alive = self._alive()
        if not alive:
            return None
        node = self.rng.choice(alive)
        n = self.sim.cut(node)
        return f"{n} connection(s) of broker {node} cut"

    def _restart(self) -> str | None:
        alive = self._alive()
        if len(alive) <= self.brokers_alive:
            return None
        node = self.rng.choice(alive)
        self.sim.stop_broker(node)
        self._later(
            self._outage(),
            lambda: self.sim.start_broker(node),
            f"broker {node} started",
            broker=True,
        )
        return f"broker {node} stopped"

    def _error(self) -> str | None:
        api = self.rng.choice(list(self.apis))
        error = self.rng.choice(RETRIABLE_ERRORS[api])
        nth = self.rng.randint(1, 3)
        self.sim.call(lambda c: c.inject(api, error=code_of_name(error), nth=nth))
        return f"the {_ordinal(nth)} {api} from now answered {error}"

    def _drop_after(self) -> str | None:
        api = self.rng.choice(
            [a for a in self.apis if a in ("Produce", "OffsetCommit")] or ["Produce"]
        )
        nth = self.rng.randint(1, 3)
        self.sim.call(lambda c: c.inject(api, drop="after", nth=nth))
        return f"the {_ordinal(nth)} {api} from now applied, its connection dropped unanswered"

    def _delay(self) -> str | None:
        alive = self._alive()
        if not alive:
            return None
        node = self.rng.choice(alive)
        slow = self.rng.uniform(0.01, 0.3)
        rng = self.rng
        self.sim.set_delay(node, lambda: rng.uniform(0, slow))
        self._later(
            self._outage(), lambda: self.sim.set_delay(node, 0.0), f"broker {node} fast again"
        )
        return f"broker {node}'s links slow (up to {slow * 1000:.0f} ms)"

    def _move_coordinator(self) -> str | None:
        alive = self._alive()
        names = [*self.groups, *self.transactional_ids]
        if not names or len(alive) < 2:
            return None
        name = self.rng.choice(names)
        to = self.rng.choice(alive)
        if name in self.groups:
            self.sim.call(lambda c: c.move_coordinator(to=to, group=name))
            return f"coordinator of group {name!r} moved to broker {to}"
        self.sim.call(lambda c: c.move_coordinator(to=to, transactional_id=name))
        return f"transaction coordinator of {name!r} moved to broker {to}"


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")
