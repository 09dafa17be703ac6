"""Seeded simulations of consumer groups under faults and crashes (kpax.testing.sim).

Each seed: a 3-broker in-process Kafka with a 4-partition topic already full of
records; a group of asyncio consumers, each a simulated process that polls (or
iterates), takes some virtual time to process every record and relies on
auto-commit -- classic (eager range or cooperative-sticky) or KIP-848. While it
runs, members are SIGKILLed (nothing of them runs again: no last commit, no
LeaveGroup) and replaced, others join or leave, and a seeded
:class:`~kpax.testing.sim.chaos.Chaos` moves leaders and the group's
coordinator, cuts connections and answers with retriable errors. Checked after
every run, against the broker's own record of every commit:

- no commit ever covers a record not yet processed (at-least-once: a crash
  loses nothing);
- a partition's committed offset never moves backwards;
- every record is processed (at least once), and once every member has closed,
  the committed offsets are the end offsets.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

import kpax
from kpax.testing.sim.chaos import Chaos
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.run import simulate
from tests.sim import seeds

SEEDS = seeds(30)
TOPIC, PARTITIONS, RECORDS, GROUP = "events", 4, 600, "g"
END_OFFSETS = dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)  # record i goes to i % 4
FLAVOURS = {
    "eager": {"partition_assignment_strategy": "range"},
    "cooperative": {"partition_assignment_strategy": "cooperative-sticky"},
    "kip848": {"group_protocol": "consumer"},
}


@dataclass
class World:
    """What every simulated process shares: what was processed, when, by whom."""

    sim: SimKafka
    rng: random.Random
    flavour: str
    processed: dict[tuple[int, int], float] = field(
        default_factory=dict
    )  # (p, offset) -> first time
    commits: list[tuple[float, int, int]] = field(default_factory=list)  # (time, p, offset)
    live: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    members: int = 0

    def done(self) -> bool:
        return len(self.processed) >= RECORDS


async def member(world: World, name: str, style: str, work: float, seed: int) -> None:
    rng = random.Random(seed)
    options = dict(FLAVOURS[world.flavour])
    async with kpax.aio.Consumer(
        world.sim.bootstrap,
        group_id=GROUP,
        client_id=name,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=rng.choice([50, 200, 1000]),
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=rng.choice([5, 50, 500]),
        retry_backoff_ms=20,
        request_timeout_ms=5000,
        default_api_timeout_ms=10000,
        **options,
    ) as c:
        await c.subscribe([TOPIC])
        loop = asyncio.get_running_loop()

        async def handle(rec: kpax.ConsumerRecord) -> None:
            await asyncio.sleep(rng.uniform(0, work))
            world.processed.setdefault((rec.partition, rec.offset), loop.time())

        if style == "iterate":
            async for rec in c:
                await handle(rec)
        else:
            while True:
                for rec in await c.poll(0.2):
                    await handle(rec)


async def group_scenario(sim: SimKafka, seed: int, flavour: str) -> World:
    loop = asyncio.get_running_loop()
    world = World(sim, random.Random(seed * 104729 + 3), flavour)
    rng = world.rng
    sim.cluster.offsets.listeners.append(
        lambda group, offsets: world.commits.extend(
            (loop.time(), tp[1], c.offset) for tp, c in offsets.items() if group == GROUP
        )
    )
    async with kpax.aio.Producer(sim.bootstrap, linger_ms=5) as p:
        for i in range(RECORDS):
            await p.send(TOPIC, b"%d" % i, partition=i % PARTITIONS)
        await p.flush()
    chaos = Chaos(
        sim,
        seed,
        topics=[TOPIC],
        groups=[GROUP],
        mean_gap=1.0,
        kinds=("move_leader", "cut", "error", "delay", "move_coordinator"),
        apis=(
            "Fetch",
            "OffsetCommit",
            "OffsetFetch",
            "JoinGroup",
            "SyncGroup",
            "Heartbeat",
            "ConsumerGroupHeartbeat",
            "FindCoordinator",
            "ListOffsets",
        ),
    ).start()

    def start_member() -> None:
        world.members += 1
        name = f"m{world.members}"
        style = rng.choice(["poll", "iterate"])
        work = rng.choice([0.001, 0.01, 0.05])
        world.live[name] = loop.spawn(name, member(world, name, style, work, rng.getrandbits(64)))  # type: ignore[attr-defined]

    for _ in range(rng.randint(1, 3)):
        start_member()
    events: list[str] = []
    while not world.done() and loop.time() < 600:
        await asyncio.sleep(rng.uniform(1.0, 8.0))
        live = [n for n, t in world.live.items() if not t.done()]
        move = rng.random()
        if move < 0.35 and live:
            victim = rng.choice(live)
            loop.kill(victim)  # type: ignore[attr-defined]
            del world.live[victim]
            events.append(f"t={loop.time():.2f} killed {victim}")
            start_member()
        elif move < 0.5 and len(live) < 4:
            start_member()
        elif move < 0.6 and len(live) > 1:
            leaving = rng.choice(live)
            world.live[leaving].cancel()  # a clean exit: close() commits and leaves
            events.append(f"t={loop.time():.2f} {leaving} left")
    await chaos.stop()
    events.append(f"t={loop.time():.2f} faults and churn stop")
    while not world.done() and loop.time() < 900:
        if not any(not t.done() for t in world.live.values()):
            start_member()
        await asyncio.sleep(1.0)
    # No more churn: the members still running must commit everything they
    # processed within a few auto-commit intervals (none stuck behind).
    settled = loop.time() + 30
    while loop.time() < settled and committed_now(sim) != END_OFFSETS:  # noqa: ASYNC110 - polling the broker's state, in virtual time
        await asyncio.sleep(0.5)
    stuck = committed_now(sim)
    assert stuck == END_OFFSETS, (
        f"t={loop.time():.2f}: {len(world.processed)} records processed, the group "
        f"settled, but committed offsets stay at {stuck} (ends {END_OFFSETS})"
        f"\nmembers:\n  " + "\n  ".join(events) + f"\nfaults:\n{chaos.report()}"
    )
    world.stopping.set()
    for task in world.live.values():
        task.cancel()  # a clean exit: close() commits what was processed and leaves
    await asyncio.gather(*world.live.values(), return_exceptions=True)
    events.append(f"t={loop.time():.2f} members stopped; {len(world.processed)} processed")
    # A last member alone, no faults: it reads from the committed offsets to the
    # end, processing what no commit covers yet, and closes (committing all).
    async with kpax.aio.Consumer(
        sim.bootstrap,
        group_id=GROUP,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        **FLAVOURS[flavour],
    ) as c:
        await c.subscribe([TOPIC])
        ends = END_OFFSETS
        reached: set[int] = set()
        while len(reached) < PARTITIONS and loop.time() < 1100:
            for rec in await c.poll(0.5):
                world.processed.setdefault((rec.partition, rec.offset), loop.time())
            for tp in c.assignment():
                if await c.position(tp) >= ends[tp.partition]:
                    reached.add(tp.partition)
    check(world, chaos, events)
    return world


def committed_now(sim: SimKafka) -> dict[int, int]:
    committed = sim.cluster.committed(GROUP)
    return {p: committed.get((TOPIC, p), -1) for p in range(PARTITIONS)}


def check(world: World, chaos: Chaos, events: list[str]) -> None:
    why = "\nmembers:\n  " + "\n  ".join(events) + f"\nfaults:\n{chaos.report()}"
    assert world.done(), f"{RECORDS - len(world.processed)} record(s) never processed{why}"
    last: dict[int, int] = defaultdict(lambda: -1)
    for t, p, offset in world.commits:
        missing = [o for o in range(offset) if world.processed.get((p, o), float("inf")) > t]
        assert not missing, (
            f"t={t:.3f}: committed {TOPIC}-{p} at {offset} while offsets {missing[:10]} "
            f"(of {len(missing)}) were not processed yet{why}"
        )
        assert offset >= last[p], f"t={t:.3f}: {TOPIC}-{p} committed {offset} after {last[p]}{why}"
        last[p] = offset
    final = {p: last[p] for p in range(PARTITIONS)}
    ends = END_OFFSETS
    assert final == ends, f"committed {final} at the end, the partitions end at {ends}{why}"


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
@pytest.mark.parametrize("seed", SEEDS)
def test_group_members_crash_and_rebalance_without_losing_a_record(seed: int, flavour: str) -> None:
    simulate(
        lambda sim: group_scenario(sim, seed, flavour),
        seed=seed,
        topics={TOPIC: PARTITIONS},
        # A KIP-848 member's session is the broker's setting (45 s by default):
        # as short as the classic members' 6 s, so a killed member's partitions
        # move on within the run's settling time in every flavour.
        config={"group.consumer.session.timeout.ms": "6000"},
        max_virtual=1200,
    )
