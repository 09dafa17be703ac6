"""``python -m bench <name> [options]``: run one peer benchmark (see bench/harness.py).

Benchmarks: ``producer`` (bench/producer.py). Others register here as they land.

Imports: bench.* (lazily, so a benchmark's peer libraries load only when it runs).
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {"producer": "bench.producer", "consumer": "bench.consumer"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m bench {{{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
