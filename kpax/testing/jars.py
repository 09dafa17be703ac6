"""Apache Kafka's jars, fetched once from Maven Central and cached.

Role: turn a Kafka version into a directory of jars (`ensure_jars`) and a
``java -cp`` string (`classpath`), in ``$KPAX_CACHE_DIR/kafka/<version>/libs``
(default ``~/.cache/kpax``).

Pinned versions (`PINNED_VERSIONS`): a JSON list shipped next to this module
(``kafka-jars-<version>.json``, written by ``tools/pin_kafka_jars.py``) names
every jar (coordinates, path on Maven Central, size, SHA-1 as Central publishes
it, SHA-256). Each jar is downloaded with urllib over HTTPS from
``$KPAX_MAVEN_REPO`` (default https://repo1.maven.org/maven2/), checked against
its SHA-256 and moved into place atomically; no Maven, no Java. Jars already in
the directory that match their checksum are kept (so a cache filled by Maven is
reused), others are replaced, and files not on the list are removed. A download
or checksum failure raises `KafkaStartError` naming the URL.

Other versions fall back to Maven: the pom shipped next to this module
(``pom.xml``) is filled in with the version and an SLF4J binding that matches it
(log4j2 for Kafka 4.x, reload4j for 3.x) and resolved with
``mvn -q dependency:copy-dependencies``.

A marker file (a hash of the pinned list, or of the rendered pom) written after
a successful fetch makes later calls free; for a pinned version a marker left by
a Maven fetch of the same pom is accepted too (same jars). One fetch per version at a time,
across processes: an exclusive lock on ``kafka/<version>/.lock`` (``fcntl.flock``
on POSIX, ``msvcrt.locking`` on Windows).

Imports: the standard library and kpax.testing.errors only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kpax.testing.errors import KafkaStartError

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "DEFAULT_MAVEN_REPOSITORY",
    "PINNED_VERSIONS",
    "PinnedJar",
    "cache_dir",
    "classpath",
    "ensure_jars",
    "is_kafka4",
    "kafka_version",
    "maven_repository",
    "pinned_jars",
]

#: The version the integration suite is proven against. 4.4.0 starts and passes the
#: smoke subset (`make test-matrix` runs the whole suite per version); not yet the default.
DEFAULT_KAFKA_VERSION = "4.3.1"

#: Versions with a pinned jar list in the package: fetched without Maven. `make test-matrix`
#: runs the integration suite against each of them.
PINNED_VERSIONS = ("4.3.1", "3.9.2", "4.4.0")

DEFAULT_MAVEN_REPOSITORY = "https://repo1.maven.org/maven2/"

_MARKER = ".kpax-fetched"

_LOG4J2_VERSION = "2.24.3"
_RELOAD4J_BINDING_VERSION = "1.7.36"
_SLF4J2_VERSION = "2.0.17"

_DOWNLOAD_THREADS = 4
_DOWNLOAD_TIMEOUT = 60.0


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


def maven_repository() -> str:
    """Base URL jars are downloaded from: ``$KPAX_MAVEN_REPO`` or Maven Central, ending in /."""
    base = os.environ.get("KPAX_MAVEN_REPO") or DEFAULT_MAVEN_REPOSITORY
    return base if base.endswith("/") else base + "/"


# --------------------------------------------------------------------- pinned lists


@dataclass(frozen=True)
class PinnedJar:
    """One jar of a pinned list: where it lives in a Maven repository and its checksum."""

    coordinates: str  # group:artifact:version[:classifier]
    path: str  # relative to the repository root
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def pin_file_name(version: str) -> str:
    return f"kafka-jars-{version}.json"


def _pin_text(version: str) -> str | None:
    res = resources.files("kpax.testing").joinpath(pin_file_name(version))
    try:
        return res.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None


def pinned_jars(version: str) -> list[PinnedJar] | None:
    """The pinned jar list of Kafka *version*, or None if the package has none."""
    text = _pin_text(version)
    if text is None:
        return None
    doc = json.loads(text)
    return [
        PinnedJar(j["coordinates"], j["path"], int(j["size"]), j["sha256"].lower())
        for j in doc["jars"]
    ]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(jar: PinnedJar, base: str, libs: Path) -> None:
    """Fetch one jar into *libs*, checked against its SHA-256, renamed into place at the end."""
    url = base + jar.path
    fd, tmp_name = tempfile.mkstemp(prefix=f".{jar.filename}.", suffix=".part", dir=libs)
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            try:
                req = urllib.request.Request(url, headers={"User-Agent": "kpax.testing"})
                with urllib.request.urlopen(req, timeout=_DOWNLOAD_TIMEOUT) as resp:
                    for block in iter(lambda: resp.read(1 << 16), b""):
                        h.update(block)
                        size += len(block)
                        out.write(block)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                if isinstance(exc, urllib.error.HTTPError):
                    reason: object = f"HTTP {exc.code} {exc.reason}"
                else:
                    reason = getattr(exc, "reason", None) or exc
                raise KafkaStartError(
                    f"could not download {url} ({reason}). kpax.testing fetches Apache Kafka's "
                    f"jars from {base}: check the network or proxy (HTTPS_PROXY), or set "
                    "KPAX_MAVEN_REPO to a Maven Central mirror, or KPAX_TEST_BOOTSTRAP=host:port "
                    "to use a running Kafka."
                ) from exc
        digest = h.hexdigest()
        if digest != jar.sha256:
            raise KafkaStartError(
                f"{url} does not match its pinned checksum ({size} bytes, SHA-256 {digest}; "
                f"expected {jar.size} bytes, SHA-256 {jar.sha256}). Nothing was installed; "
                "if KPAX_MAVEN_REPO points at a mirror, check it serves Maven Central's files."
            )
        os.replace(tmp, libs / jar.filename)
    finally:
        tmp.unlink(missing_ok=True)


def _fetch_pinned(version: str, pins: list[PinnedJar], stamp: str, libs: Path) -> None:
    libs.mkdir(parents=True, exist_ok=True)
    (libs / _MARKER).unlink(missing_ok=True)
    wanted = {p.filename for p in pins}
    for stale in libs.iterdir():  # leftovers: other jars (an older list), partial downloads
        if stale.name not in wanted and stale.name != _MARKER:
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
    missing = []
    for jar in pins:
        have = libs / jar.filename
        if have.is_file() and have.stat().st_size == jar.size and _sha256(have) == jar.sha256:
            continue
        missing.append(jar)
    if missing:
        base = maven_repository()
        with ThreadPoolExecutor(min(_DOWNLOAD_THREADS, len(missing))) as pool:
            futures = [pool.submit(_download, jar, base, libs) for jar in missing]
            for fut in futures:
                fut.result()  # the first failure, in list order; the others finish first
    (libs / _MARKER).write_text(stamp + "\n", encoding="utf-8")


# --------------------------------------------------------------------- locking


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on *path* (created if needed)."""
    with path.open("a+b") as f:
        if sys.platform == "win32":
            import msvcrt

            f.seek(0)
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)  # retries for ~10 s
                    break
                except OSError:
                    time.sleep(0.1)
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


# --------------------------------------------------------------------- Maven fallback


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


def _fetch_maven(mvn: str, version: str, pom: str, stamp: str, libs: Path) -> None:
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


# --------------------------------------------------------------------- entry points


def _fetched(marker: Path, stamps: tuple[str, ...]) -> bool:
    try:
        return marker.read_text(encoding="utf-8").strip() in stamps
    except OSError:
        return False


def ensure_jars(version: str | None = None) -> Path:
    """Return the directory holding every jar of Kafka *version*, fetching it first if needed.

    Pinned versions are downloaded from Maven Central directly; others need Maven.
    Raises KafkaStartError when a jar cannot be downloaded or fails its checksum (naming
    the URL), or when Maven is needed and missing or fails (with Maven's last lines).
    """
    version = kafka_version(version)
    libs = cache_dir() / "kafka" / version / "libs"
    marker = libs / _MARKER
    pin_text = _pin_text(version)
    pom = render_pom(version)
    maven_stamp = hashlib.sha256(pom.encode()).hexdigest()
    if pin_text is not None:
        stamp = "pinned " + hashlib.sha256(pin_text.encode()).hexdigest()
        # A Maven fetch of the same pom (kpax before the pinned lists) holds the same jars:
        # taken as is, so a cache shared with such a checkout is not fetched back and forth.
        accepted: tuple[str, ...] = (stamp, maven_stamp)
    else:
        stamp = maven_stamp
        accepted = (stamp,)
    if _fetched(marker, accepted):
        return libs
    mvn = None
    if pin_text is None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise KafkaStartError(
                f"Apache Kafka {version} has no pinned jar list in kpax.testing (pinned: "
                f"{', '.join(PINNED_VERSIONS)}), so Maven (mvn) is needed to resolve its jars "
                "from Maven Central, and it is not on PATH. Use a pinned version "
                "(KPAX_KAFKA_VERSION), install Maven, or set KPAX_TEST_BOOTSTRAP=host:port "
                "to use a running Kafka."
            )
    libs.parent.mkdir(parents=True, exist_ok=True)
    with _locked(libs.parent / ".lock"):  # one fetch at a time; others then reuse it
        if _fetched(marker, accepted):
            return libs
        if mvn is None:
            pins = pinned_jars(version)
            assert pins is not None
            _fetch_pinned(version, pins, stamp, libs)
        else:
            _fetch_maven(mvn, version, pom, stamp, libs)
    return libs


def classpath(version: str | None = None) -> str:
    """A ``java -cp`` string with all jars of Kafka *version* (including kafka-clients)."""
    libs = ensure_jars(version)
    return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))
