"""`make demo` (for now): start a Kafka, prove a real broker answered, stop it.

Role: start a test Kafka with kpax.testing, send a raw ApiVersions request,
print the API table and the version ranges of Produce, Fetch and Metadata.

Imports: the standard library and kpax.testing.
"""

from __future__ import annotations

import sys
import time

from kpax.testing import KafkaStartError, start_kafka
from kpax.testing.wire import api_versions


def main() -> int:
    t0 = time.monotonic()
    try:
        cluster = start_kafka()
    except KafkaStartError as exc:
        print(f"demo: could not start Kafka: {exc}", file=sys.stderr)
        return 1
    with cluster:
        print(
            f"Kafka {cluster.version or '(existing)'} via {cluster.backend} backend "
            f"at {cluster.bootstrap}, up in {time.monotonic() - t0:.1f}s"
        )
        result = api_versions(cluster.bootstrap.split(",")[0])
        print(f"ApiVersions: error_code={result.error_code}, {len(result.versions)} APIs")
        print(result.summary())
        for key, name in ((0, "Produce"), (1, "Fetch"), (3, "Metadata")):
            lo, hi = result.versions[key]
            print(f"broker supports {name} v{lo}..v{hi}")
    print("demo: broker stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
