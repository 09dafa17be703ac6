"""FakeKafka's own costs: start+stop time, and a kpax.Producer's records/s through it.

The fake is a test tool; these figures say what a test pays for it. Start+stop:
``--starts`` times a 1-broker and a 3-broker FakeKafka started and stopped.
Throughput: ``--records`` values of 100 bytes from a kpax.Producer (acks=1,
linger_ms=5, batch_size=16384, compression ``--compression``) to a 1-partition
topic, flushed; the producer and the fake share this process (and its GIL).

    python -m bench.fake_kafka [--starts 20] [--records 200000] [--compression none]
"""

from __future__ import annotations

import argparse
import statistics
import time

import kpax
from kpax.testing import FakeKafka


def start_stop(brokers: int, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        with FakeKafka(brokers) as fake:
            assert fake.bootstrap
        out.append(time.perf_counter() - t0)
    return out


def produce(records: int, compression: str) -> float:
    value = b"x" * 100
    with (
        FakeKafka(1, topics={"bench": 1}) as fake,
        kpax.Producer(
            fake.bootstrap, acks=1, linger_ms=5, batch_size=16384, compression_type=compression
        ) as p,
    ):
        p.send("bench", value).result(10)  # connections and metadata outside the timing
        t0 = time.perf_counter()
        for _ in range(records):
            p.send("bench", value)
        p.flush(120)
        elapsed = time.perf_counter() - t0
        assert fake.high_watermark("bench") == records + 1
    return records / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--compression", default="none")
    args = ap.parse_args()
    start_stop(1, 2)  # imports and first-use costs
    for brokers in (1, 3):
        times = start_stop(brokers, args.starts)
        print(
            f"start+stop, {brokers} broker(s): median {statistics.median(times) * 1000:.1f} ms, "
            f"max {max(times) * 1000:.1f} ms ({args.starts} runs)"
        )
    for _ in range(3):
        rate = produce(args.records, args.compression)
        print(f"kpax.Producer through FakeKafka ({args.compression}): {rate:,.0f} records/s")


if __name__ == "__main__":
    main()
