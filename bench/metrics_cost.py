"""What kpax's metrics cost on the producer's send path: the same run, interleaved.

Producers built with the counters on (the default) and off (the private switch
``kpax.metrics._ENABLED``) take turns sending the same records to the same
broker; each round times ``send`` of every record plus ``flush`` (wall time, and the
process's CPU time, which other load on a shared machine disturbs less). The
counters are per batch (recorded by the sender on completion) and per
request (the broker connection), never per record: ``send`` (the C path) is
the same code either way.

    python -m bench.metrics_cost --bootstrap host:9092 [--records 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
import uuid

import kpax
import kpax.metrics

_recordings = 0  # sensor recordings in the last round with metrics on
_batches = 0


def one_round(
    bootstrap: str, topic: str, n: int, value: bytes, enabled: bool
) -> tuple[float, float]:
    """(records per second of wall time, CPU microseconds of this process per record)."""
    kpax.metrics._ENABLED = enabled
    try:
        p = kpax.Producer(bootstrap, linger_ms=5)
    finally:
        kpax.metrics._ENABLED = True
    try:
        p.send(topic, value).result(30)  # metadata and connection outside the timing
        send = p.send
        start = time.perf_counter()
        cpu = time.process_time()
        for _ in range(n):
            send(topic, value)
        p.flush()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        if enabled:
            assert p.metrics()["record-send-total"] == n + 1
            global _recordings, _batches
            sensors = p.aio._metrics._sensors  # type: ignore[union-attr]
            _recordings = sum(s.count for s in sensors.values())
            _batches = sensors["batch-size"].count
        return n / elapsed, cpu / n * 1e6
    finally:
        p.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    topic = f"bench-metrics-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(args.bootstrap) as a:
        a.create_topics([kpax.NewTopic(topic, num_partitions=3, replication_factor=1)])
    value = b"x" * args.size
    rates: dict[bool, list[float]] = {True: [], False: []}
    cpus: dict[bool, list[float]] = {True: [], False: []}
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for enabled in order:
            rate, cpu = one_round(args.bootstrap, topic, args.records, value, enabled)
            rates[enabled].append(rate)
            cpus[enabled].append(cpu)
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    # Each round's on/off pair ran back to back: their ratio cancels most of the
    # drift of a shared machine, which the medians of each side do not.
    pairs = [a / b for a, b in zip(rates[True], rates[False], strict=True)]
    print(
        f"records/s, median of {args.rounds} interleaved rounds of {args.records} x {args.size} B"
    )
    print(f"  metrics off: {off:,.0f}  {[round(x) for x in rates[False]]}")
    print(f"  metrics on:  {on:,.0f}  {[round(x) for x in rates[True]]}")
    print(f"  on/off of the medians: {on / off:.3f} (cost {100 * (1 - on / off):+.1f}%)")
    ratio = statistics.median(pairs)
    print(
        f"  on/off per round, median: {ratio:.3f} (cost {100 * (1 - ratio):+.1f}%), "
        f"all: {[round(x, 3) for x in pairs]}"
    )
    # CPU time of this process (caller and I/O threads) per record: what the
    # counters add, much less disturbed by other load on the machine than wall time.
    con, coff = statistics.median(cpus[True]), statistics.median(cpus[False])
    print(
        f"  CPU us/record, median: off {coff:.3f}, on {con:.3f} "
        f"(cost {100 * (con / coff - 1):+.1f}%)"
    )
    # Accounting, in this process: what the recordings of the last round cost per
    # record (timeit of one recording, an upper bound: it includes a call).
    sensor = kpax.metrics.Metrics().sensor("x")
    per = min(timeit.repeat(lambda: sensor.record(5.0), number=100_000, repeat=5)) / 100_000
    work = _recordings * per / args.records
    print(
        f"  accounting: {_recordings} recordings ({_batches} batches) for "
        f"{args.records + 1} records, {per * 1e9:.0f} ns each: {work * 1e9:.1f} ns/record, "
        f"{100 * work / (con * 1e-6):.2f}% of the CPU per record"
    )
    with kpax.Admin(args.bootstrap) as a:
        a.delete_topics([topic])


if __name__ == "__main__":
    main()
