"""SASL OAUTHBEARER and KIP-368 re-authentication against a broker configured for them."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

import kpax
from kpax.broker import Broker, BrokerConnection, ConnectionOptions
from kpax.cluster import split_address
from kpax.proto.errors import AuthenticationError
from kpax.proto.messages import MetadataRequest

pytestmark = pytest.mark.integration

_OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin";'
)


@pytest.fixture(scope="module")
def sasl_broker(kafka_factory):
    return kafka_factory(
        sasl=True,
        config={
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": _OAUTH_JAAS,
            "connections.max.reauth.ms": "3000",
        },
    )


def _b64(obj: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured_token(subject: str, lifetime_s: int = 3600) -> str:
    """An unsigned JWT, as Kafka's default (test-only) OAUTHBEARER validator accepts."""
    now = int(time.time())
    return f"{_b64({'alg': 'none'})}.{_b64({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=[], allow_auto_topic_creation=False)


async def test_oauthbearer_with_sync_and_async_token_providers(sasl_broker):
    host, port = split_address(sasl_broker.listener("SASL_PLAINTEXT").split(",")[0])

    async def async_provider() -> str:
        return unsecured_token("alice")

    for provider in (lambda: unsecured_token("alice"), async_provider):
        opts = ConnectionOptions(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_token_provider=provider,
        )
        conn = await BrokerConnection.open(host, port, opts)
        try:
            assert (await conn.request(_metadata())).brokers
        finally:
            conn.close()


async def test_oauthbearer_rejects_an_expired_token(sasl_broker):
    host, port = split_address(sasl_broker.listener("SASL_PLAINTEXT").split(",")[0])
    opts = ConnectionOptions(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_token_provider=lambda: unsecured_token("alice", lifetime_s=-60),
    )
    with pytest.raises(AuthenticationError, match="OAUTHBEARER"):
        await BrokerConnection.open(host, port, opts)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"])
async def test_reauthentication_keeps_the_connection(sasl_broker, mechanism):
    """The broker limits sessions to 3 s (connections.max.reauth.ms); kpax
    re-authenticates before that on the same socket, between requests."""
    host, port = split_address(sasl_broker.listener("SASL_PLAINTEXT").split(",")[0])
    user, password = next(iter(sasl_broker.sasl_users.items()))
    opts = ConnectionOptions(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username=user,
        sasl_password=password,
        sasl_token_provider=lambda: unsecured_token(user),
    )
    broker = Broker(host, port, opts)
    try:
        conn = await broker.connection()
        deadline = time.monotonic() + 60
        while conn.authentications < 3:  # requests keep flowing across re-authentications
            assert time.monotonic() < deadline, f"{conn.authentications} authentications"
            assert (await broker.request(_metadata())).brokers
            await asyncio.sleep(0.2)
        assert await broker.connection() is conn
        assert broker.connects == 1
    finally:
        await broker.close()


def test_admin_over_oauthbearer(sasl_broker):
    with kpax.Admin(
        sasl_broker.listener("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=lambda: unsecured_token("admin"),
    ) as admin:
        assert admin.describe_cluster().brokers


def _kafka_python_provider_class() -> type:
    try:  # kafka-python 3
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:  # kafka-python 2
        from kafka.sasl.oauth import AbstractTokenProvider
    return AbstractTokenProvider


def test_kafka_python_and_aiokafka_token_providers_are_accepted(sasl_broker):
    """kafka-python's provider (sync ``token()``) and aiokafka's (async
    ``token()``, ``extensions()``) work as they are, in both faces."""
    from aiokafka.abc import AbstractTokenProvider as AioProvider

    class KafkaPythonStyle(_kafka_python_provider_class()):
        def token(self) -> str:
            return unsecured_token("admin")

    class AiokafkaStyle(AioProvider):
        async def token(self) -> str:
            await asyncio.sleep(0)
            return unsecured_token("admin")

        def extensions(self) -> dict[str, str]:
            return {"traceId": "abc"}

    conf = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "default_api_timeout_ms": 10000,
    }
    bootstrap = sasl_broker.listener("SASL_PLAINTEXT")
    for provider in (KafkaPythonStyle(), AiokafkaStyle()):
        with kpax.Admin(bootstrap, sasl_oauth_token_provider=provider, **conf) as admin:
            assert admin.describe_cluster().brokers

        async def main(provider: object = provider) -> None:
            async with kpax.aio.Admin(
                bootstrap, sasl_oauth_token_provider=provider, **conf
            ) as admin:
                assert (await admin.describe_cluster()).brokers

        asyncio.run(main())


def test_a_token_provider_of_another_shape_is_refused_at_construction():
    class NoToken:
        pass

    for bad in ("a-token-string", NoToken(), 5):
        with pytest.raises(kpax.ConfigError, match=r"sasl_oauth_token_provider=\[hidden\]") as info:
            kpax.aio.Admin(
                "127.0.0.1:1",
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="OAUTHBEARER",
                sasl_oauth_token_provider=bad,
            )
        assert "token() method" in str(info.value)
        assert "a-token-string" not in str(info.value)


async def test_a_provider_returning_no_string_fails_auth_clearly(sasl_broker):
    host, port = split_address(sasl_broker.listener("SASL_PLAINTEXT").split(",")[0])

    class BytesToken:
        def token(self) -> bytes:
            return b"not-a-str"

    opts = ConnectionOptions(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_token_provider=BytesToken(),
    )
    with pytest.raises(AuthenticationError, match=r"token\(\) returned a bytes, not a token"):
        await BrokerConnection.open(host, port, opts)
