"""Which test Kafka to use, and starting it.

Role: `select_backend` decides, in order:

1. ``KPAX_TEST_BOOTSTRAP=host:port`` set -> "existing" (nothing is started);
2. ``KPAX_TEST_BACKEND=local|docker`` set -> that backend;
3. a Docker engine answers a ping within ~2 s -> "docker" (testcontainers);
4. otherwise -> "local" (JVM brokers from Maven Central jars).

`start_kafka` returns a started `KafkaCluster` from the chosen backend. The
docker backend runs one node; asking it for more brokers falls back to local.

Imports: the standard library and kpax.testing.{base,errors,jars,local,containers}
(docker/testcontainers only lazily).
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import urlparse

from kpax.testing import jars
from kpax.testing.base import ExistingCluster, KafkaCluster
from kpax.testing.errors import KafkaStartError
from kpax.testing.local import LocalCluster

__all__ = ["docker_available", "select_backend", "start_kafka"]

DOCKER_PING_TIMEOUT = 2.0


def _docker_ping(timeout: float) -> bool:
    """Ask the Docker engine (DOCKER_HOST or the default socket) for /_ping."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        sock = "/var/run/docker.sock"
        if not os.path.exists(sock):
            return False  # the common "no Docker here" case costs nothing
    elif urlparse(host).scheme == "unix" and not os.path.exists(urlparse(host).path):
        return False
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=max(1, int(timeout)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def docker_available(timeout: float = DOCKER_PING_TIMEOUT) -> bool:
    """True if a Docker engine answers a ping within *timeout* seconds (hard bound)."""
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(_docker_ping(timeout)), daemon=True)
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def select_backend() -> str:
    """Return "existing", "docker" or "local" (see the module docstring for the order)."""
    if os.environ.get("KPAX_TEST_BOOTSTRAP"):
        return "existing"
    forced = os.environ.get("KPAX_TEST_BACKEND", "").strip().lower()
    if forced:
        if forced not in ("local", "docker"):
            raise KafkaStartError(f"KPAX_TEST_BACKEND={forced!r}: expected 'local' or 'docker'")
        return forced
    return "docker" if docker_available() else "local"


def start_kafka(
    brokers: int = 1,
    *,
    version: str | None = None,
    sasl: bool = False,
    ssl: bool = False,
    config: dict[str, Any] | None = None,
    backend: str | None = None,
) -> KafkaCluster:
    """Start (or connect to) a Kafka with *brokers* nodes and return its handle.

    *config* holds broker property overrides, e.g. ``{"auto.create.topics.enable": "false"}``
    (ignored for an existing cluster). Raises KafkaStartError with what to do on failure.
    """
    backend = backend or select_backend()
    if backend == "existing":
        return ExistingCluster()
    version = jars.kafka_version(version)
    if backend == "docker" and brokers == 1:
        from kpax.testing.containers import ContainerCluster

        return ContainerCluster(version=version, sasl=sasl, ssl=ssl, config=config).start()
    return LocalCluster(brokers, version=version, sasl=sasl, ssl=ssl, config=config).start()
