"""Secrets are never printed: a client's life with every secret option, against
a real broker's SASL and SSL listeners, leaves no password, key password or
OAUTHBEARER token in any repr, ``vars()``, error message or log line (at DEBUG),
nor in the ``kpax`` command's output.

The secrets: ``sasl_plain_password`` (PLAIN and SCRAM, right and wrong, and a
bytes one), ``ssl_password`` (the key password of a client certificate, right
and wrong), ``sasl_oauth_token_provider`` (a token that authenticates and one
that is refused), in both faces and the CLI (flags, ``-X``, a Java
properties file with ``sasl.jaas.config``, ``--debug``)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

import kpax
from kpax.errors import KafkaError
from tests.integration.test_cli import cli_env, run_kpax

pytestmark = pytest.mark.integration

_OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin";'
)
#: The key password of the client certificate made below.
KEY_PASSWORD = "key-pass-4b1d7c"
WRONG_PASSWORD = "wrong-pass-93e0aa"
BYTES_PASSWORD = b"bytes-pass-0c5e21"


@pytest.fixture(scope="module")
def broker(kafka_factory):
    """PLAINTEXT, SASL_PLAINTEXT (PLAIN, SCRAM, OAUTHBEARER) and SSL."""
    return kafka_factory(
        sasl=True,
        ssl=True,
        config={
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": _OAUTH_JAAS,
        },
    )


def _b64(obj: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def _token(subject: str, lifetime_s: int) -> str:
    now = int(time.time())
    claims = {"sub": subject, "iat": now, "exp": now + lifetime_s, "jti": "secret-jti-5d2f"}
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


@pytest.fixture(scope="module")
def client_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A client certificate and its private key, encrypted with KEY_PASSWORD."""
    d = tmp_path_factory.mktemp("client-tls")
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-days", "1",
            "-subj", "/CN=kpax-client", "-keyout", "key.pem", "-out", "cert.pem",
            "-passout", f"pass:{KEY_PASSWORD}",
        ],
        cwd=d,
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(d / "cert.pem"), str(d / "key.pem")


class Sink:
    """Every text a client's life showed: reprs, ``vars()``, errors, log lines."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._seen: set[int] = set()

    def walk(self, obj: Any, depth: int = 4) -> None:
        """repr, str and ``vars()`` of ``obj`` and of the kpax objects it holds."""
        if id(obj) in self._seen or depth < 0:
            return
        self._seen.add(id(obj))
        self.texts += [repr(obj), str(obj)]
        try:
            attrs = vars(obj)
        except TypeError:
            attrs = {}
        self.texts.append(repr(attrs))
        for value in attrs.values():
            for item in _members(value):
                if type(item).__module__.startswith("kpax") and not isinstance(item, type):
                    self.walk(item, depth - 1)

    def error(self, exc: BaseException) -> None:
        self.texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]

    def expect_error(self, fn: Any) -> BaseException:
        try:
            result = fn()
        except KafkaError as exc:
            self.error(exc)
            return exc
        raise AssertionError(f"no error: {result!r}")

    def check(self, *secrets: str) -> None:
        text = "\n".join(self.texts)
        assert text  # (something was captured)
        for secret in secrets:
            assert secret not in text, f"{secret!r} printed:\n" + next(
                t for t in self.texts if secret in t
            )


def _members(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        yield from value
    else:
        yield value


class TokenProvider:
    """kafka-python's / aiokafka's provider shape: ``token()``."""

    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


def test_no_secret_is_printed_in_a_clients_life(broker, client_cert, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    user, password = next(iter(broker.sasl_users.items()))
    good_token, expired_token = _token("admin", 3600), _token("admin", -60)
    sasl = broker.listener("SASL_PLAINTEXT")
    certfile, keyfile = client_cert
    sink = Sink()
    topic = f"secrets-{time.time_ns()}"

    def sasl_conf(mechanism: str, pw: Any = password) -> dict[str, Any]:
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": pw,
        }

    tls = {
        "security_protocol": "SSL",
        "ssl_cafile": broker.ssl_cafile,
        "ssl_certfile": certfile,
        "ssl_keyfile": keyfile,
        "ssl_password": KEY_PASSWORD,
    }
    oauth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}
    fast = {"default_api_timeout_ms": 5000, "reconnect_backoff_max_ms": 100}

    # a life with each secret: construct, use, close
    with kpax.Producer(sasl, **sasl_conf("PLAIN")) as p:
        p.send(topic, b"v").result(30)
        sink.walk(p)
    with kpax.Admin(sasl, **sasl_conf("SCRAM-SHA-512"), **fast) as admin:
        assert admin.describe_cluster().brokers
        sink.walk(admin)
    with kpax.Consumer(
        broker.listener("SSL"), **tls, auto_offset_reset="earliest", **fast
    ) as consumer:
        consumer.assign([kpax.TopicPartition(topic, 0)])
        assert consumer.position(kpax.TopicPartition(topic, 0)) == 0
        sink.walk(consumer)
    with kpax.Admin(
        sasl, **oauth, sasl_oauth_token_provider=TokenProvider(good_token), **fast
    ) as admin:
        assert admin.describe_cluster().brokers
        sink.walk(admin)

    async def aio_life() -> None:
        async with kpax.aio.Producer(sasl, **sasl_conf("SCRAM-SHA-256")) as p:
            await p.send_and_wait(topic, b"aio")
            sink.walk(p)
        async with kpax.aio.ShareConsumer(
            sasl, group_id="secrets", **oauth, sasl_oauth_token_provider=lambda: good_token
        ) as share:
            sink.walk(share)

    asyncio.run(aio_life())

    # failures: a wrong password, a wrong key password, an expired token, a bytes password
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        sink.expect_error(lambda m=mechanism: kpax.Admin(sasl, **sasl_conf(m, WRONG_PASSWORD)))
    sink.expect_error(
        lambda: kpax.Producer(broker.listener("SSL"), **{**tls, "ssl_password": WRONG_PASSWORD})
    )
    sink.expect_error(
        lambda: kpax.Admin(sasl, **oauth, sasl_oauth_token_provider=TokenProvider(expired_token))
    )
    sink.expect_error(lambda: kpax.Producer(sasl, **sasl_conf("PLAIN", BYTES_PASSWORD)))
    sink.expect_error(lambda: kpax.aio.Consumer(sasl, **sasl_conf("PLAIN", BYTES_PASSWORD)))
    unstarted = kpax.aio.Admin(sasl, **sasl_conf("PLAIN"), ssl_password=KEY_PASSWORD)
    sink.walk(unstarted)

    # the kpax command: flags, -X, a Java properties file with sasl.jaas.config
    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers={sasl}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{WRONG_PASSWORD}";\n'
    )
    env = cli_env(None)
    runs = [
        run_kpax(
            None, "--debug", "--config", str(props), "topics", "list", "--timeout", "5", env=env
        ),
        run_kpax(
            None, "--debug", "-b", sasl, "--security-protocol", "SASL_PLAINTEXT",
            "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user,
            "--sasl-password", WRONG_PASSWORD, "topics", "list", "--timeout", "5", env=env,
        ),
        run_kpax(
            None, "--debug", "-b", broker.listener("SSL"), "--security-protocol", "SSL",
            "--ssl-cafile", broker.ssl_cafile, "--ssl-certfile", certfile,
            "--ssl-keyfile", keyfile, "-X", f"ssl.key.password={WRONG_PASSWORD}",
            "topics", "list", "--timeout", "5", env=env,
        ),
        run_kpax(
            None, "-b", sasl, "--security-protocol", "SASL_PLAINTEXT",
            "--sasl-mechanism", "PLAIN", "--sasl-username", user, "topics", "list",
            "--timeout", "5", env={**env, "KPAX_SASL_PASSWORD": WRONG_PASSWORD},
        ),
    ]  # fmt: skip
    for r in runs:
        assert r.rc != 0, r.err  # each fails (wrong credentials)
        sink.texts += [r.text, r.err]

    for record in caplog.records:
        sink.texts.append(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            sink.error(record.exc_info[1])
    sink.texts.append(caplog.text)
    sink.check(
        password,
        WRONG_PASSWORD,
        BYTES_PASSWORD.decode(),
        KEY_PASSWORD,
        good_token,
        expired_token,
        good_token.split(".")[1],  # the claims
        "secret-jti-5d2f",
    )
