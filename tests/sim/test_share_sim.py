"""Seeded simulations of share-group workers (KIP-932) under faults and crashes.

Each seed: a 3-broker in-process Kafka, a 2-partition topic full of jobs and a
share group of asyncio workers in implicit acknowledgement mode, each a
simulated process that iterates (or polls) and takes some virtual time per
job. Workers are SIGKILLed and replaced, and some fail on a job: the exception
leaves their ``async with`` block (``close()`` must then accept only what they
finished) before they start again; a seeded
:class:`~kpax.testing.sim.chaos.Chaos` moves leaders, cuts connections and slows
links. Checked after every run, against the broker's own record of every
acceptance:

- no job is accepted before it was processed (a crash or an error never
  loses a job);
- every job ends accepted, or archived after its delivery count limit.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

import kpax
from kpax.testing.sim.chaos import Chaos
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.run import simulate
from tests.sim import seeds

SEEDS = seeds(30)
TOPIC, PARTITIONS, JOBS, GROUP = "jobs", 2, 300, "workers"


class JobFailed(Exception):
    """A worker's handler failing on a job (the application's own error)."""


@dataclass
class World:
    sim: SimKafka
    rng: random.Random
    processed: dict[tuple[int, int], float] = field(default_factory=dict)
    accepted: dict[tuple[int, int], float] = field(default_factory=dict)
    live: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    workers: int = 0
    events: list[str] = field(default_factory=list)


async def worker(world: World, name: str, seed: int) -> None:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    style = rng.choice(["iterate", "poll"])
    work = rng.choice([0.001, 0.01, 0.05])
    while True:
        try:
            async with kpax.aio.ShareConsumer(
                world.sim.bootstrap,
                group_id=GROUP,
                client_id=name,
                max_poll_records=rng.choice([5, 50, 500]),
                retry_backoff_ms=20,
                request_timeout_ms=5000,
            ) as c:
                c.subscribe([TOPIC])

                async def handle(rec: kpax.ShareConsumerRecord) -> None:
                    await asyncio.sleep(rng.uniform(0, work))
                    if rng.random() < 0.01:
                        raise JobFailed(f"{name} failed on {rec.partition}@{rec.offset}")
                    world.processed.setdefault((rec.partition, rec.offset), loop.time())

                if style == "iterate":
                    async for rec in c:
                        await handle(rec)
                else:
                    while True:
                        for rec in await c.poll(0.2):
                            await handle(rec)
        except JobFailed as exc:
            world.events.append(f"t={loop.time():.2f} {exc}; restarts")


async def share_scenario(sim: SimKafka, seed: int) -> World:
    loop = asyncio.get_running_loop()
    world = World(sim, random.Random(seed * 15485863 + 7))
    rng = world.rng
    sim.cluster.share_partitions.listeners.append(
        lambda group, topic, p, off: world.accepted.setdefault((p, off), loop.time())
    )
    async with kpax.aio.Producer(sim.bootstrap, linger_ms=5) as p:
        for i in range(JOBS):
            await p.send(TOPIC, b"%d" % i, partition=i % PARTITIONS)
        await p.flush()
    async with kpax.aio.Admin(sim.bootstrap) as admin:
        group = kpax.ConfigResource(kpax.ConfigResourceType.GROUP, GROUP)
        configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "5000"}
        await admin.incremental_alter_configs(
            {group: [kpax.AlterConfigOp(k, v) for k, v in configs.items()]}
        )
    chaos = Chaos(
        sim, seed, topics=[TOPIC], mean_gap=1.0, kinds=("move_leader", "cut", "delay")
    ).start()

    def start_worker() -> None:
        world.workers += 1
        name = f"w{world.workers}"
        world.live[name] = loop.spawn(name, worker(world, name, rng.getrandbits(64)))  # type: ignore[attr-defined]

    for _ in range(rng.randint(1, 3)):
        start_worker()
    while len(world.accepted) < JOBS and loop.time() < 300:
        await asyncio.sleep(rng.uniform(1.0, 6.0))
        live = [n for n, t in world.live.items() if not t.done()]
        if rng.random() < 0.3 and live:
            victim = rng.choice(live)
            loop.kill(victim)  # type: ignore[attr-defined]
            del world.live[victim]
            world.events.append(f"t={loop.time():.2f} killed {victim}")
            start_worker()
    await chaos.stop()
    settled = loop.time() + 120
    while len(world.accepted) < JOBS and loop.time() < settled:
        if not any(not t.done() for t in world.live.values()):
            start_worker()
        await asyncio.sleep(1.0)
    for task in world.live.values():
        task.cancel()
    await asyncio.gather(*world.live.values(), return_exceptions=True)
    check(world, chaos)
    return world


def check(world: World, chaos: Chaos) -> None:
    why = "\nworkers:\n  " + "\n  ".join(world.events) + f"\nfaults:\n{chaos.report()}"
    for job, t in sorted(world.accepted.items(), key=lambda kv: kv[1]):
        done = world.processed.get(job)
        assert done is not None and done <= t, (
            f"t={t:.3f}: job {TOPIC}-{job[0]}@{job[1]} accepted "
            + (f"before it was processed (at {done:.3f})" if done else "but never processed")
            + why
        )
    archived = archived_jobs(world.sim)
    missing = [
        (p, o)
        for p in range(PARTITIONS)
        for o in range(JOBS // PARTITIONS)
        if (p, o) not in world.accepted and (p, o) not in archived
    ]
    assert not missing, f"{len(missing)} job(s) neither accepted nor archived: {missing[:10]}{why}"


def archived_jobs(sim: SimKafka) -> set[tuple[int, int]]:
    out = set()
    for (group, topic, p), sp in sim.cluster.share_partitions.parts.items():
        if group == GROUP and topic == TOPIC:
            out.update((p, off) for off, rec in sp.inflight.items() if rec.state == "archived")
            out.update((p, off) for off in sp.archived)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_share_workers_crash_and_fail_without_losing_a_job(seed: int) -> None:
    simulate(
        lambda sim: share_scenario(sim, seed),
        seed=seed,
        topics={TOPIC: PARTITIONS},
        max_virtual=900,
    )
