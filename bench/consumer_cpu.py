"""Where a kpax consumer's time goes: CPU per record of the caller's thread and of
the I/O thread, read from /proc (schedstat), which other load on a shared machine
disturbs less than wall time.

Fills a fresh topic of ``--partitions`` partitions (1 by default) once with
``--records`` values of 100 bytes (a kpax.Producer, linger_ms=5, batch_size=16384),
then reads it from the beginning ``--rounds`` times with each face of ``--faces``
("sync,asyncio"), every value touched (``len(rec.value)``) as ``python -m bench
consumer`` does (sync: iteration; asyncio: ``poll(max_records=10000)``), and prints
per round and face:

- the wall rate;
- each thread's CPU per record, and how long it waited for a CPU (other load);
  with the asyncio face one thread does everything;
- how many times the application found the buffer empty and waited for a fetch
  (``FetchBuffer.wait_sync`` / ``wait_async`` calls): about one per fetch
  response means no fetch was in flight while the records were read.

Linux only (per-thread /proc schedstat).

    python -m bench.consumer_cpu [--bootstrap host:9092] [--records 1000000]
                                 [--partitions 1] [--rounds 3] [--faces sync,asyncio]
                                 [--topic NAME] [--option NAME=JSON ...]

``--topic`` reads a topic filled already (its first ``--partitions`` partitions,
``--records`` records in all), e.g. to compare two kpax revisions
(``PYTHONPATH``) on the same records.

Without ``--bootstrap`` a local broker is started with kpax.testing.

Imports: bench.harness, kpax and the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from typing import Any

from bench import harness as h


def _threads() -> dict[str, tuple[str, int, int]]:
    """tid -> (thread name, ns on a CPU, ns waiting for a CPU)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait, _ = f.read().split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[tid] = (name, int(run), int(wait))
    return out


def fill(bootstrap: str, partitions: int, records: int) -> str:
    import kpax

    topic = f"consumer-cpu-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(bootstrap) as admin:
        admin.create_topics([kpax.NewTopic(topic, partitions, 1)])
    pool = [os.urandom(100) for _ in range(1000)]
    with kpax.Producer(bootstrap, linger_ms=5, batch_size=16384) as p:
        for i in range(records):
            p.send(topic, pool[i % 1000])
        p.flush(120)
    return topic


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    face: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    import kpax
    from kpax.consumer.buffer import FetchBuffer

    waits = [0]
    real_sync, real_async = FetchBuffer.wait_sync, FetchBuffer.wait_async

    def wait_sync(self: FetchBuffer, timeout: float) -> bool:
        waits[0] += 1
        return real_sync(self, timeout)

    async def wait_async(self: FetchBuffer, timeout: float) -> bool:
        waits[0] += 1
        return await real_async(self, timeout)

    FetchBuffer.wait_sync = wait_sync  # type: ignore[method-assign]
    FetchBuffer.wait_async = wait_async  # type: ignore[method-assign]
    tps = [kpax.TopicPartition(topic, p) for p in range(partitions)]
    opts: dict[str, Any] = {"auto_offset_reset": "earliest", "enable_auto_commit": False}
    opts.update(extra or {})
    try:
        if face == "sync":
            c = kpax.Consumer(bootstrap, **opts)
            c.assign(tps)
            n = nbytes = 0
            waits[0] = 0
            before, t0 = _threads(), time.perf_counter()
            for rec in c:
                nbytes += len(rec.value)
                n += 1  # noqa: SIM113 - the same loop as bench.consumer
                if n >= records:
                    break
            elapsed, after = time.perf_counter() - t0, _threads()
            c.close()
        else:

            async def main() -> tuple[int, float, Any, Any]:
                async with kpax.aio.Consumer(bootstrap, **opts) as c:
                    await c.assign(tps)
                    n = nbytes = 0
                    waits[0] = 0
                    before, t0 = _threads(), time.perf_counter()
                    while n < records:
                        for rec in await c.poll(1.0, max_records=10_000):
                            nbytes += len(rec.value)
                            n += 1
                    return n, time.perf_counter() - t0, before, _threads()

            n, elapsed, before, after = asyncio.run(main())
    finally:
        FetchBuffer.wait_sync = real_sync  # type: ignore[method-assign]
        FetchBuffer.wait_async = real_async  # type: ignore[method-assign]
    threads = []
    for tid, (name, run, wait) in after.items():
        if tid in before and run - before[tid][1] > 1e6:
            threads.append((name, (run - before[tid][1]) / n, (wait - before[tid][2]) / n))
    return {"records": n, "rate": n / elapsed, "threads": threads, "waits": waits[0]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.consumer_cpu", description=__doc__)
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--faces", default="sync,asyncio")
    ap.add_argument("--topic", default=None, help="read this topic (filled already) instead")
    ap.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="a consumer option for every face, e.g. --option fetch_buffer_chunks=4 (repeatable)",
    )
    a = ap.parse_args(argv)
    extra = {k: json.loads(v) for k, v in (o.split("=", 1) for o in a.option)}
    faces = [f.strip() for f in a.faces.split(",") if f.strip()]
    if a.bootstrap:
        os.environ["KPAX_TEST_BOOTSTRAP"] = a.bootstrap
    with h.broker() as bootstrap:
        topic = a.topic or fill(bootstrap, a.partitions, a.records)
        for rnd in range(1, a.rounds + 1):
            for face in faces:
                r = consume(bootstrap, topic, a.partitions, a.records, face, extra)
                cpu = "; ".join(
                    f"thread {i} ({name}) {run:.0f} ns CPU + {wait:.0f} ns waiting for a CPU"
                    for i, (name, run, wait) in enumerate(r["threads"], 1)
                )
                total = sum(run for _, run, _ in r["threads"])
                print(
                    f"round {rnd} {face:8s} {r['rate']:>12,.0f} rec/s  CPU {total:.0f} ns/record "
                    f"({cpu}); buffer found empty {r['waits']} times"
                )


if __name__ == "__main__":
    main()
