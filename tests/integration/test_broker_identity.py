"""ApiVersions v5 (Kafka 4.4, KIP-1242): a connection says which node of which cluster
it means, and a broker that is another one answers REBOOTSTRAP_REQUIRED.

kpax sends the node id and cluster id its metadata gives for the address (a
bootstrap address has neither and sends none). On a 4.4.0 broker: the right
pair connects; a wrong node id or cluster id is refused with
:class:`kpax.errors.BrokerIdentityError`, naming the broker. Older brokers
answer a v5 request in v0 (KIP-511) and kpax goes on at their newest version,
keeping what only that version carries (the finalized features that turn
transactions v2 on). And the whole point: a cluster replaced by another one
on the same address is noticed at the first reconnect, the client
rebootstraps and carries on with the new cluster's metadata.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

import kpax
from kpax.broker.connection import BrokerConnection
from kpax.broker.options import connection_options
from kpax.errors import BrokerIdentityError
from kpax.proto.messages import ApiVersionsRequest
from kpax.testing import local
from kpax.testing.backends import select_backend, start_kafka
from kpax.testing.base import KafkaCluster
from kpax.testing.pytest_plugin import create_topic

pytestmark = pytest.mark.timeout(300)

V44 = "4.4.0"


def _own_cluster() -> None:
    if select_backend() != "local":
        pytest.skip("starts Kafka 4.4.0 brokers of its own on chosen ports (local backend)")


@pytest.fixture(scope="module")
def kafka44() -> Iterator[KafkaCluster]:
    _own_cluster()
    cluster = start_kafka(version=V44)
    try:
        yield cluster
    finally:
        cluster.stop()


def _open(address: str, node_id: int | None, cluster_id: str | None) -> BrokerConnection:
    host, port = address.rsplit(":", 1)
    opts = connection_options({"request_timeout_ms": 10000})

    async def go() -> BrokerConnection:
        conn = await BrokerConnection.open(
            host, int(port), opts, node_id=node_id, cluster_id=cluster_id
        )
        conn.close()
        return conn

    return asyncio.run(go())


def test_the_right_node_connects_with_v5_and_a_wrong_one_is_refused(
    kafka44: KafkaCluster,
) -> None:
    cluster_id = kafka44.cluster_id  # type: ignore[attr-defined]
    conn = _open(kafka44.bootstrap, 1, cluster_id)
    assert conn.api_versions[ApiVersionsRequest.API_KEY][1] == 5
    assert conn.finalized_features.get("transaction.version", 0) >= 2
    _open(kafka44.bootstrap, None, None)  # a bootstrap address: nothing to check
    with pytest.raises(BrokerIdentityError) as wrong_node:
        _open(kafka44.bootstrap, 2, cluster_id)
    assert "broker 2 (127.0.0.1:" in str(wrong_node.value)
    assert "REBOOTSTRAP_REQUIRED" in str(wrong_node.value)
    assert wrong_node.value.retriable
    with pytest.raises(BrokerIdentityError) as wrong_cluster:
        _open(kafka44.bootstrap, 1, "AAAAAAAAAAAAAAAAAAAAAA")
    assert "cluster AAAAAAAAAAAAAAAAAAAAAA" in str(wrong_cluster.value)


def test_an_older_broker_answers_v0_and_keeps_its_newest_version(kafka: KafkaCluster) -> None:
    # The suite's default broker (4.3.1; 3.9.2 too) has ApiVersions up to v4: the v5
    # request is answered in v0, and the second request, at v4, brings the finalized
    # features (a KRaft cluster always has metadata.version).
    top = _open(kafka.bootstrap, None, None).api_versions[ApiVersionsRequest.API_KEY][1]
    if top >= 5:
        pytest.skip(f"the suite's broker speaks ApiVersions v{top} (Kafka 4.4+)")
    # (an id pair it cannot check: v4 has no such fields, nothing is refused)
    conn = _open(kafka.bootstrap, 1, "AAAAAAAAAAAAAAAAAAAAAA")
    assert top == 4
    assert conn.finalized_features.get("metadata.version", 0) > 0


def test_a_cluster_replaced_on_the_same_address_is_noticed_and_rebootstrapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _own_cluster()
    a = local.LocalCluster(version=V44).start()
    try:
        ports = list(a.nodes[1].ports.values())
        address = a.bootstrap
        t = "ident-" + uuid.uuid4().hex[:8]
        create_topic(a, 1, name=t)
        fast = {"request_timeout_ms": 5000, "reconnect_backoff_max_ms": 500}
        with kpax.Admin(address, **fast) as admin:
            assert t in admin.list_topics()
            first_id = admin.describe_cluster().cluster_id
            a.stop()
            # Cluster B: a new cluster id, its node 1 on A's very ports.
            monkeypatch.setattr(local, "_free_ports", lambda n: ports[:n])
            b = local.LocalCluster(version=V44).start()
            try:
                assert b.bootstrap == address
                u = "ident-b-" + uuid.uuid4().hex[:8]
                create_topic(b, 1, name=u)
                deadline = time.monotonic() + 60
                names: set[str] = set()
                while time.monotonic() < deadline:
                    try:
                        names = set(admin.list_topics())
                    except kpax.errors.KafkaError:
                        continue
                    if u in names:
                        break
                assert u in names and t not in names, names
                assert admin.describe_cluster().cluster_id not in (first_id, None)
            finally:
                b.stop()
    finally:
        a.stop()
