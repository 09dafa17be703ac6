"""Interop of the `kpax` command with kcat (Debian package ``kcat``) on the same topics.

kcat writes, `kpax consume` reads (values, keys, headers); `kpax produce`
writes, kcat reads; a group's offsets committed by kpax are where kcat's
member of that group starts. kcat must be installed (``make tools``): a
missing kcat fails these tests, it does not skip them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kpax.testing.base import KafkaCluster
from tests.integration.test_cli import ok, run_kpax

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed: run `make tools` (apt-get install kcat)")
    return path


def run_kcat(kcat: str, bootstrap: str, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [kcat, "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def test_kcat_produces_kpax_consumes(
    kcat: str, kafka: KafkaCluster, topic: Any, tmp_path: Path
) -> None:
    t = topic(1)
    lines = [f"kcat line {i} ✓".encode() for i in range(500)]
    src = tmp_path / "in.txt"
    src.write_bytes(b"\n".join(lines) + b"\n")
    run_kcat(kcat, kafka.bootstrap, "-P", "-t", t, "-p", "0", "-l", str(src))
    assert ok(run_kpax(kafka.bootstrap, "consume", t)).out == src.read_bytes()
    # keys and headers written by kcat
    run_kcat(
        kcat,
        kafka.bootstrap,
        "-P",
        "-t",
        t,
        "-p",
        "0",
        "-K",
        ":",
        "-H",
        "src=kcat",
        stdin=b"k1:v1\n",
    )
    rec = ok(run_kpax(kafka.bootstrap, "consume", t, "--from", "-1", "--format", "json")).lines()[0]
    assert (rec["key"], rec["value"], rec["headers"]) == ("k1", "v1", [["src", "kcat"]])
    assert rec["offset"] == 500


def test_kpax_produces_kcat_consumes(
    kcat: str, kafka: KafkaCluster, topic: Any, tmp_path: Path
) -> None:
    t = topic(3)
    lines = [f"kpax line {i}".encode() for i in range(3000)]
    src = tmp_path / "in.txt"
    src.write_bytes(b"\n".join(lines) + b"\n")
    ok(run_kpax(kafka.bootstrap, "produce", t, "--file", str(src), "--compression", "snappy"))
    out = run_kcat(kcat, kafka.bootstrap, "-C", "-t", t, "-e", "-q")
    assert sorted(out.splitlines()) == sorted(lines)
    # keys, headers and the partition chosen by key: kcat's -f shows them
    ok(
        run_kpax(
            kafka.bootstrap,
            "produce",
            t,
            "-K",
            "=",
            "-H",
            "h=1",
            "--partition",
            "1",
            stdin=b"key=val\n",
        )
    )
    out = run_kcat(
        kcat,
        kafka.bootstrap,
        "-C",
        "-t",
        t,
        "-p",
        "1",
        "-o",
        "-1",
        "-e",
        "-q",
        "-f",
        "%k|%s|%h|%p\n",
    )
    assert out == b"key|val|h=1|1\n"


def test_group_offsets_shared_with_kcat(kcat: str, kafka: KafkaCluster, topic: Any) -> None:
    t = topic(1)
    group = f"g-{t}"
    ok(run_kpax(kafka.bootstrap, "produce", t, stdin=b"".join(b"r%d\n" % i for i in range(20))))
    assert (
        len(
            ok(
                run_kpax(kafka.bootstrap, "consume", t, "--group", group, "--count", "12")
            ).out.splitlines()
        )
        == 12
    )
    # kcat's balanced consumer in the same group starts at kpax's committed offset
    out = run_kcat(
        kcat, kafka.bootstrap, "-G", group, "-e", "-q", "-X", "auto.offset.reset=earliest", t
    )
    assert out.splitlines() == [b"r%d" % i for i in range(12, 20)]
    doc = ok(run_kpax(kafka.bootstrap, "offsets", t, "--group", group, "-o", "json")).json()
    assert doc["partitions"][0]["committed"] == 20 and doc["total_lag"] == 0
