"""Secret options print as ``[hidden]``: a resolved config, the connection
options (``vars()`` too), the admin's SCRAM upsertion, the CLI's settings and
JAAS configs, the Spark source's options, and a configuration error."""

from __future__ import annotations

import pytest

import kpax
from kpax.admin.types import ScramMechanism, UserScramCredentialUpsertion
from kpax.broker.options import ConnectionOptions
from kpax.cli.javaconf import parse_jaas
from kpax.cli.settings import Settings
from kpax.config import reveal
from kpax.spark.options import WriteOptions

SECRET = "pw-7f3a9c"


def test_a_client_config_and_its_connection_options_hide_secrets() -> None:
    provider = lambda: SECRET  # noqa: E731
    p = kpax.aio.Producer(
        sasl_plain_password=SECRET, ssl_password=SECRET, sasl_oauth_token_provider=provider
    )
    opts = p.cluster.options
    texts = [repr(p.config), str(p.config), repr(vars(p)), repr(opts), repr(vars(opts))]
    assert all(SECRET not in t for t in texts)
    assert "'sasl_plain_password': [hidden]" in repr(p.config)
    assert "sasl_password=[hidden]" in repr(opts)
    assert p.config["sasl_plain_password"] == SECRET  # the value is there to read
    assert reveal(opts.sasl_password) == SECRET and reveal(opts.sasl_token_provider) is provider
    assert ConnectionOptions(sasl_password=SECRET) == ConnectionOptions(sasl_password=SECRET)


def test_a_bad_secret_value_is_named_by_its_type_only() -> None:
    with pytest.raises(kpax.ConfigError) as info:
        kpax.aio.Consumer(sasl_plain_password=SECRET.encode())
    assert "sasl_plain_password=[hidden] (a bytes)" in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


def test_other_objects_holding_secrets() -> None:
    jaas = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="u" password="{SECRET}";'
    )
    objects = [
        UserScramCredentialUpsertion("u", ScramMechanism.SCRAM_SHA_256, SECRET),
        Settings({"sasl_plain_password": SECRET, "ssl_password": SECRET}),
        jaas,
        WriteOptions({"sasl_plain_password": SECRET}),
    ]
    for obj in objects:
        assert SECRET not in repr(obj) and "[hidden]" in repr(obj)
