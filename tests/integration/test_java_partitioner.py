"""kpax picks the same partition as the Java client for every key.

10,000 random keys (lengths 0..64, arbitrary bytes, non-ASCII included) go in
one batch to tests/java/partitioner/PartitionerCheck.java, compiled here with
``kpax.testing.compile_java`` (javac, else ECJ) against the cached
kafka-clients jar (``kpax.testing.classpath()``); it answers ``Utils.murmur2(key)``
and ``BuiltInPartitioner.partitionForKey(key, n)`` for several partition counts.
One JVM run for all keys.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from kpax.producer.partitioner import DefaultPartitioner, murmur2, partition_for_key
from kpax.testing.jars import classpath
from kpax.testing.javac import compile_java, java_executable

pytestmark = pytest.mark.integration

JAVA_SRC = Path(__file__).resolve().parent.parent / "java" / "partitioner" / "PartitionerCheck.java"
COUNTS = [1, 2, 3, 6, 7, 10, 12, 50, 64, 97, 1000, 2**31 - 1]
NUM_KEYS = 10_000


def _java(tmp_path: Path, stdin: str) -> list[str]:
    cp = classpath()
    compile_java([JAVA_SRC], cp, tmp_path)
    proc = subprocess.run(
        [java_executable(), "-cp", f"{tmp_path}{os.pathsep}{cp}", "PartitionerCheck"],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_partition_for_key_matches_java_client(tmp_path: Path) -> None:
    rng = random.Random(20240794)
    keys = [rng.randbytes(rng.randint(0, 64)) for _ in range(NUM_KEYS)]
    keys += [b"", "ключ-€-🔑".encode(), b"\xff" * 64, b"\x80\x00\x00\x00" * 3]
    stdin = " ".join(map(str, COUNTS)) + "\n" + "".join(k.hex() + "\n" for k in keys)
    lines = _java(tmp_path, stdin)
    assert len(lines) == len(keys)
    default = DefaultPartitioner()
    mismatches = []
    for key, line in zip(keys, lines, strict=True):
        java_hash, *java_parts = map(int, line.split())
        ours = [partition_for_key(key, n) for n in COUNTS]
        via_default = [default.partition("t", key, None, n) for n in COUNTS]
        if murmur2(key) != java_hash or ours != java_parts or via_default != java_parts:
            mismatches.append((key.hex(), java_hash, murmur2(key), java_parts, ours))
    assert not mismatches, mismatches[:5]
