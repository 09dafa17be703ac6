"""Deploying kpax for Spark (docs/spark.md, Deployment): kpax shipped as a zip with
``--py-files`` works on the standalone cluster's executors, and since a zip cannot
load C extensions, the first Python worker of each executor says once that kpax
runs without them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from kpax.testing.pytest_plugin import create_topic
from tests.integration.spark_helpers import REPO, produce, standalone_cluster

pytestmark = [pytest.mark.slow, pytest.mark.integration]

WARNING = "kpax spark: kpax runs without its C extensions"


def test_pure_python_warning_once_per_executor(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Without the C extensions: one warning per executor (the Python workers of
    one executor share its daemon, their parent), none with them."""
    import kpax.proto.accel as accel
    import kpax.spark.clients as clients

    monkeypatch.setattr(clients.tempfile, "gettempdir", lambda: str(tmp_path))
    caplog.set_level(logging.WARNING, logger="kpax.spark")
    assert not clients.warn_if_pure_python()  # the C extensions are there
    monkeypatch.setattr(accel, "speedups", None)
    for executor in (111, 111, 222):  # two workers of executor 111, one of 222
        monkeypatch.setattr(clients, "_warned", False)  # a new worker process
        monkeypatch.setattr(clients.os, "getppid", lambda e=executor: e)
        assert clients.warn_if_pure_python()
        assert clients.warn_if_pure_python()  # the same worker: once
    said = [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]
    assert len(said) == 2
    assert "_speedups not importable" in said[0] and "--py-files" in said[0]


def _zip_kpax(path: Path) -> Path:
    """kpax's Python files in a zip, as a user builds one for --py-files."""
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted((REPO / "kpax").rglob("*")):
            if (
                f.is_file()
                and f.suffix in (".py", ".json", ".typed")
                and "__pycache__" not in f.parts
            ):
                z.write(f, f.relative_to(REPO))
    return path


@pytest.mark.timeout(600)
@pytest.mark.soak
def test_py_files_zip_on_the_standalone_cluster(kafka: Any, tmp_path: Path) -> None:
    """An application shipping kpax.zip with --py-files (its own driver process):
    its executors import kpax from the zip, read every record, and each says once
    that kpax runs without its C extensions (the executors' stderr)."""
    cluster = standalone_cluster()
    topic = create_topic(kafka, 4)
    produce(kafka.bootstrap, topic, [(i % 4, None, b"z", None, None) for i in range(400)])
    env = dict(os.environ, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.spark_pyfiles_driver",
            "--master",
            cluster.url,
            "--zip",
            str(_zip_kpax(tmp_path / "kpax.zip")),
            "--bootstrap",
            kafka.bootstrap,
            "--topic",
            topic,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["count"] == 400
    assert all("kpax.zip" in f for f in result["files"]), result["files"]
    logs = sorted(cluster.dir.glob(f"work*/{result['app']}/*/stderr"))
    assert len(logs) >= 2
    texts = [p.read_text(errors="replace") for p in logs]
    counts = [t.count(WARNING) for t in texts]
    kpax_lines = [line for t in texts for line in t.splitlines() if "kpax" in line.lower()]
    assert max(counts) == 1 and sum(counts) >= 1, (counts, kpax_lines[-20:])
