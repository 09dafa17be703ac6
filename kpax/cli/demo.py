"""`make demo`: start a local Kafka, drive it with the `kpax` command, stop it.

Role: the main job shown end to end: start a test Kafka (kpax.testing),
``kpax topics create``, ``kpax produce`` 100,000 records from a pipe,
``kpax consume`` them back (checked: every record once), ``kpax offsets``
with the group's lag, ``kpax tail``, ``kpax meta``, then stop the broker.
Each command runs as a subprocess, as a user would type it.

Imports: kpax.testing, the standard library.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

from kpax.testing import KafkaStartError, start_kafka

RECORDS = 100_000


def _kpax(env: dict[str, str], *args: str, stdin: bytes | None = None, show: bool = True) -> bytes:
    print(f"\n$ kpax {shlex.join(args)}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-m", "kpax.cli", *args],
        input=stdin,
        stdout=subprocess.PIPE,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"`kpax {shlex.join(args)}` exited with {proc.returncode}")
    if show:
        sys.stdout.write(proc.stdout.decode())
        sys.stdout.flush()
    return proc.stdout


def main() -> int:
    t0 = time.monotonic()
    try:
        cluster = start_kafka()
    except KafkaStartError as exc:
        print(f"demo: could not start Kafka: {exc}", file=sys.stderr)
        return 1
    with cluster:
        up = time.monotonic() - t0
        print(f"Kafka {cluster.version or '(existing)'} at {cluster.bootstrap}, up in {up:.1f}s")
        env = {**os.environ, "KPAX_BROKERS": cluster.bootstrap}
        topic, group = f"kpax-demo-{int(time.time())}", "kpax-demo"
        try:
            _kpax(env, "topics", "create", topic, "--partitions", "3")
            data = b"".join(b"user-%d:demo record %d\n" % (i % 100, i) for i in range(RECORDS))
            _kpax(env, "produce", topic, "--key-separator", ":", "--compression", "lz4", stdin=data)
            out = _kpax(env, "consume", topic, "--group", group, show=False)
            got = out.splitlines()
            print(f"({len(got):,} lines, first {got[0]!r}, last {got[-1]!r})")
            if sorted(got) != sorted(line.partition(b":")[2] for line in data.splitlines()):
                raise RuntimeError("consumed records differ from the produced ones")
            print(f"every one of the {RECORDS:,} records read back once")
            _kpax(env, "produce", topic, "--value", "one more", "--key", "late")
            _kpax(env, "offsets", topic, "--group", group)
            _kpax(env, "tail", topic, "-n", "3", "--format", "json")
            _kpax(env, "meta", topic)
            _kpax(env, "topics", "delete", topic, "--execute")
        except RuntimeError as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 1
    print(f"\ndemo: broker stopped, {time.monotonic() - t0:.1f}s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
