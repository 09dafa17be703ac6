"""Shared pieces of the Spark tests: a SparkSession with "kpax" registered, on
``local[2]`` or on a Spark standalone cluster (a master and two workers, each a
JVM of its own, started here from the pyspark package), and producing known
records with kpax.Producer.

The standalone cluster is started once per test session, when a test first asks
for it (test_spark_cluster.py, the deployment and exactly-once tests); the
other Spark test modules share one local[2] session (tests/integration/conftest.py). Its executors
import kpax from this checkout (``spark.executorEnv.PYTHONPATH``), as a node
with kpax installed would; the driver-side planning workers inherit the test
process's environment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kpax

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1; :attr:`url`
    is the master's ``spark://`` URL. Each worker offers 2 cores and 2 GiB; an
    application gets 2 cores (``spark.cores.max``), one executor on each worker:
    the shared test session and a test's own application (the kill test's
    driver) run side by side."""

    def __init__(self, workers: int = 2) -> None:
        self.workers = workers
        self.dir = Path(tempfile.mkdtemp(prefix="kpax-spark-standalone-"))
        self.port = _free_port()
        self.ui = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.dir / "logs"),
            SPARK_WORKER_DIR=str(self.dir / "work"),
            SPARK_LOCAL_DIRS=str(self.dir / "local"),
            SPARK_DAEMON_MEMORY="256m",
            PYSPARK_PYTHON=sys.executable,
        )
        return env

    def _start(self, name: str, *args: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs.append(
            subprocess.Popen(
                [_spark_class(), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        )

    def alive_workers(self) -> int:
        """Workers registered with the master: from its web UI's JSON, or (the UI
        may have bound another port when the one picked was taken meanwhile)
        from its log's "Registering worker" lines."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except OSError:
            pass
        try:
            return (self.dir / "master.log").read_text(errors="replace").count("Registering worker")
        except OSError:
            return 0

    def _logs(self) -> str:
        """The last lines of each daemon's log (they go with the directory)."""
        out = []
        for name in ["master", *(f"worker{i}" for i in range(self.workers))]:
            try:
                lines = (self.dir / f"{name}.log").read_text(errors="replace").splitlines()
            except OSError:
                continue
            out.append(f"--- {name}.log (last 15 lines)\n" + "\n".join(lines[-15:]))
        return "\n".join(out)

    def start(self, timeout: float = 240.0) -> StandaloneCluster:
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui),
        )
        for i in range(self.workers):
            self._start(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(self.dir / f"work{i}"),
            )
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            for p in self.procs:
                if p.poll() is not None:
                    logs = self._logs()
                    self.stop()
                    raise RuntimeError(f"a Spark standalone daemon exited:\n{logs}")
            if time.monotonic() > deadline:
                logs = self._logs()
                self.stop()
                raise RuntimeError(
                    f"Spark standalone cluster not up in {timeout}s "
                    f"({self.alive_workers()} of {self.workers} workers):\n{logs}"
                )
            time.sleep(0.3)
        return self

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first: each stops its executors
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


_cluster: StandaloneCluster | None = None


def standalone_cluster() -> StandaloneCluster:
    """The session's standalone cluster (started on first use, stopped at exit)."""
    global _cluster
    if _cluster is None:
        import atexit

        _cluster = StandaloneCluster().start()
        atexit.register(_cluster.stop)
    return _cluster


def session_config(mode: str, app: str, master: str | None = None) -> dict[str, str]:
    """The Spark configuration of a test session in ``mode`` ("local" or "standalone";
    ``master``: that master's URL instead of local[2] or the session's cluster)."""
    conf = {
        "spark.app.name": app,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        "spark.pyspark.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    if mode == "local":
        conf["spark.master"] = master or "local[2]"
    else:
        conf.update(
            {
                "spark.master": master or standalone_cluster().url,
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.cores.max": "2",
                "spark.executorEnv.PYTHONPATH": str(REPO),
            }
        )
    return conf


def make_spark(app: str, mode: str = "local", **extra: str) -> Any:
    """A SparkSession in ``mode`` with "kpax" registered (``extra``: more settings).

    PYSPARK_PYTHON is set first: the Python workers that plan a query on the
    driver host run the Python it names (PySpark reads it when the context
    starts; ``spark.pyspark.python`` set on a session builder does not reach them)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kpax.spark

    builder = SparkSession.builder
    for k, v in {**session_config(mode, app), **extra}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)
    if mode == "standalone":
        wait_for_executors(spark, 2)
    return spark


def wait_for_executors(spark: Any, n: int, timeout: float = 120.0) -> None:
    """Wait until ``n`` executors (besides the driver) have registered."""
    deadline = time.monotonic() + timeout
    sc = spark.sparkContext
    while sc._jsc.sc().getExecutorMemoryStatus().size() < n + 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {n} executors registered in {timeout}s")
        time.sleep(0.2)


def spark_session(app: str, mode: str = "local") -> Iterator[Any]:
    spark = make_spark(f"{app}-{mode}", mode)
    try:
        yield spark
    finally:
        spark.stop()


def produce(
    bootstrap: str, topic: str, rows: list[tuple[int, bytes | None, bytes, Any, int | None]]
) -> list[Any]:
    """rows: (partition, key, value, headers, timestamp_ms) -> their RecordMetadata."""
    with kpax.Producer(bootstrap, linger_ms=2) as p:
        futs = [
            p.send(topic, v, key=k, partition=part, headers=h, timestamp=ts)
            for part, k, v, h, ts in rows
        ]
        p.flush(30)
        return [f.result(10) for f in futs]
