"""kpax's asyncio clients against the in-process Kafka on the virtual-time loop
(kpax.testing.sim.SimKafka): a round trip in milliseconds of wall time, the same
run for the same seeds, faults at both layers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import kpax
from kpax.testing.sim import run
from kpax.testing.sim.kafka import SimKafka


def simulate(scenario: Callable[[SimKafka], Awaitable[Any]], *, seed: int = 0) -> Any:
    return run.simulate(scenario, seed=seed, topics={"t": 3})


def test_produce_and_consume_in_a_group() -> None:
    async def scenario(sim: SimKafka) -> list[bytes]:
        async with kpax.aio.Producer(sim.bootstrap, linger_ms=5) as p:
            futs = [await p.send("t", b"%d" % i, key=b"k%d" % (i % 10)) for i in range(500)]
            await p.flush()
        assert all(f.exception() is None for f in futs)
        async with kpax.aio.Consumer(
            sim.bootstrap, group_id="g", auto_offset_reset="earliest"
        ) as c:
            await c.subscribe(["t"])
            got: list[bytes] = []
            while len(got) < 500:
                got += [r.value for r in await c.poll(1.0)]
        return got

    got = simulate(scenario)
    assert sorted(got, key=int) == [b"%d" % i for i in range(500)]


def test_a_leader_move_and_a_cut_connection_lose_nothing_with_idempotence() -> None:
    async def scenario(sim: SimKafka) -> tuple[list[int], list[bytes]]:
        loop = asyncio.get_running_loop()
        async with kpax.aio.Producer(sim.bootstrap, linger_ms=5, acks="all") as p:
            futs = []
            for i in range(300):
                futs.append(await p.send("t", b"%d" % i, partition=0))
                if i == 100:
                    leader = sim.cluster.state.partition("t", 0).leader
                    sim.call(lambda c, lead=leader: c.move_leader("t", 0, lead % 3 + 1))
                if i == 200:
                    sim.cut(sim.cluster.state.partition("t", 0).leader)
                if i % 50 == 0:
                    await asyncio.sleep(0.01)
            await p.flush()
            assert loop.time() < 60
        offsets = [f.result().offset for f in futs]
        log = [v for _o, _k, v in _records(sim, "t", 0)]
        return offsets, log

    offsets, log = simulate(scenario, seed=5)
    assert offsets == sorted(offsets) and len(set(offsets)) == 300
    assert log == [b"%d" % i for i in range(300)]


def test_the_same_seed_gives_the_same_run() -> None:
    def run(seed: int) -> list[tuple[int, int]]:
        async def scenario(sim: SimKafka) -> list[tuple[int, int]]:
            rng = random.Random(seed)
            for node in (1, 2, 3):
                sim.set_delay(node, lambda: rng.uniform(0, 0.005))
            async with kpax.aio.Producer(sim.bootstrap, linger_ms=2) as p:
                futs = [
                    await p.send("t", b"%d" % i, key=b"%d" % rng.randrange(50)) for i in range(300)
                ]
                await p.flush()
            return [(f.result().partition, f.result().offset) for f in futs]

        return simulate(scenario, seed=seed)

    assert run(11) == run(11)


def _records(
    sim: SimKafka, topic: str, partition: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    return sim.cluster.records(topic, partition)


def test_a_kip848_member_does_not_answer_an_unchanged_assignment_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A coordinator that sends the member its (unchanged) assignment in every
    heartbeat answer: the member answered each at once with its owned
    partitions, for ever, at one instant (found by the group simulation)."""
    from kpax.testing.fake import consumer_groups

    original = consumer_groups.ConsumerGroups.heartbeat
    beats = [0]

    def resending(self: Any, ctx: Any, req: Any) -> Any:
        group = self.groups.get(req.group_id)
        member = group.members.get(req.member_id) if group is not None else None
        if member is not None:
            member.last_sent = None  # as if never sent: the answer carries it again
        beats[0] += 1
        return original(self, ctx, req)

    monkeypatch.setattr(consumer_groups.ConsumerGroups, "heartbeat", resending)

    async def scenario(sim: SimKafka) -> float:
        loop = asyncio.get_running_loop()
        async with kpax.aio.Consumer(
            sim.bootstrap, group_id="g848", group_protocol="consumer"
        ) as c:
            await c.subscribe(["t"])
            await c.poll(1.0)
            start = loop.time()
            await asyncio.sleep(10.0)
            return loop.time() - start

    assert simulate(scenario) >= 10.0
    assert beats[0] < 100  # one every heartbeat interval (500 ms), not a busy loop
