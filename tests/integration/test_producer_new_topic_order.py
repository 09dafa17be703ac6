"""Records sent to a topic the producer has no metadata for yet keep call order
(real broker, auto-create on): concurrent asyncio sends, the sync face's sends
and ``send_many`` in a loop, and the two mixed, all land at offsets in the
order they were called, as with aiokafka and the Java client. (Each waiting send
used to retry its metadata lookup on its own, so 100 gathered sends landed at
offsets like [41, 67, 25, 12, ...].)"""

from __future__ import annotations

import asyncio
import uuid

import pytest

import kpax

pytestmark = pytest.mark.integration

N = 100


def _new_name() -> str:
    return f"order-{uuid.uuid4().hex[:12]}"


def _values(metas: list[kpax.RecordMetadata]) -> list[int]:
    """Offsets of ``metas`` (one partition), which must be 0, 1, 2... in call order."""
    assert len({m.partition for m in metas}) == 1, {m.partition for m in metas}
    return [m.offset for m in metas]


@pytest.mark.parametrize(
    "how",
    [{}, {"partition": 0}, {"key": b"same-key"}],
    ids=["auto", "partition", "key"],
)
async def test_gathered_sends_to_a_new_topic_land_in_call_order(kafka, how):
    t = _new_name()
    async with kpax.aio.Producer(kafka.bootstrap) as p:
        metas = await asyncio.gather(*[p.send_and_wait(t, b"%d" % i, **how) for i in range(N)])
    assert _values(list(metas)) == list(range(N))


async def test_gathered_send_and_send_many_to_a_new_topic_land_in_call_order(kafka):
    t = _new_name()
    async with kpax.aio.Producer(kafka.bootstrap) as p:

        async def one(i: int) -> list[int]:
            if i % 3 == 0:
                bulk = await p.send_many(t, [b"%d-a" % i, b"%d-b" % i])
                await bulk
                return [m.offset for m in bulk.metadata()]
            return [(await p.send_and_wait(t, b"%d" % i)).offset]

        offsets = await asyncio.gather(*[one(i) for i in range(N)])
    flat = [o for group in offsets for o in group]
    assert flat == list(range(len(flat)))


async def test_tasks_sending_to_a_new_topic_land_in_call_order(kafka):
    t = _new_name()
    async with kpax.aio.Producer(kafka.bootstrap) as p:
        futs = [await p.send(t, b"first")]  # the first send waits for the metadata
        tasks = [asyncio.ensure_future(p.send(t, b"%d" % i)) for i in range(N)]
        futs += [await task for task in tasks]
        metas = [await f for f in futs]
    assert _values(metas) == list(range(N + 1))


def test_sync_sends_and_send_many_in_a_loop_to_a_new_topic_land_in_call_order(kafka):
    t1, t2 = _new_name(), _new_name()
    with kpax.Producer(kafka.bootstrap) as p:
        futs = [p.send(t1, b"%d" % i) for i in range(N)]
        metas = [f.result(30) for f in futs]
        bulks = [p.send_many(t2, [b"%d-a" % i, b"%d-b" % i]) for i in range(N // 2)]
        bulk_metas = [m for b in bulks for m in b.metadata(30)]
    assert _values(metas) == list(range(N))
    assert _values(bulk_metas) == list(range(N))


def test_sync_sends_from_threads_keep_each_threads_order(kafka):
    """Threads racing to a new topic: each thread's records keep its own call order."""
    import threading

    t = _new_name()
    per_thread: dict[int, list[kpax.RecordMetadata]] = {}
    with kpax.Producer(kafka.bootstrap) as p:

        def run(k: int) -> None:
            futs = [p.send(t, b"%d-%d" % (k, i)) for i in range(N // 4)]
            per_thread[k] = [f.result(30) for f in futs]

        threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    for metas in per_thread.values():
        offsets = _values(metas)
        assert offsets == sorted(offsets)
