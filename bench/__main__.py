"""``python -m bench <name> [options]``: run one peer benchmark, or ``all`` of them.

Benchmarks (each also runs as ``python -m bench.<module>``):
``proto`` (record batches vs kafka-python and aiokafka), ``messages`` (Produce
and Fetch message codecs), ``producer``, ``consumer`` (throughput, commit
latency and commit-after-each-poll; vs kafka-python, aiokafka,
confluent-kafka, franz-go and the Java tools), ``share`` (share-group
consumption vs Java's KafkaShareConsumer and confluent-kafka's ShareConsumer),
``parallel`` (the parallel consumer vs the plain consumer loop),
``cli`` (the ``kpax`` command vs kcat), ``spark`` (the PySpark source vs Spark's
built-in Kafka source), ``compare`` (kpax at one revision against another, in pairs).
``all`` runs all but ``compare`` one after another with their default options. See
bench/README.md.

Imports: bench.* (lazily, so a benchmark's peer libraries load only when it runs).
"""

from __future__ import annotations

import importlib
import inspect
import sys

BENCHMARKS = {
    "proto": "bench.proto",
    "messages": "bench.proto_messages",
    "producer": "bench.producer",
    "consumer": "bench.consumer",
    "share": "bench.share",
    "parallel": "bench.parallel",
    "cli": "bench.cli",
    "spark": "bench.spark",
    "compare": "bench.compare",
}


def _run(name: str, args: list[str]) -> int:
    module = importlib.import_module(BENCHMARKS[name])
    saved = sys.argv
    sys.argv = [f"python -m bench {name}", *args]  # for the benchmarks that read sys.argv
    try:
        takes_args = bool(inspect.signature(module.main).parameters)
        result = module.main(args) if takes_args else module.main()
    finally:
        sys.argv = saved
    return int(result or 0)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "all":
        # (compare needs --base: it measures a change, not kpax against its peers)
        failed = [name for name in BENCHMARKS if name != "compare" and _run(name, argv[1:]) != 0]
        if failed:
            print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1 if failed else 0
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m bench {{all,{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        return 2
    return _run(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
