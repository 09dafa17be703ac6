"""Which test Kafka kpax.testing picks: an existing cluster, Docker, or local JVM brokers.

Only the Docker *ping* is stubbed (no engine on this machine); no Kafka is mocked."""

from __future__ import annotations

import time

import pytest

from kpax.testing import ExistingCluster, KafkaStartError, backends, select_backend, start_kafka


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "KPAX_TEST_BOOTSTRAP",
        "KPAX_TEST_BACKEND",
        "KPAX_TEST_SASL_BOOTSTRAP",
        "KPAX_TEST_SSL_BOOTSTRAP",
        "KPAX_TEST_SSL_CAFILE",
        "KPAX_TEST_SASL_USERS",
    ):
        monkeypatch.delenv(var, raising=False)


def test_env_bootstrap_selects_the_existing_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPAX_TEST_BOOTSTRAP", "10.1.2.3:9092,10.1.2.4:9092")
    monkeypatch.setattr(backends, "_docker_ping", lambda timeout: True)
    assert select_backend() == "existing"
    cluster = start_kafka()  # nothing is started
    assert isinstance(cluster, ExistingCluster)
    assert cluster.bootstrap == "10.1.2.3:9092,10.1.2.4:9092"
    assert cluster.brokers == {1: "10.1.2.3:9092", 2: "10.1.2.4:9092"}
    with pytest.raises(KafkaStartError, match="KPAX_TEST_SSL_BOOTSTRAP"):
        cluster.listener("SSL")
    with pytest.raises(KafkaStartError, match="cannot kill"):
        cluster.kill_broker(1)
    cluster.stop()


def test_existing_cluster_other_listeners_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPAX_TEST_BOOTSTRAP", "h:9092")
    monkeypatch.setenv("KPAX_TEST_SASL_BOOTSTRAP", "h:9094")
    monkeypatch.setenv("KPAX_TEST_SASL_USERS", "u:p")
    cluster = ExistingCluster()
    assert cluster.listener("SASL_PLAINTEXT") == "h:9094"
    assert cluster.sasl_users == {"u": "p"}


def test_unreachable_docker_falls_back_to_local_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    # A TCP engine address nobody answers: connecting would hang without the 2 s bound.
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.255.255.1:2375")
    t0 = time.monotonic()
    assert select_backend() == "local"
    assert time.monotonic() - t0 < 3.0


def test_missing_docker_socket_falls_back_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    t0 = time.monotonic()
    assert select_backend() == "local"
    assert time.monotonic() - t0 < 0.5


def test_a_hanging_ping_is_cut_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "_docker_ping", lambda timeout: time.sleep(30) or True)
    t0 = time.monotonic()
    assert backends.docker_available(timeout=0.5) is False
    assert time.monotonic() - t0 < 1.5


def test_answering_docker_selects_testcontainers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "_docker_ping", lambda timeout: True)
    assert select_backend() == "docker"


def test_backend_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "_docker_ping", lambda timeout: True)
    monkeypatch.setenv("KPAX_TEST_BACKEND", "local")
    assert select_backend() == "local"
    monkeypatch.setenv("KPAX_TEST_BACKEND", "podman")
    with pytest.raises(KafkaStartError, match="KPAX_TEST_BACKEND"):
        select_backend()


def test_container_env_names_follow_the_image_convention() -> None:
    from kpax.testing.containers import _env_key

    assert _env_key("node.id") == "KAFKA_NODE_ID"
    assert (
        _env_key("listener.name.sasl_plaintext.plain.sasl.jaas.config")
        == "KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG"
    )
    assert _env_key("a-b.c") == "KAFKA_A___B_C"


def test_container_config_is_kraft_with_host_reachable_listeners() -> None:
    from kpax.testing.containers import ContainerCluster

    c = ContainerCluster(version="4.3.1", sasl=True, ssl=True, config={"num.partitions": 3})
    env = c._environment()
    assert c.image == "apache/kafka:4.3.1"
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@localhost:29093"
    advertised = env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL"):
        assert f"{name}://127.0.0.1:{c.ports[name]}" in advertised
        assert c.listener(name) == f"127.0.0.1:{c.ports[name]}"
    assert "CONTROLLER" not in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_NUM_PARTITIONS"] == "3"
    assert len(env["CLUSTER_ID"]) == 22 and not env["CLUSTER_ID"].startswith("-")
    assert env["KAFKA_SSL_KEYSTORE_FILENAME"] == "broker.p12"


def test_what_a_shared_cluster_cannot_do_is_not_available_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pausing, killing or restarting a broker of a cluster someone else runs, or
    a listener it was not described with: NotAvailableHere (a KafkaStartError),
    which the pytest plugin reports as a skip with this message."""
    from kpax.testing.errors import NotAvailableHere

    monkeypatch.setenv("KPAX_TEST_BOOTSTRAP", "h1:9092")
    monkeypatch.delenv("KPAX_TEST_SASL_BOOTSTRAP", raising=False)
    cluster = ExistingCluster()
    for action in (cluster.pause_broker, cluster.resume_broker, cluster.kill_broker):
        with pytest.raises(NotAvailableHere, match="existing cluster: cannot"):
            action(1)
    with pytest.raises(NotAvailableHere, match="KPAX_TEST_SASL_BOOTSTRAP"):
        cluster.listener("SASL_PLAINTEXT")
    assert issubclass(NotAvailableHere, KafkaStartError)
