"""SASL GSSAPI (Kerberos) against a broker of a realm the test makes: a KDC of MIT
Kerberos under a temporary directory (kpax.testing.kerberos), a local broker whose
SASL_PLAINTEXT listener accepts GSSAPI as ``kafka/localhost``.

Needs MIT Kerberos' KDC programs (``make krb5``) and the ``gssapi`` package (the
``kpax[gssapi]`` extra; ``make test`` installs both): without them these tests fail,
saying what is missing. The `kpax` command takes the Kerberos settings of a Java
client's properties file (Krb5LoginModule's keytab and principal).
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kpax
from kpax.broker.sasl import import_gssapi
from kpax.proto.errors import AuthenticationError
from kpax.testing.backends import select_backend
from kpax.testing.kerberos import KerberosRealm
from kpax.testing.local import LocalCluster
from tests.wait import eventually

pytestmark = pytest.mark.integration

RECORDS = 50


@pytest.fixture(scope="module")
def realm() -> Iterator[KerberosRealm]:
    import_gssapi()  # a ConfigError naming kpax[gssapi] before anything starts
    with pytest.MonkeyPatch.context() as mp, KerberosRealm() as started:
        for name, value in started.client_env().items():
            mp.setenv(name, value)
        yield started


@pytest.fixture(scope="module")
def broker(realm: KerberosRealm) -> Iterator[LocalCluster]:
    if select_backend() == "existing":
        pytest.skip("needs a broker of its own; KPAX_TEST_BOOTSTRAP points at a shared cluster")
    with LocalCluster(1, kerberos=realm).start() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client_keytab(realm: KerberosRealm) -> Path:
    return realm.add_principal("kpax-client")


def gss(realm: KerberosRealm, keytab: Path | None, **extra: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        # the broker's principal is kafka/localhost; it advertises 127.0.0.1
        "sasl_kerberos_domain_name": "localhost",
    }
    if keytab is not None:
        options["sasl_kerberos_principal"] = realm.principal("kpax-client")
        options["sasl_kerberos_keytab"] = str(keytab)
    return {**options, **extra}


def _topic(broker: LocalCluster, options: dict[str, Any]) -> str:
    name = f"krb-{uuid.uuid4().hex[:10]}"
    with kpax.Admin(broker.listener("SASL_PLAINTEXT"), **options) as admin:
        admin.create_topics([kpax.NewTopic(name, num_partitions=1, replication_factor=1)])
        eventually(lambda: admin.describe_topics([name])[name].partitions[0].leader >= 0)
    return name


def _authenticated(broker: LocalCluster, principal: str) -> bool:
    return f"authenticationID={principal};" in broker.log_tail(None, 5000)


def test_sync_produce_and_consume_with_a_keytab(
    broker: LocalCluster, realm: KerberosRealm, client_keytab: Path
) -> None:
    options = gss(realm, client_keytab)
    topic = _topic(broker, options)
    values = [b"gss-%d" % i for i in range(RECORDS)]
    with kpax.Producer(broker.listener("SASL_PLAINTEXT"), **options) as producer:
        for value in values:
            producer.send(topic, value)
        producer.flush(timeout=30)
    got: list[bytes] = []
    with kpax.Consumer(
        broker.listener("SASL_PLAINTEXT"), auto_offset_reset="earliest", **options
    ) as consumer:
        consumer.assign([kpax.TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout=1.0)]
    assert got == values
    assert _authenticated(broker, realm.principal("kpax-client"))


async def test_asyncio_produce_and_consume_with_the_default_credentials(
    broker: LocalCluster,
    realm: KerberosRealm,
    client_keytab: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No keytab option: the default credentials, as after `kinit` (here MIT's
    # client keytab variable, with a private in-memory cache).
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", str(client_keytab))
    monkeypatch.setenv("KRB5CCNAME", f"MEMORY:kpax-test-{uuid.uuid4().hex[:8]}")
    options = gss(realm, None)
    topic = _topic(broker, options)
    bootstrap = broker.listener("SASL_PLAINTEXT")
    async with kpax.aio.Producer(bootstrap, **options) as producer:
        for i in range(RECORDS):
            await producer.send(topic, b"aio-%d" % i)
        await producer.flush()
    got: list[bytes] = []
    async with kpax.aio.Consumer(bootstrap, auto_offset_reset="earliest", **options) as consumer:
        assigned = consumer.assign([kpax.TopicPartition(topic, 0)])
        if inspect.isawaitable(assigned):  # (a coroutine before issue 28's item 1)
            await assigned
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            got += [r.value for r in await consumer.poll(timeout=1.0)]
    assert got == [b"aio-%d" % i for i in range(RECORDS)]


def test_a_stale_keytab_is_an_authentication_error_in_bounded_time(
    broker: LocalCluster, realm: KerberosRealm
) -> None:
    keytab = realm.add_principal("kpax-stale")
    realm.rekey("kpax-stale")  # the keytab's key is not the KDC's any more
    options = gss(realm, keytab, sasl_kerberos_principal=realm.principal("kpax-stale"))
    started = time.monotonic()
    with (
        pytest.raises(AuthenticationError) as caught,
        kpax.Producer(broker.listener("SASL_PLAINTEXT"), **options) as producer,
    ):
        producer.send("krb-stale", b"x").result(timeout=60)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "GSSAPI" in message and "kpax-stale@KPAX.TEST" in message, message
    assert "kafka@localhost" in message, message
    assert elapsed < 15, f"the authentication error took {elapsed:.1f}s"
    assert not _authenticated(broker, realm.principal("kpax-stale"))


async def test_an_unknown_service_principal_is_named(
    broker: LocalCluster, realm: KerberosRealm, client_keytab: Path
) -> None:
    options = gss(realm, client_keytab, sasl_kerberos_service_name="nosuch")
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match=r"nosuch@localhost") as caught:
        async with kpax.aio.Admin(broker.listener("SASL_PLAINTEXT"), **options) as admin:
            await admin.describe_cluster()
    assert "sasl_kerberos_service_name" in str(caught.value)
    assert time.monotonic() - started < 15


def test_the_kpax_command_takes_a_java_client_kerberos_config(
    broker: LocalCluster, realm: KerberosRealm, client_keytab: Path, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.kerberos.service.name=kafka\n"
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \\\n"
        f'  useKeyTab=true storeKey=true keyTab="{client_keytab}" '
        f'principal="{realm.principal("kpax-client")}";\n',
        encoding="utf-8",
    )
    bootstrap = broker.listener("SASL_PLAINTEXT")
    options = ["--config", str(config), "-X", "sasl.kerberos.domain.name=localhost"]
    run = subprocess.run(
        [sys.executable, "-m", "kpax.cli", "meta", "-b", bootstrap, *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "brokers:" in run.stdout
