"""Where a kpax.Producer's time goes: CPU per record and per batch of the caller's
thread and of the I/O thread, read from /proc (user + system ticks per thread),
which other load on a shared machine disturbs less than wall time.

Sends ``--records`` values of 100 bytes to a fresh topic of ``--partitions``
partitions (1 by default), keyless or with ``--keyed`` the key ``key-<i>`` (as
``python -m bench producer``'s keyed scenarios), acks ``--acks`` (1), linger_ms=5,
batch_size=16384 (``--batch-size``; 0: kpax's default), compression
``--compression`` (none by default); flushes, and prints, ``--rounds`` times:

- the wall rate, records per batch and batches per Produce request;
- each thread's CPU per record and per batch (/proc schedstat, user and
  system; the user share from the stat ticks), the I/O thread's CPU per
  Produce request, and how long each thread waited for a CPU (other load);
  with ``--face asyncio`` there is one thread (the loop's, which also runs
  the sends);
- the sender's rounds (``Sender._round`` calls, when the sender has them):
  how many, and the I/O thread's CPU inside them, per round -- the cost that
  grows with the number of partitions;
- context switches per 1,000 records;
- peak RSS (VmHWM, reset before each round where Linux allows) against the RSS
  before the round, next to ``buffer_memory``.

Linux only (per-thread /proc stat). ``--out NAME`` also writes the table to
bench/results/NAME.{md,json}.

    python -m bench.producer_cpu [--bootstrap host:9092] [--records 500000] [--rounds 3]
                                 [--partitions 1000 --keyed] [--face sync|asyncio]
                                 [--acks 1|all] [--batch-size 16384] [--compression none|lz4]
                                 [--out producer-cpu-keyed]

Without ``--bootstrap`` a local broker is started with kpax.testing.

Imports: bench.harness, kpax and the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import kpax
from bench import harness as h


def _cpu_ticks(native_id: int) -> tuple[int, int]:
    """(user, system) CPU ticks of one thread of this process."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime


def _sched(native_id: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds waiting for one) of one thread: /proc schedstat,
    in ns, finer than the stat ticks; the wait is what other load costs it."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            on, wait, _ = f.read().split()
    except OSError:
        return 0.0, 0.0
    return int(on) / 1e9, int(wait) / 1e9


def _switches(native_id: int) -> int:
    """Context switches (voluntary + involuntary) of one thread of this process."""
    with open(f"/proc/self/task/{native_id}/status") as f:
        return sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)


def _status_kib(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM), 0 if absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux 4.0+; ignored where not allowed)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class RoundMeter:
    """Counts the sender's rounds and the I/O thread's CPU inside them
    (``time.thread_time``), by wrapping the instance's ``_round`` when there is
    one; ``available`` is False otherwise (a sender without rounds)."""

    def __init__(self, sender: Any) -> None:
        self.count = 0
        self.cpu = 0.0
        inner: Callable[[], None] | None = getattr(sender, "_round", None)
        self.available = inner is not None
        if inner is None:
            return

        def metered() -> None:
            t = time.thread_time()
            try:
                inner()
            finally:
                self.cpu += time.thread_time() - t
                self.count += 1

        sender._round = metered

    def reset(self) -> None:
        self.count = 0
        self.cpu = 0.0


def _counts(core: Any) -> tuple[int, int]:
    """(batches completed, Produce requests) from the producer's own counters."""
    sender = core.sender
    batches = getattr(getattr(sender, "m_batch", None), "count", 0)
    requests = getattr(getattr(sender, "m_per_request", None), "count", 0)
    return int(batches), int(requests)


def _data(a: argparse.Namespace) -> tuple[list[bytes], list[bytes] | None]:
    rnd = random.Random(42)
    pool = [rnd.randbytes(100) for _ in range(10_000)]
    values = [pool[i % 10_000] for i in range(a.records)]
    keys = [b"key-%d" % i for i in range(a.records)] if a.keyed else None
    return values, keys


def _config(a: argparse.Namespace) -> dict[str, Any]:
    cfg: dict[str, Any] = {"acks": a.acks, "linger_ms": 5, "compression_type": a.compression}
    if a.batch_size:
        cfg["batch_size"] = a.batch_size
    return cfg


def one_round_sync(a: argparse.Namespace, topic: str) -> dict[str, Any]:
    values, keys = _data(a)
    hz = os.sysconf("SC_CLK_TCK")
    n = a.records
    with kpax.Producer(a.bootstrap, **_config(a)) as p:
        p.send(topic, b"warm-up").result(30)
        core = p.aio
        meter = RoundMeter(core.sender)
        io = next(t.native_id for t in threading.enumerate() if t.name.startswith("kpax-producer"))
        caller = threading.get_native_id()
        assert io is not None
        b0, r0 = _counts(core)
        meter.reset()
        _reset_peak_rss()
        rss0 = _status_kib("VmRSS")
        s0 = _switches(io) + _switches(caller)
        q0 = {"caller": _sched(caller), "I/O": _sched(io)}
        io0, c0, w0 = _cpu_ticks(io), _cpu_ticks(caller), time.perf_counter()
        send = p.send
        if keys is None:
            for v in values:
                send(topic, v)
        else:
            for v, k in zip(values, keys, strict=True):
                send(topic, v, k)
        p.flush()
        wall = time.perf_counter() - w0
        io1, c1 = _cpu_ticks(io), _cpu_ticks(caller)
        q1 = {"caller": _sched(caller), "I/O": _sched(io)}
        switches = _switches(io) + _switches(caller) - s0
        b1, r1 = _counts(core)
        peak = _status_kib("VmHWM")
        buffer_memory = core.settings.buffer_memory

    def secs(t0: tuple[int, int], t1: tuple[int, int]) -> tuple[float, float]:
        return (t1[0] - t0[0]) / hz, (t1[1] - t0[1]) / hz

    return {
        "face": "sync",
        "records": n,
        "seconds": wall,
        "batches": b1 - b0,
        "requests": r1 - r0,
        "threads": {"caller": secs(c0, c1), "I/O": secs(io0, io1)},
        "sched": {k: (q1[k][0] - q0[k][0], q1[k][1] - q0[k][1]) for k in q0},
        "rounds": meter.count if meter.available else None,
        "round_cpu": meter.cpu,
        "switches": switches,
        "rss_before_kib": rss0,
        "rss_peak_kib": peak,
        "buffer_memory": buffer_memory,
    }


def one_round_asyncio(a: argparse.Namespace, topic: str) -> dict[str, Any]:
    values, keys = _data(a)
    n = a.records

    async def main() -> dict[str, Any]:
        async with kpax.aio.Producer(a.bootstrap, **_config(a)) as p:
            await p.send_and_wait(topic, b"warm-up")
            meter = RoundMeter(p.sender)
            b0, r0 = _counts(p)
            meter.reset()
            _reset_peak_rss()
            rss0 = _status_kib("VmRSS")
            me = threading.get_native_id()
            s0 = _switches(me)
            q0 = _sched(me)
            u0 = os.times()
            w0 = time.perf_counter()
            send = p.send
            if keys is None:
                for v in values:
                    await send(topic, v)
            else:
                for v, k in zip(values, keys, strict=True):
                    await send(topic, v, k)
            await p.flush()
            wall = time.perf_counter() - w0
            u1 = os.times()
            q1 = _sched(me)
            b1, r1 = _counts(p)
            return {
                "face": "asyncio",
                "records": n,
                "seconds": wall,
                "batches": b1 - b0,
                "requests": r1 - r0,
                "threads": {"loop": (u1.user - u0.user, u1.system - u0.system)},
                "sched": {"loop": (q1[0] - q0[0], q1[1] - q0[1])},
                "rounds": meter.count if meter.available else None,
                "round_cpu": meter.cpu,
                "switches": _switches(me) - s0,
                "rss_before_kib": rss0,
                "rss_peak_kib": _status_kib("VmHWM"),
                "buffer_memory": p.settings.buffer_memory,
            }

    return asyncio.run(main())


def render(r: dict[str, Any]) -> str:
    """One round as text: rate, then each thread's CPU per record / batch / request."""
    n, batches, requests = r["records"], max(r["batches"], 1), max(r["requests"], 1)
    lines = [
        f"{n / r['seconds']:>10,.0f} records/s ({r['face']}), {n / batches:.1f} records/batch, "
        f"{batches / requests:.1f} batches/request, {r['switches'] / n * 1000:.1f} context "
        "switches per 1,000 records"
    ]
    for name, (user, system) in r["threads"].items():
        total, waited = r["sched"][name]
        if not total:  # (no schedstat: the ticks)
            total = user + system
        share = user / (user + system) if user + system else 1.0
        lines.append(
            f"  {name:<7} thread CPU {total:6.2f} s = {total / n * 1e9:7.0f} ns/record "
            f"({share:.0%} user), {total / batches * 1e6:7.1f} us/batch"
            + (f", {total / requests * 1e6:.0f} us/request" if name != "caller" else "")
            + f"; waited {waited:.2f} s for a CPU"
        )
    if r["rounds"] is not None:
        rounds = max(r["rounds"], 1)
        lines.append(
            f"  sender rounds {r['rounds']:,} ({r['rounds'] / n:.2f} per record): "
            f"{r['round_cpu']:.2f} s CPU = {r['round_cpu'] / rounds * 1e6:.0f} us/round, "
            f"{r['round_cpu'] / n * 1e9:.0f} ns/record"
        )
    rss0, peak = r["rss_before_kib"] / 1024, r["rss_peak_kib"] / 1024
    lines.append(
        f"  RSS {rss0:.0f} MiB before, peak {peak:.0f} MiB ({peak - rss0:+.0f} MiB); "
        f"buffer_memory {r['buffer_memory'] / 2**20:.0f} MiB"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--keyed", action="store_true", help="key each record key-<i>")
    ap.add_argument("--face", choices=["sync", "asyncio"], default="sync")
    ap.add_argument("--acks", default="1")
    ap.add_argument("--batch-size", type=int, default=16384, help="0: kpax's default")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--out", default="", help="also write bench/results/OUT.{md,json}")
    a = ap.parse_args()
    cluster = None
    if a.bootstrap is None:
        from kpax.testing import start_kafka

        cluster = start_kafka()
        a.bootstrap = cluster.bootstrap
    runs: list[dict[str, Any]] = []
    title = (
        f"kpax producer CPU, {a.face} face: {a.records:,} "
        f"{'keyed ' if a.keyed else ''}records of 100 bytes to {a.partitions} partition(s), "
        f"acks={a.acks}, linger_ms=5, batch_size={a.batch_size or 'default'}, "
        f"compression {a.compression}"
    )
    print(title, flush=True)
    try:
        for _ in range(a.rounds):
            topic = h.make_topic(a.bootstrap, a.partitions, prefix="bench-cpu")
            try:
                one = one_round_sync if a.face == "sync" else one_round_asyncio
                r = one(a, topic)
            finally:
                h.delete_topic(a.bootstrap, topic)
            r["loadavg"] = os.getloadavg()
            runs.append(r)
            print(render(r) + f"\n  (load average {' '.join(f'{x:.2f}' for x in r['loadavg'])})")
            sys.stdout.flush()
    finally:
        if cluster is not None:
            cluster.stop()
    if a.out:
        argv = " ".join(sys.argv[1:])
        md = (
            f"# {title}\n\n`python -m bench.producer_cpu {argv}` ({len(runs)} rounds; "
            f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}).\n\n```\n"
            + "\n".join(
                render(r) + f"\n  (load average {' '.join(f'{x:.2f}' for x in r['loadavg'])})"
                for r in runs
            )
            + "\n```\n"
        )
        h.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        (h.RESULTS_DIR / f"{a.out}.md").write_text(md, encoding="utf-8")
        (h.RESULTS_DIR / f"{a.out}.json").write_text(json.dumps(runs, indent=1) + "\n")
        print("wrote", h.RESULTS_DIR / f"{a.out}.md")


if __name__ == "__main__":
    main()
