#!/usr/bin/env python3
"""Build the message-spec directory kpax/proto is generated from, for one Kafka version.

Usage: ``tools/kafka_specs.py [--version V] [--out DIR]`` (prints DIR).

Apache Kafka ships its protocol definitions inside ``kafka-clients-V.jar`` as
resources (``common/message/*.json``). This takes them from the jar that
kpax.testing fetches from Maven Central (cached under ``~/.cache/kpax``), and
writes the error-code table beside them as ``errors.tsv`` (code, name,
retriable), printed by ``tools/java/DumpErrors.java`` from the same jar's
``Errors`` enum, plus ``VERSION``. ``tools/gen_proto.py --specs DIR`` reads the
result. Nothing here is committed; the generated Python is.

Default version: ``SPECS_KAFKA_VERSION`` below (``make generate`` and ``make
check-generated`` use it). Default DIR: ``~/.cache/kpax/specs/V``. A complete
DIR (its ``VERSION`` written last) is reused as is.

Imports: the standard library and kpax.testing (jar fetching, the java executable).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kpax.testing.jars import cache_dir, ensure_jars  # noqa: E402
from kpax.testing.javac import compile_java, java_executable  # noqa: E402

#: The Kafka release whose specs kpax/proto is generated from.
SPECS_KAFKA_VERSION = "4.4.0"
DUMP_ERRORS = ROOT / "tools" / "java" / "DumpErrors.java"
_PREFIX = "common/message/"


def default_dir(version: str) -> Path:
    return cache_dir() / "specs" / version


def build(version: str, out: Path) -> Path:
    """Write ``version``'s specs, ``errors.tsv`` and ``VERSION`` into ``out``; return it."""
    if (out / "VERSION").is_file() and (out / "VERSION").read_text().strip() == version:
        return out
    libs = ensure_jars(version)
    jar = libs / f"kafka-clients-{version}.jar"
    if not jar.is_file():
        raise SystemExit(f"kafka_specs: {jar} not found after fetching Kafka {version}'s jars")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".specs-{version}-", dir=out.parent))
    try:
        with zipfile.ZipFile(jar) as z:
            names = [
                n
                for n in z.namelist()
                if n.startswith(_PREFIX) and n.endswith(".json") and "/" not in n[len(_PREFIX) :]
            ]
            if not names:
                raise SystemExit(f"kafka_specs: {jar} holds no {_PREFIX}*.json")
            for n in names:
                (tmp / n[len(_PREFIX) :]).write_bytes(z.read(n))
        cp = os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))
        classes = tmp / ".classes"
        compile_java([DUMP_ERRORS], cp, classes)
        proc = subprocess.run(
            [java_executable(), "-cp", f"{classes}{os.pathsep}{cp}", "DumpErrors"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0 or not proc.stdout.startswith("code\tname\tretriable\n"):
            raise SystemExit(
                f"kafka_specs: {DUMP_ERRORS.name} failed (exit {proc.returncode}): "
                f"{proc.stderr.strip()[-2000:]}"
            )
        shutil.rmtree(classes)
        (tmp / "errors.tsv").write_text(proc.stdout)
        (tmp / "VERSION").write_text(version + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=SPECS_KAFKA_VERSION)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    print(build(a.version, a.out or default_dir(a.version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
