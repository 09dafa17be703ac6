"""Costs inside kpax's producer as functions of the partition count: a diagnosis
aid for the sender/accumulator design (issue 29), CPU time only (``time.thread_time``,
which other load on a shared machine disturbs little).

It measures the sender and accumulator as they are at this commit, by their
internal names (``Sender._round``, ``_send_ready``, ``_expire_in_flight``,
``Accumulator.drain_open``); a kpax without them says so and skips that part
(``python -m bench.producer_cpu`` measures any kpax from the outside).

- ``round``: one sender round with P partition queues that exist but hold
  nothing except one lingering batch (an idle producer's wake-up): the round
  and each of its three scans, in µs per call and ns per partition queue.
- ``blocked``: ``Sender._send_ready`` when P partitions each have a ready
  batch but their broker already has ``max_in_flight`` requests out, so
  nothing can be sent: what each round costs a producer that outpaces its
  broker.
- ``batch``: each step a 1-record batch goes through, alone, without a
  broker: opening it on the Python send path (the C path appends only to an
  open batch), closing and sealing it, its part of a Produce request's
  encoding and of its response's decoding, and completing it.

    python -m bench.producer_internals [--bootstrap host:9092] [--partitions 1,10,100,1000,3000]
                                       [--parts round,blocked,batch]

Without ``--bootstrap`` a local broker is started with kpax.testing (not needed
for ``batch`` alone).

Imports: bench.harness, kpax (its producer internals) and the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import kpax
from bench import harness as h
from kpax.producer.batch_state import BatchEvent

#: Buffer memory of the measuring producers: room for one 16 KiB batch per partition
#: at every partition count measured (the default 32 MiB holds 2,048).
BUFFER = 1 << 30


def cpu_us(fn: Callable[[], Any], n: int) -> float:
    """CPU µs per call of ``fn`` (``n`` calls, this thread's CPU time)."""
    t = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t) / n * 1e6


def _has(obj: Any, *names: str) -> bool:
    return all(hasattr(obj, name) for name in names)


async def _producer_on(bootstrap: str, topic: str, parts: int) -> Any:
    """A started producer that lingers 60 s and has sent one record to every
    partition (so every partition has its queue), everything acknowledged."""
    p = kpax.aio.Producer(
        bootstrap, linger_ms=60_000, delivery_timeout_ms=200_000, buffer_memory=BUFFER
    )
    await p.start()
    for i in range(parts):
        await p.send(topic, b"x", partition=i)
    await p.flush()
    return p


async def measure_round(bootstrap: str, topic: str, parts: int) -> str:
    p = await _producer_on(bootstrap, topic, parts)
    try:
        s, acc = p.sender, p.accumulator
        if not (_has(s, "_round", "_send_ready", "_expire_in_flight") and _has(acc, "drain_open")):
            return "round: this kpax's sender has no rounds to measure (see bench.producer_cpu)"
        await p.send(topic, b"x", partition=0)  # one batch lingers: a batch is incomplete
        now = time.monotonic()
        n = max(200, 200_000 // parts)
        queues = acc.all_queues()
        whole = cpu_us(s._round, n)
        drain = cpu_us(lambda: acc.drain_open(now), n)
        ready = cpu_us(lambda: s._send_ready(now), n)  # (it calls _expire_in_flight)
        expire = cpu_us(lambda: s._expire_in_flight(queues, now), n)
        return (
            f"round   P={parts:5d}: {whole:7.1f} us/round = {whole / parts * 1000:4.0f} ns per "
            f"partition queue (drain_open {drain:.1f} us, _send_ready's own scan "
            f"{ready - expire:.1f} us, _expire_in_flight {expire:.1f} us)"
        )
    finally:
        await p.close()


async def measure_blocked(bootstrap: str, topic: str, parts: int) -> str:
    p = await _producer_on(bootstrap, topic, parts)
    try:
        s, acc = p.sender, p.accumulator
        if not (_has(s, "_send_ready", "_broker_in_flight") and _has(acc, "drain_open")):
            return "blocked: this kpax's sender has no _send_ready to measure"
        leader = next(iter(p.cluster.snapshot.brokers))
        s._broker_in_flight[leader] = s.max_in_flight  # the broker is "busy"
        try:
            for i in range(parts):
                await p.send(topic, b"x", partition=i)
            acc.flushing += 1  # close every open batch: each partition has a ready one
            acc.drain_open(time.monotonic())
            acc.flushing -= 1
            ready = sum(1 for q in acc.all_queues() if q.ready)
            now = time.monotonic()
            us = cpu_us(lambda: s._send_ready(now), max(100, 100_000 // parts))
        finally:
            s._broker_in_flight[leader] = 0
            s.wake()
        await p.flush()
        return (
            f"blocked P={parts:5d}: {ready} ready partitions, broker at max_in_flight: "
            f"_send_ready {us:7.1f} us/round = {us / max(ready, 1) * 1000:4.0f} ns per ready "
            "partition (nothing sent)"
        )
    finally:
        await p.close()


def _keys_per_partition(parts: int) -> list[bytes]:
    """``key-<n>`` keys, the i-th one partitioned (murmur2, as the default partitioner) to
    partition i."""
    from kpax.producer.partitioner import partition_for_key

    keys: list[bytes | None] = [None] * parts
    left, n = parts, 0
    while left:
        key = b"key-%d" % n
        i = partition_for_key(key, parts)
        if keys[i] is None:
            keys[i] = key
            left -= 1
        n += 1
    return [k for k in keys if k is not None]


def measure_batch(parts: int = 1000) -> list[str]:
    """Each step of a 1-record batch, without a broker (no loop, no connection)."""
    from kpax.producer.client import AsyncProducer
    from kpax.proto.messages import ProduceResponse
    from kpax.proto.produce_wire import decode_produce_response, encode_produce

    p = AsyncProducer(
        "127.0.0.1:9", linger_ms=5, buffer_memory=BUFFER, enable_idempotence=False, acks=1
    )
    p.num_partitions["t"] = parts
    acc = p.accumulator
    value = random.Random(1).randbytes(100)
    keys = _keys_per_partition(parts)  # keys[i] goes to partition i: each opens a batch
    append = p._try_append
    rounds = 40
    acc.flushing += 1  # drain_open closes every open batch
    t_open = t_seal = 0.0
    for _ in range(rounds):
        t = time.thread_time()
        for i in range(parts):
            append("t", value, keys[i], None, None, None, parts)  # keyed: a new batch each
        t_open += time.thread_time() - t
        t = time.thread_time()
        acc.drain_open(time.monotonic())
        t_seal += time.thread_time() - t
    acc.flushing -= 1
    batches = rounds * parts
    data = next(q.ready[0].data for q in acc.all_queues() if q.ready)
    assert data is not None
    tid = uuid.uuid4()
    topics = [(tid, [(i, data) for i in range(parts)])]
    enc = cpu_us(lambda: encode_produce(13, 1, "kpax", None, -1, 30000, topics), 200) / parts
    r = ProduceResponse
    body = r(
        responses=[
            r.TopicProduceResponse(
                topic_id=tid,
                partition_responses=[
                    r.PartitionProduceResponse(index=i, error_code=0, base_offset=i)
                    for i in range(parts)
                ],
            )
        ]
    ).encode(13)
    frame = struct.pack(">i", 1) + b"\x00" + body  # correlation id, no tagged fields
    dec = cpu_us(lambda: decode_produce_response(frame, 13), 200) / parts
    done = [b for q in acc.all_queues() for b in q.ready]
    for b in done:  # (as the sender does when it puts them in a request)
        b.fire(BatchEvent.SEND)
    t = time.thread_time()
    for b in done:
        p.sender.complete(b, 0, -1, None)
    t_done = time.thread_time() - t
    return [
        f"batch: open on the Python send path, keyed (try_append: murmur2 in Python -> "
        f"Accumulator.append -> new ProducerBatch, RecordFuture) {t_open / batches * 1e6:6.2f} us",
        f"batch: close and seal (drain_open -> Sealer.seal -> encode_columns) "
        f"{t_seal / batches * 1e6:6.2f} us",
        f"batch: its part of a Produce request's encoding (v13, {len(data)}-byte batch) "
        f"{enc:6.2f} us",
        f"batch: its part of the response's decoding {dec:6.2f} us",
        f"batch: complete (Sender.complete: metrics, futures, Accumulator.release) "
        f"{t_done / len(done) * 1e6:6.2f} us",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--partitions", default="1,10,100,1000,3000")
    ap.add_argument("--parts", default="round,blocked,batch")
    a = ap.parse_args(argv)
    counts = [int(x) for x in a.partitions.split(",")]
    what = {x.strip() for x in a.parts.split(",")}
    if "batch" in what:
        for line in measure_batch():
            print(line, flush=True)
    if not what & {"round", "blocked"}:
        return 0
    cluster = None
    if a.bootstrap is None:
        from kpax.testing import start_kafka

        cluster = start_kafka()
        a.bootstrap = cluster.bootstrap
    try:
        for parts in counts:
            topic = h.make_topic(a.bootstrap, parts, prefix="bench-internals")
            try:
                for part, fn in (("round", measure_round), ("blocked", measure_blocked)):
                    if part in what:
                        print(asyncio.run(fn(a.bootstrap, topic, parts)), flush=True)
            finally:
                h.delete_topic(a.bootstrap, topic)
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
