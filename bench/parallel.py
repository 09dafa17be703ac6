"""The parallel consumer (``kpax.ParallelConsumer``, ``kpax.aio.ParallelConsumer``)
against the plain consumer loop, on one broker, in one run.

Usage::

    python -m bench parallel [--records 20000] [--keys 1000] [--plain-sample 1000]
                             [--full] [--awaits 10000] [--await-records 100000]
                             [--scenarios "io,asyncio,cpu"] [--no-write]

Scenarios:

- ``io`` (issue 32's target): ``--records`` keyed records (``--keys`` keys,
  4 partitions, the default partitioner: a key in one partition), a handler
  that sleeps 5 ms (I/O-bound work). Rows: the plain loop (``kpax.Consumer``,
  ``poll``, the handler for each record, ``commit()`` after each poll); the sync
  parallel consumer, ``max_concurrency=200``, ordering ``key`` and
  ``unordered``; the asyncio one (``await asyncio.sleep(0.005)``), ``key``. The
  plain loop handles one record at a time, so its time per record is the same
  for every record: it is timed on its first ``--plain-sample`` records and
  extrapolated to ``--records`` (``--full``: timed on all of them). Each
  parallel row is a fresh group reading the topic from the start; the clock
  starts at the first record handed to a handler and stops at the last
  handler's end (group join excluded). Every key's records are checked to have
  been processed in offset order.
- ``asyncio``: ``--await-records`` records, ``kpax.aio.ParallelConsumer``
  with ``max_concurrency=--awaits`` (10,000), ordering ``unordered``, a handler
  that awaits ``asyncio.sleep(0.005)``: records/s, the most handlers that were
  awaiting at once, and the time against the ideal (records / awaits x 5 ms).
- ``cpu``: 2,000 records, a handler that computes for about 2 ms (pure Python,
  calibrated with ``time.thread_time``) with ``max_concurrency`` 2 and 8 (sync
  face, threads): the handlers' CPU time over the wall time says how many cores
  were busy. Under the GIL the threads take turns, so 8 are no faster than 2
  (and no more than one core is busy); on a free-threaded Python (3.13t+,
  ``sys._is_gil_enabled()`` False) they would run on separate cores.

Writes bench/results/parallel.{md,json} (``--no-write``: prints only).

Imports: bench.harness, kpax.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import threading
import time
import uuid
from typing import Any

from bench import harness as h

SLEEP = 0.005


def _produce(bootstrap: str, topic: str, n: int, keys: int) -> None:
    import kpax

    with kpax.Producer(bootstrap, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, key=b"k%d" % (i % keys))
        p.flush(60)


def _group() -> str:
    return "bench-pc-" + uuid.uuid4().hex[:8]


def plain_loop(bootstrap: str, topic: str, sample: int) -> tuple[float, int]:
    """(seconds, records) of the plain loop over its first ``sample`` records."""
    import kpax

    with kpax.Consumer(
        bootstrap, group_id=_group(), auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.subscribe([topic])
        got, start = 0, 0.0
        while got < sample:
            records = c.poll(1.0)
            for _rec in records[: sample - got]:
                if not start:
                    start = time.monotonic()
                time.sleep(SLEEP)
                got += 1
            if records:
                c.commit()
        return time.monotonic() - start, got


class _Clock:
    """First handler start to last handler end; per-key finishing order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()
        self.first = 0.0
        self.last = 0.0
        self.count = 0
        self.order: dict[tuple[int, Any], list[int]] = collections.defaultdict(list)

    def begin(self) -> None:
        if not self.first:
            self.first = time.monotonic()

    def end(self, rec: Any) -> bool:
        with self.lock:
            self.order[rec.partition, rec.key].append(rec.offset)
            self.count += 1
            if self.count == self.n:
                self.last = time.monotonic()
                return True
        return False

    def in_order(self) -> bool:
        return all(v == sorted(v) for v in self.order.values())


def parallel_sync(bootstrap: str, topic: str, n: int, ordering: str) -> tuple[float, bool]:
    import kpax

    clock = _Clock(n)
    pc = kpax.ParallelConsumer(
        bootstrap,
        group_id=_group(),
        auto_offset_reset="earliest",
        ordering=ordering,
        max_concurrency=200,
    )

    def handle(rec: Any) -> None:
        clock.begin()
        time.sleep(SLEEP)
        if clock.end(rec):
            pc.stop()

    with pc:
        pc.subscribe([topic])
        pc.run(handle, handle_signals=False)
    return clock.last - clock.first, clock.in_order()


def parallel_async(
    bootstrap: str, topic: str, n: int, ordering: str, concurrency: int
) -> tuple[float, bool, int]:
    import kpax

    clock = _Clock(n)
    state = {"now": 0, "peak": 0}

    async def main() -> None:
        async with kpax.aio.ParallelConsumer(
            bootstrap,
            group_id=_group(),
            auto_offset_reset="earliest",
            ordering=ordering,
            max_concurrency=concurrency,
        ) as pc:
            await pc.subscribe([topic])

            async def handle(rec: Any) -> None:
                clock.begin()
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
                await asyncio.sleep(SLEEP)
                state["now"] -= 1
                if clock.end(rec):
                    pc.stop()

            await pc.run(handle, handle_signals=False)

    asyncio.run(main())
    return clock.last - clock.first, clock.in_order(), state["peak"]


def _burn(iterations: int) -> int:
    """Pure-Python work (holds the GIL throughout)."""
    x = 0
    for i in range(iterations):
        x += i * i % 7
    return x


def _iterations_for(seconds: float) -> int:
    """How many :func:`_burn` iterations take about ``seconds`` of CPU here."""
    start = time.thread_time()
    _burn(200_000)
    return int(200_000 * seconds / max(time.thread_time() - start, 1e-6))


def parallel_cpu(
    bootstrap: str, topic: str, n: int, threads: int, iterations: int
) -> tuple[float, float]:
    """(wall seconds, handler CPU seconds) of ``n`` CPU-bound records."""
    import kpax

    clock = _Clock(n)
    cpu = [0.0]
    pc = kpax.ParallelConsumer(
        bootstrap,
        group_id=_group(),
        auto_offset_reset="earliest",
        ordering="unordered",
        max_concurrency=threads,
    )

    def handle(rec: Any) -> None:
        clock.begin()
        start = time.thread_time()
        _burn(iterations)
        used = time.thread_time() - start
        with clock.lock:
            cpu[0] += used
        if clock.end(rec):
            pc.stop()

    with pc:
        pc.subscribe([topic])
        pc.run(handle, handle_signals=False)
    return clock.last - clock.first, cpu[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench parallel")
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--plain-sample", type=int, default=1000)
    ap.add_argument("--full", action="store_true", help="time the plain loop on every record")
    ap.add_argument("--awaits", type=int, default=10_000)
    ap.add_argument("--await-records", type=int, default=100_000)
    ap.add_argument("--scenarios", default="io,asyncio,cpu")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    scenarios = {s.strip() for s in args.scenarios.split(",")}
    results: list[h.Result] = []
    rows: list[str] = []
    n = args.records
    with h.broker() as bootstrap:
        if "io" in scenarios:
            topic = h.make_topic(bootstrap, 4, prefix="bench-pc")
            _produce(bootstrap, topic, n, args.keys)
            sample = n if args.full else min(args.plain_sample, n)
            seconds, got = plain_loop(bootstrap, topic, sample)
            plain = seconds * n / got
            how = "timed" if got == n else f"{got} timed ({seconds:.2f} s), extrapolated"
            results.append(h.make_result("plain loop", "io", records=n, seconds=plain))
            rows.append(f"| plain consumer loop | {plain:.1f} s ({how}) | 1.0x | yes |")
            for face, ordering in (("sync", "key"), ("sync", "unordered"), ("asyncio", "key")):
                if face == "sync":
                    took, ordered = parallel_sync(bootstrap, topic, n, ordering)
                else:
                    took, ordered, _peak = parallel_async(bootstrap, topic, n, ordering, 200)
                name = f"ParallelConsumer {face}, {ordering}, max_concurrency=200"
                results.append(h.make_result(name, "io", records=n, seconds=took))
                check = "n/a" if ordering == "unordered" else "yes" if ordered else "NO"
                rows.append(f"| {name} | {took:.2f} s | {plain / took:.1f}x | {check} |")
                print(rows[-1], flush=True)
            h.delete_topic(bootstrap, topic)
        if "asyncio" in scenarios:
            m, c = args.await_records, args.awaits
            topic = h.make_topic(bootstrap, 4, prefix="bench-pc")
            _produce(bootstrap, topic, m, m)
            took, _ordered, peak = parallel_async(bootstrap, topic, m, "unordered", c)
            ideal = m / c * SLEEP
            results.append(
                h.make_result("asyncio awaits", "asyncio", records=m, seconds=took, peak=peak)
            )
            rows.append(
                f"| kpax.aio.ParallelConsumer, {c:,} concurrent 5 ms awaits, {m:,} records "
                f"| {took:.2f} s ({m / took:,.0f} records/s; at most {peak:,} at once; ideal "
                f"{ideal:.2f} s) | | |"
            )
            print(rows[-1], flush=True)
            h.delete_topic(bootstrap, topic)
        if "cpu" in scenarios:
            cpu_n = 2000
            iterations = _iterations_for(0.002)
            topic = h.make_topic(bootstrap, 4, prefix="bench-pc")
            _produce(bootstrap, topic, cpu_n, cpu_n)
            base = 0.0
            gil = getattr(sys, "_is_gil_enabled", lambda: True)()
            for threads in (2, 8):
                took, cpu = parallel_cpu(bootstrap, topic, cpu_n, threads, iterations)
                base = base or took
                name = f"~2 ms of Python CPU per record, {threads} threads"
                results.append(
                    h.make_result(name, "cpu", records=cpu_n, seconds=took, cpu_seconds=cpu)
                )
                rows.append(
                    f"| {name} (GIL {'on' if gil else 'off'}) | {took:.2f} s (handlers' CPU "
                    f"{cpu:.2f} s: {cpu / took:.2f} cores busy) | {base / took:.2f}x | |"
                )
                print(rows[-1], flush=True)
            h.delete_topic(bootstrap, topic)
    head = "| run | time | vs plain loop (cpu: vs 2 threads) | key order kept |"
    table = "\n".join([head, "|---|---:|---:|---|", *rows])
    print(table)
    if not args.no_write:
        header = (
            f"{n:,} records, {args.keys:,} keys, 4 partitions, a 5 ms handler unless said; "
            "see bench/parallel.py for what is timed."
        )
        h.write_results(
            "parallel", table, results, title="Parallel consumer", header=header, chart=False
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
