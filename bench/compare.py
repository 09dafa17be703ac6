"""kpax against itself: one revision's throughput against another's, in pairs on one broker.

Usage::

    python -m bench compare --base REV [--head HEAD] [--pairs 12] [--records 3000000]
                            [--scenarios "consumer 1p,consumer 6p,producer 1p,producer 6p"]
                            [--peer "kpax sync"] [--compression none|lz4|...]
                            [--keyed-records 50000]

What a change did to kpax's own speed, for a "no slower than before" check. A
whole-run table (``python -m bench producer``) cannot say it: two runs of the
same code on this 2-core machine differ by ±20%, and the noise drifts over
minutes (the broker's JIT, page cache, other load). So both revisions run in
*pairs*, back to back, alternating which goes first (ABBA), and each pair gives
one ratio head/base; the median of those ratios is the figure. A drift that
slows both halves of a pair cancels out.

Each revision is checked out in a detached ``git worktree`` (temporary) and its C
extensions compiled there in place with the same ``cc -O2`` line for both. The
peer programs are this checkout's (``bench/producer.py``, ``bench/consumer.py``,
copied to a temporary directory), so both revisions run the very same loop; only
``kpax`` comes from the revision (its worktree is on ``PYTHONPATH``).

Scenarios: ``consumer Np`` reads a topic of N partitions filled once (``--records``
values of 100 bytes, confluent-kafka producer, as ``bench consumer`` does, compressed
with ``--compression``); ``producer Np`` sends ``--records`` values to a fresh topic of
N partitions, acks=1, compressed with ``--compression`` (none by default; as ``bench
producer``);
``producer Np keyed`` sends ``--keyed-records`` (50,000) records keyed ``key-<i>``,
acks=all, kpax's default settings but linger_ms=5 (``bench producer``'s keyed
scenarios), e.g. ``producer 1000p keyed``.
The verdict is ``within 5%`` when the median pair ratio is at least 0.95.

Imports: bench.harness, bench.consumer (fill), the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import harness as h

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ["consumer 1p", "consumer 6p", "producer 1p", "producer 6p"]


def checkout(rev: str, where: Path) -> Path:
    """A detached worktree of ``rev`` with its C extensions built in place (every
    ``kpax/**/_*.c``, one ``cc -O2`` line each, as setup.py builds them)."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(where), rev],
        check=True,
    )
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for src in sorted(where.glob("kpax/**/_*.c")):
        out = src.with_name(src.stem + suffix)
        subprocess.run(
            [*cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(src), "-o", str(out)], check=True
        )
    return where


def remove(where: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
        check=False,
        stderr=subprocess.DEVNULL,
    )


def peer_dir(tmp: Path) -> Path:
    """This checkout's bench package alone in a directory (no kpax beside it)."""
    out = tmp / "peers"
    shutil.copytree(
        ROOT / "bench", out / "bench", ignore=shutil.ignore_patterns("results", "franz", "java")
    )
    return out


def parse_scenario(name: str) -> tuple[str, int, bool]:
    """(kind, partitions, keyed) of ``consumer Np``, ``producer Np``, ``producer Np keyed``."""
    kind, _, rest = name.partition(" ")
    parts, _, flag = rest.partition(" ")
    if (
        kind not in ("consumer", "producer")
        or not parts.endswith("p")
        or not parts[:-1].isdigit()
        or flag not in ("", "keyed")
        or (flag and kind != "producer")
    ):
        raise SystemExit(
            f"bad scenario {name!r}: expected like 'consumer 1p', 'producer 6p' or "
            "'producer 1000p keyed'"
        )
    return kind, int(parts[:-1]), flag == "keyed"


def run_side(
    tree: Path, peers: Path, kind: str, peer: str, bootstrap: str, topic: str, n: int,
    records: int, timeout: float, compression: str = "none", keyed: bool = False,
) -> float | None:  # fmt: skip
    """One run of ``peer`` with ``tree``'s kpax: records/s, or None when it failed."""
    argv = [sys.executable, "-m", f"bench.{kind}", "--peer", peer, "--bootstrap", bootstrap,
            "--topic", topic, "--records", str(records)]  # fmt: skip
    if kind == "consumer":
        argv += ["--partitions", str(n)]
    else:
        argv += ["--compression", compression]
        if keyed:
            argv += ["--keyed", "--defaults", "--acks", "all"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("KPAX_PURE_PYTHON", None)
    try:
        proc = subprocess.run(
            argv, cwd=peers, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        print(f"  {tree.name}: timed out after {timeout:g}s", file=sys.stderr)
        return None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            data = json.loads(line[7:])
            return float(data["records"]) / float(data["seconds"])
    print(f"  {tree.name}: failed: {proc.stderr.strip()[-400:]}", file=sys.stderr)
    return None


def summarize(name: str, base: list[float], head: list[float]) -> dict[str, Any]:
    ratios = sorted(hd / bs for bs, hd in zip(base, head, strict=True))
    median = statistics.median(ratios)
    return {
        "scenario": name,
        "pairs": len(ratios),
        "base_median": statistics.median(base),
        "head_median": statistics.median(head),
        "ratio_median": median,
        "ratio_low": ratios[0],
        "ratio_high": ratios[-1],
        "head_faster": sum(r > 1 for r in ratios),
        "verdict": "within 5%" if median >= 0.95 else "slower by more than 5%",
    }


def render(rows: Sequence[dict[str, Any]], base: str, head: str, args: str) -> str:
    lines = [
        f"# kpax {head} against {base}",
        "",
        f"`python -m bench compare {args}`: each pair runs both revisions back to back "
        "(alternating which goes first) on one local broker; ratio = head/base records/s "
        "of a pair.",
        "",
        "| scenario | pairs | base median rec/s | head median rec/s | median ratio "
        "| lowest, highest ratio | pairs head faster | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['pairs']} | {r['base_median']:,.0f} | "
            f"{r['head_median']:,.0f} | {r['ratio_median']:.3f} | "
            f"{r['ratio_low']:.2f}, {r['ratio_high']:.2f} | {r['head_faster']} | "
            f"{r['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench compare", description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the revision to compare against")
    ap.add_argument("--head", default="HEAD", help="the revision measured (HEAD)")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--peer", default="kpax sync", help="kpax sync or kpax asyncio")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument(
        "--compression",
        default="none",
        help="the codec of the producer scenarios' sends and of the consumer scenarios' topics",
    )
    ap.add_argument(
        "--keyed-records", type=int, default=50_000, help="records of a 'producer Np keyed' run"
    )
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/")
    a = ap.parse_args(argv)
    scenarios = [parse_scenario(s.strip()) for s in a.scenarios.split(",") if s.strip()]
    names = {rev: subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev],
                                 check=True, capture_output=True, text=True).stdout.strip()
             for rev in (a.base, a.head)}  # fmt: skip
    from bench.consumer import fill

    rows = []
    with tempfile.TemporaryDirectory(prefix="kpax-compare-") as tmp_name:
        tmp = Path(tmp_name)
        trees = {}
        try:
            for side, rev in (("base", a.base), ("head", a.head)):
                print(f"building {side} {names[rev]} ...", flush=True)
                trees[side] = checkout(rev, tmp / side)
            peers = peer_dir(tmp)
            with h.broker() as bootstrap:
                for kind, n, keyed in scenarios:
                    name = f"{kind} {n}p" + (" keyed" if keyed else "")
                    records = a.keyed_records if keyed else a.records
                    filled = None
                    if kind == "consumer":
                        filled = h.make_topic(bootstrap, n, prefix="bench-compare")
                        fill(bootstrap, filled, a.records, 100, n, a.compression)
                    got: dict[str, list[float]] = {"base": [], "head": []}
                    for i in range(a.pairs):
                        order = ("base", "head") if i % 2 == 0 else ("head", "base")
                        pair: dict[str, float | None] = {}
                        for side in order:
                            topic = filled or h.make_topic(bootstrap, n, prefix="bench-compare")
                            pair[side] = run_side(trees[side], peers, kind, a.peer, bootstrap,
                                                  topic, n, records, a.timeout,
                                                  a.compression, keyed)  # fmt: skip
                            if filled is None:
                                h.delete_topic(bootstrap, topic)
                        b, hd = pair["base"], pair["head"]
                        if b is None or hd is None:
                            print(f"{name} pair {i + 1}: a run failed, pair dropped", flush=True)
                            continue
                        got["base"].append(b)
                        got["head"].append(hd)
                        print(f"{name} pair {i + 1}: base {b:,.0f} head {hd:,.0f} rec/s "
                              f"ratio {hd / b:.3f}", flush=True)  # fmt: skip
                    if filled is not None:
                        h.delete_topic(bootstrap, filled)
                    if got["base"]:
                        rows.append(summarize(name, got["base"], got["head"]))
        finally:
            for tree in trees.values():
                remove(tree)
    args = " ".join(
        [f"--base {a.base}"] + ([f"--head {a.head}"] if a.head != "HEAD" else [])
        + [f"--pairs {a.pairs}", f"--records {a.records}", f'--peer "{a.peer}"']
        + [f'--scenarios "{a.scenarios}"']
        + ([f"--keyed-records {a.keyed_records}"] if any(k for _, _, k in scenarios) else [])
        + ([f"--compression {a.compression}"] if a.compression != "none" else [])
    )  # fmt: skip
    table = render(rows, names[a.base], names[a.head], args)
    print()
    print(table)
    if not a.no_write:
        out = Path(os.environ.get("KPAX_BENCH_RESULTS", ROOT / "bench" / "results"))
        out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d")
        (out / "compare.md").write_text(table + f"\nRun on {stamp}.\n")
        (out / "compare.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
