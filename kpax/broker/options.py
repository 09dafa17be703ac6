"""Connection options shared by every client: timeouts, backoff, TLS and SASL settings.

Role: the part of a client's configuration that the broker layer needs, as one
frozen object built once per client (:func:`connection_options`), plus the
option table (Java names, snake_case, Java defaults) that the producer,
consumer and admin faces merge into theirs.

Imports: kpax.config, kpax.metrics, kpax.broker.tls, kpax.broker.sasl, kpax.proto.errors.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from kpax.broker.sasl import SUPPORTED_MECHANISMS, import_gssapi
from kpax.broker.tls import build_ssl_context
from kpax.config import (
    Option,
    OptionTable,
    Secret,
    boolean,
    bootstrap_list,
    hide,
    non_negative_int,
    one_of,
    option_table,
    optional_str,
    positive_int,
)
from kpax.metrics import ConnectionMetrics
from kpax.proto.errors import ConfigError

#: ``sasl_oauth_token_provider``: a function (or coroutine function) returning a
#: token, or an object with a ``token()`` method, sync or async, and optionally
#: ``extensions()`` (kafka-python's and aiokafka's ``AbstractTokenProvider``).
TokenProvider = Any


def token_provider(value: Any) -> Any:
    """The check of ``sasl_oauth_token_provider`` (see :data:`TokenProvider`)."""
    if callable(getattr(value, "token", None)) or callable(value):
        return value
    raise TypeError(
        "must be a function returning an OAUTHBEARER token (a str, or an awaitable of one), "
        "or an object with a token() method (kafka-python's or aiokafka's "
        "AbstractTokenProvider)"
    )


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _service_name(value: Any) -> str:
    if not isinstance(value, str) or not value or "@" in value or "/" in value:
        raise ValueError("must be a service name such as 'kafka' (no '/' or '@')")
    return value


class ConnectionConfig(TypedDict, total=False):
    """The options every client accepts (each client's config TypedDict derives
    from it): one declaration per option -- its name, its type for users' type
    checkers, its default, check and doc (:func:`kpax.config.option_table`)."""

    bootstrap_servers: Annotated[str | Sequence[str], Option("localhost:9092", bootstrap_list)]
    client_id: Annotated[str | None, Option("kpax", optional_str)]
    request_timeout_ms: Annotated[int, Option(30000, positive_int)]
    socket_connection_setup_timeout_ms: Annotated[int, Option(10000, positive_int)]
    connections_max_idle_ms: Annotated[int, Option(540000, positive_int)]
    reconnect_backoff_ms: Annotated[int, Option(50, non_negative_int)]
    reconnect_backoff_max_ms: Annotated[int, Option(1000, non_negative_int)]
    retry_backoff_ms: Annotated[int, Option(100, non_negative_int)]
    retry_backoff_max_ms: Annotated[int, Option(1000, non_negative_int)]
    metadata_max_age_ms: Annotated[int, Option(300000, positive_int)]
    metadata_recovery_strategy: Annotated[str, Option("rebootstrap", one_of("rebootstrap", "none"))]
    security_protocol: Annotated[
        str,
        Option("PLAINTEXT", one_of(*[p.lower() for p in SECURITY_PROTOCOLS])),
    ]
    ssl_context: Annotated[ssl.SSLContext | None, Option(None)]
    ssl_cafile: Annotated[str | None, Option(None, optional_str)]
    ssl_certfile: Annotated[str | None, Option(None, optional_str)]
    ssl_keyfile: Annotated[str | None, Option(None, optional_str)]
    ssl_password: Annotated[str | None, Option(None, optional_str)]
    ssl_check_hostname: Annotated[bool, Option(True, boolean)]
    ssl_verify: Annotated[bool, Option(True, boolean)]
    sasl_mechanism: Annotated[
        str,
        Option("PLAIN", one_of(*[m.lower() for m in SUPPORTED_MECHANISMS])),
    ]
    sasl_plain_username: Annotated[str | None, Option(None, optional_str)]
    sasl_plain_password: Annotated[str | None, Option(None, optional_str)]
    sasl_oauth_token_provider: Annotated[TokenProvider | None, Option(None, token_provider)]
    sasl_kerberos_service_name: Annotated[
        str,
        Option(
            "kafka",
            _service_name,
            "GSSAPI: the service part of the brokers' Kerberos principal "
            "(`kafka` for `kafka/host@REALM`)",
        ),
    ]
    sasl_kerberos_domain_name: Annotated[
        str | None,
        Option(
            None,
            optional_str,
            "GSSAPI: the host part of the brokers' principal; None: the host kpax connects to",
        ),
    ]
    sasl_kerberos_principal: Annotated[
        str | None,
        Option(
            None,
            optional_str,
            "GSSAPI, kpax and librdkafka only: this client's principal (`app@REALM`); "
            "None: the keytab's first one, or the default credentials' (`kinit`)",
        ),
    ]
    sasl_kerberos_keytab: Annotated[
        str | None,
        Option(
            None,
            optional_str,
            "GSSAPI, kpax and librdkafka only: keytab file to get this client's tickets from "
            "(kept in memory, renewed from it); None: the default credentials (`kinit`, "
            "`KRB5CCNAME`, `KRB5_CLIENT_KTNAME`)",
        ),
    ]
    connection_max_in_flight: Annotated[int, Option(1024, positive_int)]


#: The options every client accepts (merged into each client's own table).
COMMON_OPTIONS: OptionTable = option_table(ConnectionConfig)


@dataclass(frozen=True)
class ConnectionOptions:
    """What one broker connection needs to know. The password and the token
    provider are kept as :class:`~kpax.config.Secret` (given plain, they are
    wrapped): ``[hidden]`` in reprs and ``vars()``."""

    client_id: str = "kpax"
    request_timeout_ms: int = 30000
    socket_connection_setup_timeout_ms: int = 10000
    connections_max_idle_ms: int = 540000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    max_in_flight: int = 1024
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: Secret | str | None = None
    sasl_token_provider: Secret | TokenProvider | None = None
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    sasl_kerberos_principal: str | None = None
    sasl_kerberos_keytab: str | None = None
    #: Largest response frame accepted (a larger size prefix is a protocol error).
    max_response_size: int = 512 * 1024 * 1024
    #: The client's connection metrics (kpax.metrics); None: not counted.
    metrics: ConnectionMetrics | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sasl_password", hide(self.sasl_password))
        object.__setattr__(self, "sasl_token_provider", hide(self.sasl_token_provider))

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def connection_options(
    config: Mapping[str, Any], metrics: ConnectionMetrics | None = None
) -> ConnectionOptions:
    """Build :class:`ConnectionOptions` from a resolved client configuration
    (``metrics``: where its connections count requests, bytes and latency)."""
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    ctx: ssl.SSLContext | None = None
    if protocol in ("SSL", "SASL_SSL"):
        ctx = build_ssl_context(
            cafile=config.get("ssl_cafile"),
            certfile=config.get("ssl_certfile"),
            keyfile=config.get("ssl_keyfile"),
            password=config.get("ssl_password"),
            check_hostname=bool(config.get("ssl_check_hostname", True)),
            verify=bool(config.get("ssl_verify", True)),
            context=config.get("ssl_context"),
        )
    mechanism = str(config.get("sasl_mechanism") or "PLAIN").upper()
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        if mechanism == "OAUTHBEARER":
            if config.get("sasl_oauth_token_provider") is None:
                raise ConfigError("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider")
        elif mechanism == "GSSAPI":
            import_gssapi()  # ConfigError naming the extra when it is not installed
            keytab = config.get("sasl_kerberos_keytab")
            if keytab is not None and not os.path.isfile(keytab):
                raise ConfigError(f"sasl_kerberos_keytab {keytab!r}: no such file")
        elif not config.get("sasl_plain_username") or config.get("sasl_plain_password") is None:
            raise ConfigError(
                f"sasl_mechanism {mechanism} needs sasl_plain_username and sasl_plain_password"
            )
    return ConnectionOptions(
        client_id=config.get("client_id") or "kpax",
        request_timeout_ms=int(config.get("request_timeout_ms", 30000)),
        socket_connection_setup_timeout_ms=int(
            config.get("socket_connection_setup_timeout_ms", 10000)
        ),
        connections_max_idle_ms=int(config.get("connections_max_idle_ms", 540000)),
        reconnect_backoff_ms=int(config.get("reconnect_backoff_ms", 50)),
        reconnect_backoff_max_ms=int(config.get("reconnect_backoff_max_ms", 1000)),
        max_in_flight=int(config.get("connection_max_in_flight", 1024)),
        security_protocol=protocol,
        ssl_context=ctx,
        sasl_mechanism=mechanism,
        sasl_username=config.get("sasl_plain_username"),
        sasl_password=config.get("sasl_plain_password"),
        sasl_token_provider=config.get("sasl_oauth_token_provider"),
        sasl_kerberos_service_name=str(config.get("sasl_kerberos_service_name") or "kafka"),
        sasl_kerberos_domain_name=config.get("sasl_kerberos_domain_name"),
        sasl_kerberos_principal=config.get("sasl_kerberos_principal"),
        sasl_kerberos_keytab=config.get("sasl_kerberos_keytab"),
        metrics=metrics,
    )
