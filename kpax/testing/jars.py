"""Apache Kafka's jars from Maven Central, fetched once with Maven and cached.

Role: turn a Kafka version into a directory of jars (`ensure_jars`) and a
``java -cp`` string (`classpath`). The pom shipped next to this module
(``pom.xml``) is filled in with the version and an SLF4J binding that matches
it (log4j2 for Kafka 4.x, reload4j for 3.x), then resolved with
``mvn -q dependency:copy-dependencies`` into
``$KPAX_CACHE_DIR/kafka/<version>/libs`` (default ``~/.cache/kpax``). A marker
file (holding a hash of the rendered pom) written after a successful fetch
makes later calls free; a changed pom triggers a new fetch.

Imports: the standard library and kpax.testing.errors only.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from kpax.testing.errors import KafkaStartError

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "cache_dir",
    "classpath",
    "ensure_jars",
    "is_kafka4",
    "kafka_version",
]

#: Newest Apache Kafka release whose jars all resolve from Maven Central (4.4.0 is listed
#: but its kafka-tools-api jar is missing there, so it cannot be resolved). Verified to start.
DEFAULT_KAFKA_VERSION = "4.3.1"

_MARKER = ".kpax-fetched"

_LOG4J2_VERSION = "2.24.3"
_RELOAD4J_BINDING_VERSION = "1.7.36"
_SLF4J2_VERSION = "2.0.17"


def kafka_version(version: str | None = None) -> str:
    """The Kafka version to use: *version*, else ``$KPAX_KAFKA_VERSION``, else the default."""
    return version or os.environ.get("KPAX_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def is_kafka4(version: str) -> bool:
    """True for Kafka 4.x and later (log4j2, no ZooKeeper, KIP-848 on by default)."""
    try:
        return int(version.split(".", 1)[0]) >= 4
    except ValueError:
        return True


def cache_dir() -> Path:
    """Root of kpax's cache: ``$KPAX_CACHE_DIR`` or ``~/.cache/kpax``."""
    env = os.environ.get("KPAX_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kpax"


def _logging_dependencies(version: str) -> str:
    if is_kafka4(version):
        deps = [
            # kafka-clients declares slf4j-api 1.7; the log4j2 binding needs the 2.x API.
            ("org.slf4j", "slf4j-api", _SLF4J2_VERSION),
            ("org.apache.logging.log4j", "log4j-slf4j2-impl", _LOG4J2_VERSION),
            ("org.apache.logging.log4j", "log4j-core", _LOG4J2_VERSION),
            ("org.apache.logging.log4j", "log4j-1.2-api", _LOG4J2_VERSION),
        ]
    else:
        deps = [("org.slf4j", "slf4j-reload4j", _RELOAD4J_BINDING_VERSION)]
    return "\n".join(
        "    <dependency>\n"
        f"      <groupId>{g}</groupId>\n"
        f"      <artifactId>{a}</artifactId>\n"
        f"      <version>{v}</version>\n"
        "    </dependency>"
        for g, a, v in deps
    )


def render_pom(version: str) -> str:
    """The pom that lists the jars of Kafka *version* (broker, tools, client, logging)."""
    template = resources.files("kpax.testing").joinpath("pom.xml").read_text(encoding="utf-8")
    return template.replace("@KAFKA_VERSION@", version).replace(
        "@LOGGING_DEPENDENCIES@", _logging_dependencies(version)
    )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BOILERPLATE = ("re-run Maven", "Re-run Maven", "For more information", "[ERROR] [Help")


def _maven_errors(text: str, n: int = 12) -> str:
    """Maven's informative lines: colour codes, blank and boilerplate lines removed."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    lines = [
        line.replace(" -> [Help 1]", "")
        for line in lines
        if line.strip() not in ("", "[ERROR]") and not any(b in line for b in _BOILERPLATE)
    ]
    return "\n".join(lines[-n:])


def ensure_jars(version: str | None = None) -> Path:
    """Return the directory holding every jar of Kafka *version*, fetching it first if needed.

    Raises KafkaStartError if Maven is missing or cannot resolve the jars (the
    message carries Maven's last lines).
    """
    version = kafka_version(version)
    libs = cache_dir() / "kafka" / version / "libs"
    pom = render_pom(version)
    stamp = hashlib.sha256(pom.encode()).hexdigest()
    marker = libs / _MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == stamp:
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaStartError(
            "Maven (mvn) is not on PATH: it is needed once to fetch Apache Kafka "
            f"{version}'s jars from Maven Central. Install Maven (e.g. `apt-get install maven`), "
            "or set KPAX_TEST_BOOTSTRAP=host:port to use a running Kafka."
        )
    libs.parent.mkdir(parents=True, exist_ok=True)
    with (libs.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch at a time; others then reuse it
        if marker.is_file() and marker.read_text(encoding="utf-8").strip() == stamp:
            return libs
        _fetch(mvn, version, pom, stamp, libs)
    return libs


def _fetch(mvn: str, version: str, pom: str, stamp: str, libs: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix="fetch-", dir=libs.parent))
    try:
        (staging / "pom.xml").write_text(pom, encoding="utf-8")
        out_dir = staging / "libs"
        cmd = [
            mvn,
            "-q",
            "-B",
            "-Dstyle.color=never",
            "-f",
            str(staging / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={out_dir}",
            "-DincludeScope=runtime",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not any(out_dir.glob("kafka_2.13-*.jar")):
            raise KafkaStartError(
                f"Maven could not fetch Apache Kafka {version}'s jars from Maven Central "
                f"(exit {proc.returncode}). Check the version exists and that Maven can reach "
                "its registry (proxy settings in ~/.m2/settings.xml). Maven's last lines:\n"
                + _maven_errors(proc.stdout + "\n" + proc.stderr)
            )
        (out_dir / _MARKER).write_text(stamp + "\n", encoding="utf-8")
        if libs.exists():
            shutil.rmtree(libs)
        out_dir.rename(libs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def classpath(version: str | None = None) -> str:
    """A ``java -cp`` string with all jars of Kafka *version* (including kafka-clients)."""
    libs = ensure_jars(version)
    return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))
