"""A single-node KRaft Kafka in Docker (the official ``apache/kafka`` image) via testcontainers.

Role: the backend chosen when a Docker engine answers. The container runs one
combined broker+controller node configured through the image's ``KAFKA_*``
environment variables. Host ports are picked up front and bound 1:1 so the
advertised listeners (127.0.0.1:<host port>) are right before the broker starts.
Listeners: PLAINTEXT, plus SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256/512; SCRAM users
added with kafka-configs inside the container) and SSL (keystore mounted from a
host temp dir) when asked. An INTERNAL listener on 29092 serves inter-broker
traffic and the tools run inside the container. Broker control: kill/restart
map to ``docker kill``/``docker start`` (port bindings and data survive),
pause/resume to ``docker pause``/``unpause``. Only ``brokers=1``.

Imports: the standard library, testcontainers/docker (lazily, inside functions)
and kpax.testing.{base,errors,tls,wire}.
"""

from __future__ import annotations

import base64
import shutil
import signal
import socket
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kpax.testing.base import DEFAULT_SASL_USERS, KafkaCluster
from kpax.testing.errors import KafkaStartError
from kpax.testing.tls import KEYSTORE_PASSWORD, make_tls_material
from kpax.testing.wire import WireError, api_versions

#: signal.SIGKILL where it exists (POSIX): the module must import anywhere.
_SIGKILL = getattr(signal, "SIGKILL", 9)

__all__ = ["ContainerCluster"]

_INTERNAL_PORT = 29092
_SECRETS = "/etc/kafka/secrets"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env_key(prop: str) -> str:
    # The image maps KAFKA_A_B to a.b, "__" to "_" and "___" to "-".
    table = {"-": "___", "_": "__", ".": "_"}
    return "KAFKA_" + "".join(table.get(ch, ch) for ch in prop).upper()


class ContainerCluster(KafkaCluster):
    """One ``apache/kafka:<version>`` container (KRaft, node id 1)."""

    backend = "docker"

    def __init__(
        self,
        *,
        version: str,
        sasl: bool = False,
        ssl: bool = False,
        config: dict[str, Any] | None = None,
        image: str | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        super().__init__()
        self.version = version
        self.image = image or f"apache/kafka:{version}"
        self.sasl = sasl
        self.ssl = ssl
        self.overrides = dict(config or {})
        self.startup_timeout = startup_timeout
        self.sasl_users = dict(DEFAULT_SASL_USERS) if sasl else {}
        self.ports: dict[str, int] = {}
        self._container: Any = None
        self._tmp: Path | None = None

    @property
    def brokers(self) -> dict[int, str]:
        return self.listeners("PLAINTEXT")

    def listeners(self, name: str) -> dict[int, str]:
        if name not in self.ports:
            raise KafkaStartError(
                f"docker cluster has no {name} listener; it has {list(self.ports)}"
            )
        return {1: f"127.0.0.1:{self.ports[name]}"}

    def _environment(self) -> dict[str, str]:
        names = (
            ["PLAINTEXT"]
            + (["SASL_PLAINTEXT"] if self.sasl else [])
            + (["SSL"] if self.ssl else [])
        )
        self.ports = {name: _free_port() for name in names}
        listeners = [f"{n}://0.0.0.0:{p}" for n, p in self.ports.items()]
        advertised = [f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()]
        props: dict[str, Any] = {
            "node.id": 1,
            "process.roles": "broker,controller",
            "controller.quorum.voters": "1@localhost:29093",
            "listeners": ",".join(
                [*listeners, f"INTERNAL://0.0.0.0:{_INTERNAL_PORT}", "CONTROLLER://0.0.0.0:29093"]
            ),
            "advertised.listeners": ",".join(
                [*advertised, f"INTERNAL://localhost:{_INTERNAL_PORT}"]
            ),
            "listener.security.protocol.map": ",".join(
                [f"{n}:{n}" for n in names] + ["INTERNAL:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "auto.create.topics.enable": "true",
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            # share groups' record locks may be as short as 1 s (the default floor is 15 s)
            "group.share.min.record.lock.duration.ms": 1000,
            # a new share group member gets its partitions at its next heartbeat
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.heartbeat.interval.ms": 500,
        }
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        env: dict[str, str] = {"CLUSTER_ID": "A" + cluster_id[1:]}  # never starts with "-"
        if self.sasl:
            users = " ".join(f'user_{u}="{p}"' for u, p in self.sasl_users.items())
            props["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            )
            for mech in ("scram-sha-256", "scram-sha-512"):
                props[f"listener.name.sasl_plaintext.{mech}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        if self.ssl:
            # The image's configure script turns these into ssl.keystore.* under /etc/kafka/secrets.
            env["KAFKA_SSL_KEYSTORE_FILENAME"] = "broker.p12"
            env["KAFKA_SSL_KEYSTORE_CREDENTIALS"] = "keystore_creds"
            env["KAFKA_SSL_KEY_CREDENTIALS"] = "keystore_creds"
            # no client auth, so any loadable truststore will do: reuse the keystore
            env["KAFKA_SSL_TRUSTSTORE_FILENAME"] = "broker.p12"
            env["KAFKA_SSL_TRUSTSTORE_CREDENTIALS"] = "keystore_creds"
            props["ssl.truststore.type"] = "PKCS12"
            props["ssl.keystore.type"] = "PKCS12"
            props["ssl.client.auth"] = "none"
        props.update(self.overrides)
        env.update({_env_key(k): str(v) for k, v in props.items()})
        return env

    def start(self) -> ContainerCluster:
        """Pull/start the container and wait until the PLAINTEXT listener answers."""
        from testcontainers.core.container import DockerContainer

        self._tmp = Path(tempfile.mkdtemp(prefix="kpax-kafka-docker-"))
        env = self._environment()
        container = DockerContainer(self.image)
        for key, value in env.items():
            container.with_env(key, value)
        for port in self.ports.values():
            container.with_bind_ports(port, port)
        if self.ssl:
            tls = make_tls_material(self._tmp / "tls")
            (tls.keystore.parent / "keystore_creds").write_text(KEYSTORE_PASSWORD)
            # the image runs as an unprivileged user: let it read the throw-away material
            for path in (self._tmp, tls.keystore.parent, *tls.keystore.parent.iterdir()):
                path.chmod(0o755 if path.is_dir() else 0o644)
            self.ssl_cafile = str(tls.cafile)
            container.with_volume_mapping(str(tls.keystore.parent), _SECRETS, "ro")
        self._container = container
        try:
            container.start()
            self._wait_ready(self.startup_timeout)
            if self.sasl:
                self._add_scram_users()
        except BaseException as exc:
            tail = self.log_tail(n=30)
            self.stop()
            if isinstance(exc, KafkaStartError):
                raise
            raise KafkaStartError(
                f"Kafka container {self.image} failed to start: {exc}\nlast log lines:\n{tail}"
            ) from exc
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        addr = self.brokers[1]
        while True:
            try:
                api_versions(addr, timeout=2.0)
                return
            except (OSError, WireError):
                if time.monotonic() > deadline:
                    raise KafkaStartError(
                        f"Kafka container {self.image} did not answer ApiVersions on {addr} "
                        f"within {timeout:.0f}s; last log lines:\n{self.log_tail(n=30)}"
                    ) from None
                time.sleep(0.2)

    def _add_scram_users(self) -> None:
        for user, password in self.sasl_users.items():
            cfg = f"SCRAM-SHA-256=[password={password}],SCRAM-SHA-512=[password={password}]"
            code, out = self._container.exec(
                [
                    "/opt/kafka/bin/kafka-configs.sh",
                    "--bootstrap-server",
                    f"localhost:{_INTERNAL_PORT}",
                    "--alter",
                    "--add-config",
                    cfg,
                    "--entity-type",
                    "users",
                    "--entity-name",
                    user,
                ]
            )
            if code != 0:
                raise KafkaStartError(f"kafka-configs could not add SCRAM user {user}: {out!r}")

    def _docker(self) -> Any:
        if self._container is None:
            raise KafkaStartError("docker cluster is not started")
        return self._container.get_wrapped_container()

    def _check_node(self, node_id: int) -> None:
        if node_id != 1:
            raise KafkaStartError(f"no broker {node_id}; the docker backend runs node 1 only")

    def kill_broker(self, node_id: int, sig: int = _SIGKILL) -> None:
        self._check_node(node_id)
        self._docker().kill(signal=int(sig))

    def restart_broker(self, node_id: int, timeout: float = 90.0) -> None:
        self._check_node(node_id)
        c = self._docker()
        c.reload()
        if c.status == "running":
            c.kill()
        c.start()
        self._wait_ready(timeout)

    def pause_broker(self, node_id: int) -> None:
        self._check_node(node_id)
        self._docker().pause()

    def resume_broker(self, node_id: int) -> None:
        self._check_node(node_id)
        self._docker().unpause()

    def log_tail(self, node_id: int | None = None, n: int = 40) -> str:
        if self._container is None:
            return ""
        try:
            out, err = self._container.get_logs()
        except Exception as exc:  # a dead engine must not hide the real failure
            return f"(container logs unavailable: {exc})"
        text = (out or b"").decode(errors="replace") + (err or b"").decode(errors="replace")
        return "\n".join(text.splitlines()[-n:])

    def stop(self) -> None:
        if self._container is not None:
            try:
                self._container.stop()
            except Exception:
                pass
            self._container = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
