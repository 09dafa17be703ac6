"""Seeded simulations of the idempotent producer under faults (kpax.testing.sim).

Each seed: a 3-broker in-process Kafka, an asyncio producer (idempotent,
acks=all) sending keyed and unkeyed records in bursts -- to existing topics, to
a topic created by its first send, to explicit partitions -- while a seeded
:class:`~kpax.testing.sim.chaos.Chaos` moves leaders, cuts and restarts
brokers, injects retriable errors and drops connections after a Produce was
applied. Checked after every run:

- every send's future completes;
- every record acknowledged is in its partition's log exactly once, at the
  offset its metadata gave;
- no record is in a log twice (idempotence), acknowledged or not;
- a partition's records are in the order they were sent.

A failing seed prints the faults made; ``SEEDS=n`` runs more
(``make test-sim``).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import defaultdict

import pytest

import kpax
from kpax.testing.sim.chaos import Chaos
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.run import simulate

SEEDS = range(int(os.environ.get("SEEDS", "40")))
TOPICS = {"orders": 3, "audit": 1}
NEW_TOPIC = "created-by-send"


async def producer_scenario(sim: SimKafka, seed: int) -> None:
    rng = random.Random(seed * 7919 + 1)
    chaos = Chaos(
        sim,
        seed,
        topics=[*TOPICS, NEW_TOPIC],
        mean_gap=0.4,
        apis=("Produce", "Metadata", "InitProducerId"),
    ).start()
    sent: list[tuple[str, bytes, kpax.RecordFuture]] = []  # (topic, value, future), send order
    async with kpax.aio.Producer(
        sim.bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=rng.choice([0, 2, 10]),
        batch_size=rng.choice([512, 4096, 16384]),
        delivery_timeout_ms=120_000,
        request_timeout_ms=5_000,
        retry_backoff_ms=20,
        retry_backoff_max_ms=500,
    ) as p:
        for burst in range(rng.randint(3, 8)):
            for i in range(rng.randint(20, 200)):
                topic = rng.choice([*TOPICS, NEW_TOPIC] if burst else list(TOPICS))
                value = b"%d-%d" % (burst, i)
                choice = rng.random()
                if choice < 0.5:
                    fut = await p.send(topic, value, key=b"k%d" % rng.randrange(20))
                elif choice < 0.7 and topic in TOPICS:
                    fut = await p.send(topic, value, partition=rng.randrange(TOPICS[topic]))
                else:
                    fut = await p.send(topic, value)
                sent.append((topic, value, fut))
            await asyncio.sleep(rng.uniform(0, 0.5))
        await p.flush(timeout=300)
    await chaos.stop()
    check(sim, sent, chaos)


def check(sim: SimKafka, sent: list[tuple[str, bytes, kpax.RecordFuture]], chaos: Chaos) -> None:
    why = f"\nfaults:\n{chaos.report()}"
    pending = [v for _, v, f in sent if not f.done()]
    assert not pending, f"{len(pending)} future(s) never completed{why}"
    logs: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for topic, info in sim.cluster.state.topics.items():
        for p in range(len(info.partitions)):
            logs[(topic, p)] = [(o, v) for o, _k, v in sim.cluster.records(topic, p)]
    seen: dict[tuple[str, bytes], list[tuple[int, int]]] = defaultdict(list)
    for (topic, p), recs in logs.items():
        for offset, value in recs:
            seen[(topic, value)].append((p, offset))
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    assert not dups, f"records written twice: {sorted(dups.items())[:5]}{why}"
    order: dict[tuple[str, int], list[int]] = defaultdict(list)
    for topic, value, fut in sent:
        if fut.exception() is not None:
            continue
        md = fut.result()
        where = seen.get((topic, value))
        at = f"{topic}-{md.partition}@{md.offset}"
        assert where == [(md.partition, md.offset)], (
            f"acknowledged {at} {value!r} is in the log at {where}{why}"
        )
        order[(topic, md.partition)].append(md.offset)
    for tp, offsets in order.items():
        assert offsets == sorted(offsets), f"{tp}: records out of send order{why}"


@pytest.mark.parametrize("seed", SEEDS)
def test_idempotent_producer_under_faults(seed: int) -> None:
    simulate(lambda sim: producer_scenario(sim, seed), seed=seed, topics=TOPICS, max_virtual=900)
