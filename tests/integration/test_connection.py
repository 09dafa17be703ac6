"""kpax.broker against a real broker: pipelining, version negotiation, SASL, TLS,
timeouts, broken connections, reconnects, idle close."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import replace

import pytest

from kpax.broker import Broker, BrokerConnection, ConnectionOptions
from kpax.broker.tls import build_ssl_context
from kpax.cluster.cluster import split_address
from kpax.proto.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedApiError,
)
from kpax.proto.messages import ApiVersionsRequest, MetadataRequest
from tests.sockets import tcp_connections

pytestmark = pytest.mark.integration


def _metadata(topic: str) -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
    )


async def test_1000_concurrent_requests_share_one_socket(kafka):
    host, port = split_address(kafka.bootstrap.split(",")[0])
    broker = Broker(host, port, ConnectionOptions())
    try:
        names = [f"no-such-topic-{i}" for i in range(1000)]
        responses = await asyncio.gather(*(broker.request(_metadata(n)) for n in names))
        # Each response names the topic its own request asked for: matched correctly.
        assert [r.topics[0].name for r in responses] == names
        assert all(r.topics[0].error_code == 3 for r in responses)  # UNKNOWN_TOPIC_OR_PARTITION
        assert broker.connects == 1
        assert tcp_connections(port) == 1
    finally:
        await broker.close()
    assert tcp_connections(port) == 0


async def test_versions_are_negotiated(kafka):
    host, port = split_address(kafka.bootstrap.split(",")[0])
    conn = await BrokerConnection.open(host, port, ConnectionOptions())
    try:
        _lo, hi = conn.api_versions[MetadataRequest.API_KEY]
        assert conn.pick_version(MetadataRequest) == min(hi, MetadataRequest.MAX_VERSION)
        assert conn.pick_version(MetadataRequest, max_version=9) == 9

        class Imaginary:
            API_KEY = 9999
            API_NAME = "Imaginary"
            MIN_VERSION = 0
            MAX_VERSION = 1

        with pytest.raises(UnsupportedApiError, match="Imaginary"):
            conn.pick_version(Imaginary)
        resp = await conn.request(ApiVersionsRequest(), version=0)
        assert resp.error_code == 0
    finally:
        conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_mechanisms(kafka, mechanism):
    host, port = split_address(kafka.listener("SASL_PLAINTEXT").split(",")[0])
    user, password = next(iter(kafka.sasl_users.items()))
    opts = ConnectionOptions(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username=user,
        sasl_password=password,
    )
    conn = await BrokerConnection.open(host, port, opts)
    try:
        resp = await conn.request(_metadata("sasl-probe"))
        assert resp.brokers
    finally:
        conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_wrong_password_is_authentication_error(kafka, mechanism):
    host, port = split_address(kafka.listener("SASL_PLAINTEXT").split(",")[0])
    user = next(iter(kafka.sasl_users))
    opts = ConnectionOptions(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username=user,
        sasl_password="wrong-password",
    )
    with pytest.raises(AuthenticationError, match=mechanism) as info:
        await BrokerConnection.open(host, port, opts)
    assert user in str(info.value)
    assert not info.value.retriable


async def test_ssl_listener_with_and_without_the_ca(kafka):
    host, port = split_address(kafka.listener("SSL").split(",")[0])
    good = ConnectionOptions(
        security_protocol="SSL", ssl_context=build_ssl_context(cafile=kafka.ssl_cafile)
    )
    conn = await BrokerConnection.open(host, port, good)
    try:
        assert (await conn.request(_metadata("ssl-probe"))).brokers
    finally:
        conn.close()
    bad = ConnectionOptions(security_protocol="SSL", ssl_context=build_ssl_context())
    with pytest.raises(AuthenticationError, match="TLS"):
        await BrokerConnection.open(host, port, bad)


async def test_idle_connection_closes_and_reconnects(kafka):
    host, port = split_address(kafka.bootstrap.split(",")[0])
    broker = Broker(host, port, ConnectionOptions(connections_max_idle_ms=300))
    try:
        await broker.request(ApiVersionsRequest())
        deadline = time.monotonic() + 30
        while broker.connected:  # closed after 300 ms idle
            assert time.monotonic() < deadline, "the idle connection was not closed"
            await asyncio.sleep(0.05)
        await broker.request(ApiVersionsRequest())
        assert broker.connects == 2
    finally:
        await broker.close()


async def test_closed_port_fails_fast_with_reason():
    broker = Broker("127.0.0.1", 1, ConnectionOptions(socket_connection_setup_timeout_ms=2000))
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="refused") as info:
        await broker.request(ApiVersionsRequest())
    assert info.value.retriable
    assert time.monotonic() - started < 2.5
    await broker.close()


@pytest.mark.multibroker
async def test_request_timeout_then_recovery(kafka_cluster3):
    node = 3
    host, port = split_address(kafka_cluster3.brokers[node])
    broker = Broker(host, port, ConnectionOptions(request_timeout_ms=1000), node_id=node)
    try:
        await broker.request(ApiVersionsRequest())
        kafka_cluster3.pause_broker(node)
        try:
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="timed out"):
                await broker.request(_metadata("timeout-probe"))
            assert 0.9 < time.monotonic() - started < 3
        finally:
            kafka_cluster3.resume_broker(node)
        resp = await broker.request(_metadata("timeout-probe"))
        assert resp.brokers
    finally:
        await broker.close()


@pytest.mark.multibroker
async def test_killed_broker_fails_in_flight_requests_then_recovers(kafka_cluster3):
    node = 3
    host, port = split_address(kafka_cluster3.brokers[node])
    opts = replace(ConnectionOptions(), request_timeout_ms=60000, reconnect_backoff_ms=20)
    broker = Broker(host, port, opts, node_id=node)
    try:
        await broker.request(ApiVersionsRequest())
        kafka_cluster3.pause_broker(node)  # requests stay in flight
        pending = [
            asyncio.ensure_future(broker.request(_metadata(f"inflight-{i}"))) for i in range(20)
        ]
        await asyncio.sleep(0.3)
        assert not any(p.done() for p in pending)
        started = time.monotonic()
        kafka_cluster3.kill_broker(node, signal.SIGKILL)
        results = await asyncio.gather(*pending, return_exceptions=True)
        assert time.monotonic() - started < 5  # promptly, not after the 60 s timeout
        assert all(isinstance(r, KafkaConnectionError) and r.retriable for r in results)
        assert f"broker {node}" in str(results[0])
        kafka_cluster3.restart_broker(node)
        # The same handle reconnects by itself.
        deadline = time.monotonic() + 60
        while True:
            try:
                resp = await broker.request(_metadata("after-restart"))
                break
            except KafkaConnectionError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        assert resp.brokers
        assert broker.connects >= 2
    finally:
        await broker.close()


async def test_cancelled_request_keeps_the_connection_in_step(kafka):
    host, port = split_address(kafka.bootstrap.split(",")[0])
    conn = await BrokerConnection.open(host, port, ConnectionOptions())
    try:
        doomed = asyncio.ensure_future(conn.request(_metadata("cancel-me")))
        await asyncio.sleep(0)  # written, not yet answered
        doomed.cancel()
        later = await asyncio.gather(*(conn.request(_metadata(f"after-{i}")) for i in range(5)))
        assert [r.topics[0].name for r in later] == [f"after-{i}" for i in range(5)]
        assert not conn.closed
    finally:
        conn.close()


async def test_acks0_produce_expects_no_response(kafka, topic):
    from kpax.proto.messages import ProduceRequest
    from kpax.proto.records import Record, encode_batch

    name = topic(1)
    host, port = split_address(kafka.bootstrap.split(",")[0])
    conn = await BrokerConnection.open(host, port, ConnectionOptions())
    try:
        version = conn.pick_version(ProduceRequest, max_version=12)  # v13 addresses topics by id
        for i in range(3):
            batch = encode_batch([Record(b"v%d" % i, timestamp=1_700_000_000_000)])
            data = ProduceRequest.PartitionProduceData(index=0, records=batch)
            req = ProduceRequest(
                acks=0,
                timeout_ms=5000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=name,
                        partition_data=[data],
                    )
                ],
            )
            assert await conn.request(req, version=version, expect_response=False) is None
        # Later requests still match their answers: no response was owed for acks=0.
        resp = await conn.request(_metadata(name))
        assert resp.topics[0].name == name
        assert conn.in_flight == 0
    finally:
        conn.close()
    from kpax.admin.client import AsyncAdmin
    from kpax.structs import TopicPartition

    async with AsyncAdmin(kafka.bootstrap) as admin:
        for _ in range(50):
            latest = (await admin.list_offsets({TopicPartition(name, 0): "latest"}))[
                TopicPartition(name, 0)
            ]
            if latest.offset == 3:
                break
            await asyncio.sleep(0.1)
        assert latest.offset == 3
