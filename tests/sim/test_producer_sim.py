"""Seeded simulations of the idempotent producer under faults (kpax.testing.sim).

Each seed: a 3-broker in-process Kafka, an asyncio producer (idempotent,
acks=all) sending keyed, unkeyed and explicitly partitioned records in bursts --
one record at a time or many at once (``gather``) -- to existing topics and to
a topic its first send creates, sometimes after a send to a name Kafka refuses;
half-way the busiest topic gets more partitions; a seeded
:class:`~kpax.testing.sim.chaos.Chaos` meanwhile moves leaders, cuts and
restarts brokers, answers with retriable errors and drops connections after a
Produce was applied. Checked after every run:

- every send's future completes, and succeeds (every fault is one a producer
  rides out within ``delivery_timeout_ms``);
- every record acknowledged is in its partition's log exactly once, at the
  offset its metadata gave; no record is in a log twice (idempotence);
- a partition's records are in the order they were sent;
- keyed records sent once the producer has seen the new partition count land
  where Kafka's partitioner puts them with that count (every producer of the
  topic agrees on a key's partition).

A failing seed prints the faults made; ``SEEDS=n`` runs more (``make test-sim``).
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

import kpax
from kpax.producer.partitioner import partition_for_key
from kpax.testing.sim.chaos import Chaos
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.run import simulate
from tests.sim import seeds

SEEDS = seeds(60)
TOPICS = {"orders": 3, "audit": 1}
NEW_TOPIC = "created-by-send"
GROWN = 6  # "orders" grows to this many partitions half-way
METADATA_MAX_AGE_MS = 1000
DELIVERY_TIMEOUT = 120.0


@dataclass
class Sent:
    topic: str
    value: bytes
    key: bytes | None
    future: kpax.RecordFuture
    #: sent once the producer had seen "orders" grow (its key must follow the new count)
    after_growth: bool = False
    #: when it was sent and when its future completed (virtual seconds)
    at: float = 0.0
    done_at: float | None = None

    def __post_init__(self) -> None:
        self.at = asyncio.get_running_loop().time()
        self.future.add_callback(self._done)

    def _done(self, *_: object) -> None:
        self.done_at = asyncio.get_running_loop().time()


@dataclass
class Run:
    sent: list[Sent] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


async def producer_scenario(sim: SimKafka, seed: int) -> Run:
    rng = random.Random(seed * 7919 + 1)
    loop = asyncio.get_running_loop()
    run = Run()
    chaos = Chaos(
        sim,
        seed,
        topics=[*TOPICS, NEW_TOPIC],
        mean_gap=0.4,
        apis=("Produce", "Metadata", "InitProducerId"),
    ).start()
    grown_at: float | None = None
    async with kpax.aio.Producer(
        sim.bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=rng.choice([0, 2, 10]),
        batch_size=rng.choice([512, 4096, 16384]),
        delivery_timeout_ms=int(DELIVERY_TIMEOUT * 1000),
        request_timeout_ms=5_000,
        retry_backoff_ms=20,
        retry_backoff_max_ms=500,
        metadata_max_age_ms=METADATA_MAX_AGE_MS,
    ) as p:
        if rng.random() < 0.3:  # a name Kafka refuses must not poison the metadata
            try:
                await (await p.send("bad\udcff", b"x"))
            except kpax.KafkaError as exc:
                run.refused.append(type(exc).__name__)
        bursts = rng.randint(4, 8)
        for burst in range(bursts):
            if burst == bursts // 2:
                async with kpax.aio.Admin(sim.bootstrap) as admin:
                    await admin.create_partitions({"orders": GROWN})
                grown_at = loop.time()
            after = grown_at is not None and loop.time() > grown_at + 3 * METADATA_MAX_AGE_MS / 1000
            topics = [*TOPICS, NEW_TOPIC] if burst else list(TOPICS)
            batch: list[tuple[str, bytes, bytes | None, int | None]] = []
            for i in range(rng.randint(20, 200)):
                topic = rng.choice(topics)
                value = b"%d-%d" % (burst, i)
                choice = rng.random()
                key = b"k%d" % rng.randrange(20) if choice < 0.5 else None
                part = (
                    rng.randrange(TOPICS[topic])
                    if 0.5 <= choice < 0.7 and topic in TOPICS
                    else None
                )
                batch.append((topic, value, key, part))
            if rng.random() < 0.5:
                for topic, value, key, part in batch:
                    fut = await p.send(topic, value, key=key, partition=part)
                    run.sent.append(Sent(topic, value, key, fut, after))
            else:  # all at once: call order must still be the order in each partition
                futs = await asyncio.gather(
                    *(p.send(t, v, key=k, partition=q) for t, v, k, q in batch)
                )
                run.sent.extend(
                    Sent(t, v, k, f, after) for (t, v, k, _q), f in zip(batch, futs, strict=True)
                )
            await asyncio.sleep(rng.uniform(0, 0.5) + (4.0 if burst == bursts // 2 else 0))
        await p.flush(timeout=300)
    await chaos.stop()
    check(sim, run, chaos)
    return run


def check(sim: SimKafka, run: Run, chaos: Chaos) -> None:
    why = f"\nfaults:\n{chaos.report()}"
    pending = [s.value for s in run.sent if not s.future.done()]
    assert not pending, f"{len(pending)} future(s) never completed{why}"
    failed = [(s.topic, s.value, s.future.exception()) for s in run.sent if s.future.exception()]
    assert not failed, f"{len(failed)} send(s) failed, e.g. {failed[:3]}{why}"
    late = [s for s in run.sent if s.done_at is None or s.done_at - s.at > DELIVERY_TIMEOUT]
    assert not late, f"{len(late)} future(s) completed after delivery_timeout_ms{why}"
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
    for s in run.sent:
        md = s.future.result()
        where = seen.get((s.topic, s.value))
        at = f"{s.topic}-{md.partition}@{md.offset}"
        assert where == [(md.partition, md.offset)], (
            f"acknowledged {at} {s.value!r} is in the log at {where}{why}"
        )
        order[(s.topic, md.partition)].append(md.offset)
        if s.after_growth and s.key is not None and s.topic == "orders":
            want = partition_for_key(s.key, GROWN)
            assert md.partition == want, (
                f"{s.key!r} went to {at} after the topic grew to {GROWN} partitions: "
                f"Kafka's partitioner puts it in {want}{why}"
            )
    for tp, offsets in order.items():
        assert offsets == sorted(offsets), f"{tp}: records out of send order{why}"


@pytest.mark.parametrize("seed", SEEDS)
def test_idempotent_producer_under_faults(seed: int) -> None:
    simulate(lambda sim: producer_scenario(sim, seed), seed=seed, topics=TOPICS, max_virtual=900)
