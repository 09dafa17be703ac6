"""Where a kpax.Producer's time goes: CPU per record of the caller's thread and
of the I/O thread, read from /proc (user + system ticks per thread), which other
load on a shared machine disturbs less than wall time.

Sends ``--records`` values of 100 bytes to a fresh 1-partition topic (acks=1,
linger_ms=5, batch_size=16384, as in ``python -m bench producer``; compression
``--compression``, none by default), flushes, and
prints the wall rate, both threads' CPU per record (user + system) and their
context switches, ``--rounds`` times.
Linux only (per-thread /proc stat).

    python -m bench.producer_cpu [--bootstrap host:9092] [--records 500000] [--rounds 3]
                                 [--compression none|lz4|...]

Without ``--bootstrap`` a local broker is started with kpax.testing.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
import uuid

import kpax
from kpax.testing import start_kafka


def _cpu_ticks(native_id: int) -> tuple[int, int]:
    """(user, system) CPU ticks of one thread of this process."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime


def _switches(native_id: int) -> int:
    """Context switches (voluntary + involuntary) of one thread of this process."""
    with open(f"/proc/self/task/{native_id}/status") as f:
        return sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)


def one_round(bootstrap: str, n: int, compression: str = "none") -> str:
    topic = f"bench-cpu-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(bootstrap) as admin:
        admin.create_topics([kpax.NewTopic(topic, 1, 1)]).raise_for_errors()
    rnd = random.Random(42)
    values = [rnd.randbytes(100) for _ in range(10_000)]
    hz = os.sysconf("SC_CLK_TCK")
    with kpax.Producer(
        bootstrap, acks=1, linger_ms=5, batch_size=16384, compression_type=compression
    ) as p:
        p.send(topic, b"warm-up").result(30)
        io = next(t.native_id for t in threading.enumerate() if t.name.startswith("kpax-producer"))
        caller = threading.get_native_id()
        assert io is not None
        s0 = _switches(io) + _switches(caller)
        io0, c0, w0 = _cpu_ticks(io), _cpu_ticks(caller), time.perf_counter()
        send = p.send
        for i in range(n):
            send(topic, values[i % 10_000])
        p.flush()
        wall = time.perf_counter() - w0
        io1, c1 = _cpu_ticks(io), _cpu_ticks(caller)
        switches = (_switches(io) + _switches(caller) - s0) / n * 1000

    def per_record(t0: tuple[int, int], t1: tuple[int, int]) -> str:
        user, system = ((b - a) / hz / n * 1e9 for a, b in zip(t0, t1, strict=True))
        return f"{user + system:5.0f} ns ({user:4.0f} user + {system:4.0f} system)"

    with kpax.Admin(bootstrap) as admin:
        admin.delete_topics([topic])
    return (
        f"{n / wall:>10,.0f} records/s   CPU per record: caller thread {per_record(c0, c1)}, "
        f"I/O thread {per_record(io0, io1)}; {switches:.1f} context switches per 1,000 records"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compression", default="none")
    args = ap.parse_args()
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = start_kafka()
        bootstrap = cluster.bootstrap
    try:
        for _ in range(args.rounds):
            print(one_round(bootstrap, args.records, args.compression), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
