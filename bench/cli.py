"""``python -m bench.cli [--records N]``: the `kpax` command against kcat, one run.

Role: time ``kpax produce TOPIC --file F`` and ``kcat -P -t TOPIC -l F`` on
the same file of N lines (100-byte values, 1 partition, acks=all, no
compression), then ``kpax consume TOPIC --count N > /dev/null`` and
``kcat -C -t TOPIC -c N -e -q > /dev/null`` on a topic holding N records.
Each command is timed from process start to exit (the interpreter's start-up
counts against kpax, as a user sees it). Results: bench/results/cli.{md,json,png}.

Peers run through bench/harness.py (``run_peer``): this module re-runs itself
with ``--peer NAME`` to time one command and print the RESULT line.

Imports: bench.harness, the standard library; kpax (through the harness) for topics.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness as h

VALUE_SIZE = 100
PEERS = ["kpax", "kcat"]


def _command(peer: str, action: str, bootstrap: str, topic: str, path: str, n: int) -> list[str]:
    if peer == "kpax":
        base = [sys.executable, "-m", "kpax.cli", "-b", bootstrap]
        if action == "produce":
            return [*base, "produce", topic, "--file", path, "-q"]
        return [*base, "consume", topic, "--count", str(n), "-q"]
    kcat = shutil.which("kcat") or "kcat"
    if action == "produce":
        return [kcat, "-b", bootstrap, "-P", "-t", topic, "-l", path, "-X", "acks=all"]
    return [kcat, "-b", bootstrap, "-C", "-t", topic, "-c", str(n), "-e", "-q", "-o", "beginning"]


def _peer(args: argparse.Namespace) -> int:
    """Inside a peer subprocess: run the command once, timed, output to /dev/null."""
    cmd = _command(args.peer, args.action, args.bootstrap, args.topic, args.file, args.records)
    with open(os.devnull, "wb") as sink:
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=sink, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode(errors="replace"))
        return proc.returncode
    h.emit(records=args.records, nbytes=args.records * VALUE_SIZE, seconds=elapsed)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cli", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--peer", choices=PEERS, help=argparse.SUPPRESS)
    p.add_argument("--action", choices=["produce", "consume"], help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", help=argparse.SUPPRESS)
    p.add_argument("--topic", help=argparse.SUPPRESS)
    p.add_argument("--file", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.peer:
        return _peer(args)
    n = args.records
    if shutil.which("kcat") is None:
        print("bench.cli: kcat not found (make tools)", file=sys.stderr)
        return 1
    h.compile_sources()
    results: list[h.Result] = []
    with tempfile.TemporaryDirectory() as tmp, h.broker() as bootstrap:
        path = Path(tmp) / "records.txt"
        with open(path, "wb") as f:
            pad = b"x" * VALUE_SIZE
            for i in range(n):
                f.write((b"%d " % i + pad)[:VALUE_SIZE] + b"\n")
        filled = ""
        for action in ("produce", "consume"):
            scenario = f"{action} {n:,} lines"
            for peer in PEERS:
                topic = h.make_topic(bootstrap, 1, prefix=f"bench-cli-{peer}")
                if action == "consume":
                    topic = filled
                argv_ = [
                    sys.executable,
                    "-m",
                    "bench.cli",
                    "--peer",
                    peer,
                    "--action",
                    action,
                    "--bootstrap",
                    bootstrap,
                    "--topic",
                    topic,
                    "--file",
                    str(path),
                    "--records",
                    str(n),
                ]
                res = h.run_peer(argv_, peer=peer, scenario=scenario, records=n, timeout=600)
                results.append(res)
                rate = res["records_per_s"]
                print(
                    f"{scenario:<28} {peer:<6} "
                    + (f"{rate:,.0f} records/s" if rate else f"failed: {res['error']}"),
                    flush=True,
                )
                if action == "produce" and peer == "kpax":
                    filled = topic
    scenarios = [f"{a} {n:,} lines" for a in ("produce", "consume")]
    md = h.render_table(results, baseline="kpax", peers=PEERS, scenarios=scenarios)
    print(md)
    h.write_results(
        "cli",
        md,
        results,
        title="kpax command vs kcat",
        header=(
            f"`python -m bench.cli --records {n}`: one run each, one local broker, 1 partition, "
            f"{VALUE_SIZE}-byte values, whole command timed (process start to exit), "
            "output to /dev/null. Machine: 2 shared cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end. The last column is kpax's rate divided "
            "by the client's: the kcat rows show kpax/kcat (target >= 0.5x).\n"
        ),
        peers=PEERS,
        scenarios=scenarios,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
