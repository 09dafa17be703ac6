"""Seeded simulations of exactly-once consume-transform-produce under faults and crashes.

Each seed: a 3-broker in-process Kafka (transactions v2, or v1 on odd seeds), an
input topic of records and a group (the classic protocol, or KIP-848's on seeds
2 and 3 mod 4) of asyncio app instances, each a simulated
process with its own transactional id, that polls the input, writes one output
record per input record inside a transaction, and commits the input offsets in
the same transaction (``send_offsets_to_transaction``). While it runs,
instances are SIGKILLed and started again with the same transactional id (the
new one fences the old and aborts its open transaction), and a seeded
:class:`~kpax.testing.sim.chaos.Chaos` moves leaders, group and transaction
coordinators, cuts connections, slows links and answers retriable errors, the
transaction APIs' included. An instance that gets an error it cannot retry
aborts and either rewinds to the committed offsets and goes on in the group
(as docs/transactions.md's loop does) or leaves and starts again from them; a
fenced one starts again.
Checked after every run:

- a read_committed reader of the output sees every input record's output
  exactly once: none lost, none twice (an aborted or fenced transaction shows
  nothing);
- the group's committed offsets never move backwards, and end at the input's
  end offsets.
"""

from __future__ import annotations

import asyncio
import collections
import random
from dataclasses import dataclass, field

import pytest

import kpax
from kpax.testing.sim.chaos import DEFAULT_APIS, Chaos
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.run import simulate
from tests.sim import seeds

SEEDS = seeds(20)
IN, OUT, PARTITIONS, RECORDS, GROUP = "in", "out", 3, 600, "app"
SLOTS = 2  # app instances at a time; instance k always uses transactional id app-k
TXN_APIS = (*DEFAULT_APIS, "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn")


@dataclass
class World:
    sim: SimKafka
    rng: random.Random
    events: list[str] = field(default_factory=list)
    live: dict[int, tuple[str, asyncio.Task[None]]] = field(default_factory=dict)
    started: int = 0
    #: (time, partition, offset) of every committed offset change, as the broker saw it
    commits: list[tuple[float, int, int]] = field(default_factory=list)


async def instance(world: World, slot: int, seed: int, protocol: str) -> None:
    """One app instance: runs until killed; leaves and starts again on an error."""
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    work = rng.choice([0.01, 0.1, 0.2])  # the most one record takes, in seconds
    rewinds = rng.random() < 0.5  # after an abort: rewind in the group, or leave and restart
    while True:
        try:
            async with (
                kpax.aio.Consumer(
                    world.sim.bootstrap,
                    group_id=GROUP,
                    group_protocol=protocol,
                    enable_auto_commit=False,
                    isolation_level="read_committed",
                    auto_offset_reset="earliest",
                    max_poll_records=rng.choice([5, 30, 100]),
                    session_timeout_ms=6000,
                    heartbeat_interval_ms=500,
                    retry_backoff_ms=20,
                    request_timeout_ms=5000,
                ) as consumer,
                kpax.aio.Producer(
                    world.sim.bootstrap,
                    transactional_id=f"app-{slot}",
                    linger_ms=rng.choice([0, 5]),
                    retry_backoff_ms=20,
                    request_timeout_ms=5000,
                    transaction_timeout_ms=20000,
                ) as producer,
            ):
                await consumer.subscribe([IN])
                await producer.init_transactions()
                while True:
                    records = await consumer.poll(0.2)
                    if not records:
                        continue
                    producer.begin_transaction()
                    try:
                        for r in records:
                            await asyncio.sleep(rng.uniform(0, work))
                            await producer.send(OUT, r.value, key=r.key)
                        offsets: dict[kpax.TopicPartition, int] = {}
                        for r in records:
                            offsets[kpax.TopicPartition(r.topic, r.partition)] = r.offset + 1
                        await producer.send_offsets_to_transaction(
                            offsets, consumer.group_metadata()
                        )
                        await producer.commit_transaction()
                    except kpax.KafkaError as exc:
                        if not isinstance(exc, kpax.ProducerFencedError):
                            with_abort = "aborted"
                            try:
                                await producer.abort_transaction()
                            except kpax.KafkaError:
                                with_abort = "abort failed"
                        else:
                            with_abort = "fenced"
                        if with_abort == "aborted" and rewinds:
                            # docs/transactions.md's loop: stay in the group, read the
                            # aborted inputs again from the committed offsets
                            world.events.append(
                                f"t={loop.time():.2f} app-{slot}: {type(exc).__name__} (aborted); "
                                "rewinds to the committed offsets"
                            )
                            try:
                                await rewind(consumer)
                            except kpax.KafkaError as again:
                                raise _Restart from again
                            continue
                        world.events.append(
                            f"t={loop.time():.2f} app-{slot}: {type(exc).__name__} ({with_abort}); "
                            "restarts from the committed offsets"
                        )
                        raise _Restart from exc
        except _Restart:
            await asyncio.sleep(rng.uniform(0.05, 0.5))


async def rewind(consumer: kpax.aio.Consumer) -> None:
    """Back to the committed offsets (docs/transactions.md): the aborted inputs again."""
    assigned = consumer.assignment()
    for tp, committed in (await consumer.committed(assigned)).items():
        if committed is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, committed.offset)


class _Restart(Exception):
    """Leave both clients and start again (the position is the committed offset)."""


async def txn_scenario(sim: SimKafka, seed: int) -> World:
    # the classic protocol on seeds 0, 1 (mod 4), KIP-848 on seeds 2, 3
    protocol = "consumer" if seed % 4 >= 2 else "classic"
    loop = asyncio.get_running_loop()
    world = World(sim, random.Random(seed * 7919 + 3))
    rng = world.rng
    sim.cluster.offsets.listeners.append(
        lambda group, offsets: world.commits.extend(
            (loop.time(), tp[1], c.offset)
            for tp, c in offsets.items()
            if group == GROUP and tp[0] == IN
        )
    )
    async with kpax.aio.Producer(sim.bootstrap, linger_ms=5) as p:
        for i in range(RECORDS):
            await p.send(IN, b"r%d" % i, key=b"k%d" % i, partition=i % PARTITIONS)
        await p.flush()
    chaos = Chaos(
        sim,
        seed,
        topics=[IN, OUT],
        groups=[GROUP],
        transactional_ids=[f"app-{k}" for k in range(SLOTS)],
        apis=TXN_APIS,
        mean_gap=1.0,
        kinds=("move_leader", "cut", "error", "delay", "move_coordinator"),
    ).start()

    def start(slot: int) -> None:
        world.started += 1
        name = f"app-{slot}#{world.started}"
        app = instance(world, slot, rng.getrandbits(64), protocol)
        world.live[slot] = (name, loop.spawn(name, app))  # type: ignore[attr-defined]

    for slot in range(SLOTS):
        start(slot)
    ends = dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)
    until = loop.time() + 60
    while loop.time() < until:
        await asyncio.sleep(rng.uniform(1.0, 8.0))
        if rng.random() < 0.5:
            slot = rng.randrange(SLOTS)
            name, _task = world.live[slot]
            loop.kill(name)  # type: ignore[attr-defined]
            world.events.append(f"t={loop.time():.2f} killed {name}")
            start(slot)
    await chaos.stop()
    settled = loop.time() + 120
    while loop.time() < settled and committed(sim) != ends:  # noqa: ASYNC110 - polling the broker's state, in virtual time
        await asyncio.sleep(0.5)
    for _name, task in world.live.values():
        task.cancel()
    await asyncio.gather(*(t for _n, t in world.live.values()), return_exceptions=True)
    why = "\nevents:\n  " + "\n  ".join(world.events) + f"\nfaults:\n{chaos.report()}"
    assert committed(sim) == ends, f"committed {committed(sim)}, ends {ends}{why}"
    last: dict[int, int] = {}
    for t, p, off in world.commits:
        assert off >= last.get(p, -1), f"t={t:.2f}: p{p} committed {last[p]} -> {off}{why}"
        last[p] = off
    outputs = await read_committed(sim)
    counts = collections.Counter(outputs)
    twice = sorted(v for v, n in counts.items() if n > 1)
    missing = sorted({b"r%d" % i for i in range(RECORDS)} - set(counts))
    assert not twice and not missing, (
        f"read_committed output: {len(twice)} twice {twice[:5]}, "
        f"{len(missing)} missing {missing[:5]}{why}"
    )
    return world


def committed(sim: SimKafka) -> dict[int, int]:
    got = sim.cluster.committed(GROUP)
    return {p: got.get((IN, p), -1) for p in range(PARTITIONS)}


async def read_committed(sim: SimKafka) -> list[bytes | None]:
    """Every output value a read_committed consumer sees, up to the end."""
    tps = [kpax.TopicPartition(OUT, p) for p in range(PARTITIONS)]
    out: list[bytes | None] = []
    async with kpax.aio.Consumer(
        sim.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
    ) as c:
        await c.assign(tps)
        ends = await c.end_offsets(tps)
        left = set(tps)
        while left:
            out.extend(r.value for r in await c.poll(0.5))
            left = {tp for tp in left if await c.position(tp) < ends[tp]}
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_exactly_once_across_crashes_fencing_and_coordinator_moves(seed: int) -> None:
    simulate(
        lambda sim: txn_scenario(sim, seed),
        seed=seed,
        topics={IN: PARTITIONS, OUT: PARTITIONS},
        config={
            "group.consumer.session.timeout.ms": "6000",
            "transaction.version": 2 - seed % 2,
        },
        max_virtual=1200,
    )


def test_a_seed_replays_the_same_run() -> None:
    """A failing seed must fail again the same way: the faults, the retries' backoff
    jitter and every commit fall at the same virtual instants in two runs."""

    def run(seed: int) -> tuple[list[str], list[tuple[float, int, int]]]:
        async def scenario(sim: SimKafka) -> tuple[list[str], list[tuple[float, int, int]]]:
            world = await txn_scenario(sim, seed)
            return world.events, world.commits

        return simulate(
            scenario,
            seed=seed,
            topics={IN: PARTITIONS, OUT: PARTITIONS},
            config={"group.consumer.session.timeout.ms": "6000", "transaction.version": 2},
            max_virtual=1200,
        )

    assert run(3) == run(3)
