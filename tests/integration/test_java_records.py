"""Byte-for-byte agreement with the Java client's record batches.

One JVM run (tests/java/records/RecordsHelper.java, compiled here with
kpax.testing.compile_java, javac or else ECJ, against kafka-clients from
kpax.testing.jars) builds a batch per case with
MemoryRecordsBuilder and reads back the batch kpax built for the same records.

- uncompressed batches (v2, and v0/v1 message sets) must be identical bytes;
- compressed batches are compared by content both ways (Java decodes kpax's,
  kpax decodes Java's): compressed bytes may legitimately differ by library and
  level. Which compressed cases happen to match byte-for-byte too is asserted
  per codec below (snappy's xerial framing and lz4's Kafka frame do).
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from kpax.proto.records import Record, decode_batches, encode_batch
from kpax.testing.jars import classpath
from kpax.testing.javac import compile_java, java_executable

HELPER = Path(__file__).resolve().parents[1] / "java" / "records" / "RecordsHelper.java"
COUNT = 40
BASE = 1000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CASES = [
    (f"{codec}-v{magic}", codec, magic)
    for magic in (0, 1, 2)
    for codec in CODECS
    if not (codec == "zstd" and magic < 2)
]


def records_recipe(magic: int) -> list[Record]:
    """The same records as RecordsHelper's recipe."""
    out = []
    for i in range(COUNT):
        out.append(
            Record(
                None if i % 7 == 3 else f"value-{i}-{'x' * ((i * 11) % 300)}".encode(),
                key=None if i % 5 == 0 else f"key-{i}".encode(),
                headers=[("trace", f"t{i}".encode()), ("empty", None)]
                if magic == 2 and i % 2
                else None,
                timestamp=1_700_000_000_000 + 3 * i if magic else None,
            )
        )
    return out


def _hex(b: bytes | None) -> str:
    return "-" if b is None else "x" + b.hex()


def expected_lines(magic: int) -> list[str]:
    lines = []
    for i, r in enumerate(records_recipe(magic)):
        hs = "".join(f"{k}:{_hex(v)}," for k, v in (r.headers or [])) or "."
        ts = r.timestamp if r.timestamp is not None else -1
        lines.append(f"{BASE + i} {ts} {_hex(r.key)} {_hex(r.value)} {hs}")
    return lines


def _record_package(cp: str) -> str:
    for jar in cp.split(os.pathsep):
        if Path(jar).name.startswith("kafka-clients-"):
            names = zipfile.ZipFile(jar).namelist()
            if "org/apache/kafka/common/record/internal/MemoryRecords.class" in names:
                return "org.apache.kafka.common.record.internal"
            return "org.apache.kafka.common.record"
    raise AssertionError(f"no kafka-clients jar on the classpath {cp[:200]}")


@pytest.fixture(scope="module")
def java_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cp = classpath()
    work = tmp_path_factory.mktemp("java-records")
    src = work / "src" / "RecordsHelper.java"
    src.parent.mkdir()
    src.write_text(HELPER.read_text().replace("@RECORD_PKG@", _record_package(cp)))
    classes = work / "classes"
    compile_java([src], cp, classes)
    cases = []
    for name, codec, magic in CASES:
        raw = encode_batch(records_recipe(magic), base_offset=BASE, compression=codec, magic=magic)
        (work / f"kpax-{name}.bin").write_bytes(raw)
        cases.append(f"{name} {codec} {magic} {COUNT} {BASE}")
    (work / "cases.txt").write_text("\n".join(cases) + "\n")
    proc = subprocess.run(
        [java_executable(), "-cp", f"{cp}{os.pathsep}{classes}", "RecordsHelper", str(work)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work


@pytest.mark.integration
@pytest.mark.parametrize(("name", "codec", "magic"), CASES)
def test_java_reads_kpax(java_run: Path, name: str, codec: str, magic: int) -> None:
    lines = (java_run / f"decoded-{name}.txt").read_text().splitlines()
    batch_lines = [line for line in lines if line.startswith("batch ")]
    record_lines = [line for line in lines if not line.startswith("batch ")]
    assert record_lines == expected_lines(magic)
    if magic == 2 or codec != "none":
        (header,) = batch_lines
        _, jmagic, jcodec, base, last, _max_ts = header.split()
        assert (int(jmagic), jcodec, int(base), int(last)) == (
            magic, codec, BASE, BASE + COUNT - 1,
        )  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize(("name", "codec", "magic"), CASES)
def test_kpax_reads_java(java_run: Path, name: str, codec: str, magic: int) -> None:
    theirs = (java_run / f"java-{name}.bin").read_bytes()
    got = []
    for batch in decode_batches(theirs, allow_partial=False):
        assert batch.magic == magic and batch.compression == codec
        for r in batch:
            hs = "".join(f"{k}:{_hex(v)}," for k, v in r.headers) or "."
            got.append(f"{r.offset} {r.timestamp} {_hex(r.key)} {_hex(r.value)} {hs}")
    assert got == expected_lines(magic)


# Compressed cases whose bytes match Java's exactly as well: none now. lz4 uses
# Kafka's frame layout (the header is checked below) but kpax's own block
# compressor, which picks its matches a little differently from liblz4's
# (lz4-java); snappy uses the same xerial framing but a different compressor
# (Rust snap vs snappy-java's C++: equal on some inputs, a few bytes apart on
# others), gzip differs in the gzip header and zstd in frame parameters
# (zstd-jni streams without a content size).
SAME_COMPRESSED_BYTES: set[str] = set()


@pytest.mark.integration
@pytest.mark.parametrize(("name", "codec", "magic"), CASES)
def test_same_bytes_as_java(java_run: Path, name: str, codec: str, magic: int) -> None:
    ours = (java_run / f"kpax-{name}.bin").read_bytes()
    theirs = (java_run / f"java-{name}.bin").read_bytes()
    if codec == "none" or codec in SAME_COMPRESSED_BYTES:
        assert ours == theirs
    if codec == "snappy":
        xerial = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
        assert xerial in ours and ours.index(xerial) == theirs.index(xerial)
    if codec == "lz4":  # the frame header (magic, descriptor, its checksum) as Java writes it
        magic_bytes = b"\x04\x22\x4d\x18"
        assert magic_bytes in ours and ours.index(magic_bytes) == theirs.index(magic_bytes)
        at = ours.index(magic_bytes)
        assert ours[at : at + 7] == theirs[at : at + 7]
