"""Where a kpax.Producer's time goes: CPU per record of the caller's thread and
of the I/O thread, read from /proc (user + system ticks per thread), which other
load on a shared machine disturbs less than wall time.

Sends ``--records`` values of 100 bytes to a fresh 1-partition topic (acks=1,
linger_ms=5, batch_size=16384, as in ``python -m bench producer``), flushes, and
prints the wall rate and both threads' CPU per record, ``--rounds`` times.
Linux only (per-thread /proc stat).

    python -m bench.producer_cpu [--bootstrap host:9092] [--records 500000] [--rounds 3]

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


def _cpu_ticks(native_id: int) -> int:
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def one_round(bootstrap: str, n: int) -> str:
    topic = f"bench-cpu-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(bootstrap) as admin:
        admin.create_topics([kpax.NewTopic(topic, 1, 1)]).raise_for_errors()
    rnd = random.Random(42)
    values = [rnd.randbytes(100) for _ in range(10_000)]
    hz = os.sysconf("SC_CLK_TCK")
    with kpax.Producer(bootstrap, acks=1, linger_ms=5, batch_size=16384) as p:
        p.send(topic, b"warm-up").result(30)
        io = next(t.native_id for t in threading.enumerate() if t.name.startswith("kpax-producer"))
        caller = threading.get_native_id()
        assert io is not None
        io0, c0, w0 = _cpu_ticks(io), _cpu_ticks(caller), time.perf_counter()
        send = p.send
        for i in range(n):
            send(topic, values[i % 10_000])
        p.flush()
        wall = time.perf_counter() - w0
        io_ns = (_cpu_ticks(io) - io0) / hz / n * 1e9
        caller_ns = (_cpu_ticks(caller) - c0) / hz / n * 1e9
    with kpax.Admin(bootstrap) as admin:
        admin.delete_topics([topic])
    return (
        f"{n / wall:>10,.0f} records/s   CPU per record: caller thread {caller_ns:5.0f} ns, "
        f"I/O thread {io_ns:5.0f} ns"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = start_kafka()
        bootstrap = cluster.bootstrap
    try:
        for _ in range(args.rounds):
            print(one_round(bootstrap, args.records), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
