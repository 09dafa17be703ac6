"""The Produce and Fetch versions kpax sends are those its codecs were written for.

The generated message classes follow Apache Kafka's JSON specs; the produce
wire codec (``kpax.proto.produce_wire``) and the fetcher are written for a
known range. Messages regenerated from newer specs (a Produce v14, a Fetch
v19) and a broker that offers them must not change what kpax sends: every
send still succeeds and every record is read back.
"""

from __future__ import annotations

import dataclasses

import pytest

import kpax
from kpax.consumer.fetcher import FETCH_MAX_VERSION
from kpax.proto import produce_wire
from kpax.proto.messages import FetchRequest, ProduceRequest
from kpax.testing.fake import cluster as fake_cluster
from kpax.testing.fake.frames import peek_header
from kpax.testing.sim import SimKafka, simulate


def test_newer_produce_and_fetch_versions_in_the_specs_change_nothing_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ProduceRequest.MAX_VERSION >= produce_wire.MAX_VERSION
    assert FetchRequest.MAX_VERSION >= FETCH_MAX_VERSION
    # as if the specs had moved on: the fake broker offers the newer versions too
    monkeypatch.setattr(ProduceRequest, "MAX_VERSION", produce_wire.MAX_VERSION + 1)
    monkeypatch.setattr(FetchRequest, "MAX_VERSION", FETCH_MAX_VERSION + 1)
    for cls in (ProduceRequest, FetchRequest):
        api = fake_cluster.APIS[cls.API_KEY]
        newer = dataclasses.replace(api, max_version=cls.MAX_VERSION)
        monkeypatch.setitem(fake_cluster.APIS, cls.API_KEY, newer)
    seen: dict[str, set[int]] = {"Produce": set(), "Fetch": set()}

    async def scenario(sim: SimKafka) -> list[bytes | None]:
        handle = sim.cluster.handle

        def spy(node_id: int, conn_id: int, frame: bytes, now_ms: int) -> object:
            header = peek_header(frame)
            if header.api_key in (ProduceRequest.API_KEY, FetchRequest.API_KEY):
                name = "Produce" if header.api_key == ProduceRequest.API_KEY else "Fetch"
                seen[name].add(header.version)
            return handle(node_id, conn_id, frame, now_ms)

        sim.cluster.handle = spy  # type: ignore[method-assign]
        async with kpax.aio.Producer(sim.bootstrap, linger_ms=1) as p:
            for i in range(10):
                await p.send_and_wait("t", b"%d" % i)
        async with kpax.aio.Consumer(sim.bootstrap, auto_offset_reset="earliest") as c:
            await c.assign([kpax.TopicPartition("t", 0)])
            got: list[bytes | None] = []
            while len(got) < 10:
                got += [r.value for r in await c.poll(1.0)]
        return got

    got = simulate(scenario, topics={"t": 1})
    assert got == [b"%d" % i for i in range(10)]
    assert seen == {"Produce": {produce_wire.MAX_VERSION}, "Fetch": {FETCH_MAX_VERSION}}
