"""The test Kafka is a real Apache Kafka: raw requests over plain, SASL and TLS sockets,
a three-broker cluster that survives a crashed broker, and the kafka-local command."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kpax.testing import KafkaCluster, LocalCluster, api_versions
from kpax.testing.wire import BrokerConnection

REPO = Path(__file__).resolve().parents[2]

PRODUCE, FETCH, METADATA = 0, 1, 3


def test_api_versions_lists_produce_fetch_metadata(kafka: KafkaCluster) -> None:
    for version in (0, 3):
        result = api_versions(_first(kafka.bootstrap), version=version)
        assert result.error_code == 0
        for key, newest_at_least in ((PRODUCE, 8), (FETCH, 11), (METADATA, 9)):
            lo, hi = result.versions[key]
            assert 0 <= lo <= hi
            assert hi >= newest_at_least
        assert 22 in result.versions  # InitProducerId: idempotence and transactions
        if kafka.version and int(kafka.version.split(".")[0]) >= 4:
            assert 68 in result.versions  # ConsumerGroupHeartbeat: KIP-848 groups


def _first(addresses: str) -> str:
    return addresses.split(",", maxsplit=1)[0]


def _handshake(conn: BrokerConnection, mechanism: str) -> list[str]:
    error, mechanisms = conn.sasl_handshake(mechanism)
    assert error == 0, f"SaslHandshake({mechanism}) error {error}"
    return mechanisms


def test_sasl_plain_authenticates_and_rejects_a_wrong_password(kafka: KafkaCluster) -> None:
    user, password = next(iter(kafka.sasl_users.items()))
    with BrokerConnection(_first(kafka.listener("SASL_PLAINTEXT"))) as conn:
        mechanisms = _handshake(conn, "PLAIN")
        assert {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} <= set(mechanisms)
        error, message, _ = conn.sasl_authenticate(f"\0{user}\0{password}".encode())
        assert error == 0, message
        assert conn.api_versions().error_code == 0  # authenticated: requests are served
    with BrokerConnection(_first(kafka.listener("SASL_PLAINTEXT"))) as conn:
        _handshake(conn, "PLAIN")
        error, message, _ = conn.sasl_authenticate(f"\0{user}\0wrong".encode())
        assert error == 58  # SASL_AUTHENTICATION_FAILED
        assert message


@pytest.mark.parametrize(
    ("mechanism", "digest"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")]
)
def test_sasl_scram_authenticates(kafka: KafkaCluster, mechanism: str, digest: str) -> None:
    user, password = next(iter(kafka.sasl_users.items()))
    with BrokerConnection(_first(kafka.listener("SASL_PLAINTEXT"))) as conn:
        _handshake(conn, mechanism)
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n={user},r={nonce}"
        error, message, server_first = conn.sasl_authenticate(f"n,,{first_bare}".encode())
        assert error == 0, message
        fields = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        assert fields["r"].startswith(nonce)
        salted = hashlib.pbkdf2_hmac(
            digest, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
        )
        client_key = hmac.digest(salted, b"Client Key", digest)
        final_bare = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first.decode()},{final_bare}".encode()
        signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth_message, digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        final = f"{final_bare},p={base64.b64encode(proof).decode()}"
        error, message, server_final = conn.sasl_authenticate(final.encode())
        assert error == 0, message
        server_key = hmac.digest(salted, b"Server Key", digest)
        expected = base64.b64encode(hmac.digest(server_key, auth_message, digest)).decode()
        assert server_final.decode() == f"v={expected}"


def test_ssl_listener_needs_the_ca(kafka: KafkaCluster) -> None:
    address = _first(kafka.listener("SSL"))
    assert kafka.ssl_cafile is not None
    ctx = ssl.create_default_context(cafile=kafka.ssl_cafile)
    assert api_versions(address, ssl_context=ctx).versions[PRODUCE][1] >= 8
    with pytest.raises(ssl.SSLCertVerificationError):
        api_versions(address, ssl_context=ssl.create_default_context())


def test_three_brokers_answer_and_survive_a_killed_broker(
    kafka_cluster3: LocalCluster, topic
) -> None:
    assert sorted(kafka_cluster3.brokers) == [1, 2, 3]
    for address in kafka_cluster3.brokers.values():
        assert api_versions(address).error_code == 0
    name = topic(3, replication_factor=3, cluster=kafka_cluster3)
    assert name

    kafka_cluster3.kill_broker(2)
    assert not kafka_cluster3.is_running(2)
    with pytest.raises(OSError):
        api_versions(kafka_cluster3.brokers[2], timeout=1.0)
    for node in (1, 3):
        assert api_versions(kafka_cluster3.brokers[node]).error_code == 0

    kafka_cluster3.restart_broker(2)
    assert kafka_cluster3.is_running(2)
    assert api_versions(kafka_cluster3.brokers[2]).error_code == 0


def test_paused_broker_stops_answering_until_resumed(kafka_cluster3: LocalCluster) -> None:
    address = kafka_cluster3.brokers[3]
    kafka_cluster3.pause_broker(3)
    try:
        with pytest.raises(OSError):  # accepted by the kernel, never answered
            api_versions(address, timeout=1.0)
    finally:
        kafka_cluster3.resume_broker(3)
    assert api_versions(address).error_code == 0


def test_special_broker_from_the_factory(kafka_factory) -> None:
    cluster = kafka_factory(config={"auto.create.topics.enable": "false"})
    assert api_versions(_first(cluster.bootstrap)).error_code == 0
    if isinstance(cluster, LocalCluster):
        props = (cluster.nodes[1].dir / "server.properties").read_text()
        assert "auto.create.topics.enable=false" in props


def _kafka_local(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "cmd" / "kafka-local"), *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_kafka_local_start_status_stop(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    started = _kafka_local("start", state_dir=state_dir)
    assert started.returncode == 0, started.stderr
    bootstrap = started.stdout.strip()
    try:
        assert api_versions(bootstrap).error_code == 0  # usable from another process
        status = _kafka_local("status", "--json", state_dir=state_dir)
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert info["bootstrap"] == bootstrap
        pids = [int(p) for p in info["pids"].values()]
        workdir = Path(info["workdir"])
        assert workdir.is_dir() and all(_alive(p) for p in pids)
    finally:
        stopped = _kafka_local("stop", state_dir=state_dir)
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    assert not workdir.exists()
    assert list(state_dir.iterdir()) == []
    assert _kafka_local("status", state_dir=state_dir).returncode == 1


def test_taken_port_is_a_clear_start_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from kpax.testing import KafkaStartError, local

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        free_ports = local._free_ports
        monkeypatch.setattr(local, "_free_ports", lambda n: [taken, *free_ports(n - 1)])
        cluster = LocalCluster(1)
        with pytest.raises(KafkaStartError, match=f"port is taken.*PLAINTEXT={taken}") as err:
            cluster.start()
    assert "Address already in use" in str(err.value)  # the broker's own log line is shown
    assert cluster.workdir is not None and not cluster.workdir.exists()


def test_a_port_taken_between_pick_and_bind_makes_the_start_try_again(monkeypatch) -> None:
    """A free port is free only until someone binds it: a broker whose port was
    taken meanwhile (a clean-clone run lost every test of its session broker that
    way) makes LocalCluster start again with new ports, not fail."""
    import socket

    from kpax.testing import local

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real = local._free_ports
    picks: list[list[int]] = []

    def first_pick_taken(n: int) -> list[int]:
        ports = real(n)
        if not picks:
            ports[-1] = taken  # (the CONTROLLER listener's: bound while starting)
        picks.append(ports)
        return ports

    monkeypatch.setattr(local, "_free_ports", first_pick_taken)
    cluster = LocalCluster(brokers=1)
    try:
        cluster.start()
        assert len(picks) == 2 and taken not in picks[1]
        assert api_versions(_first(cluster.bootstrap)).error_code == 0
    finally:
        cluster.stop()
        holder.close()
