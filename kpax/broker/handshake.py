"""What a connection says before it carries requests: ApiVersions and SASL.

Role: :func:`negotiate_versions` (ApiVersions, the highest version first, with
the client software name and version; falling back when the broker answers
UNSUPPORTED_VERSION or in v0) and :func:`authenticate` (SaslHandshake, then
the mechanism's SaslAuthenticate rounds; a blocking mechanism's steps run in a
worker thread), run by :class:`kpax.broker.connection.BrokerConnection` on
open and, for SASL, again before the broker's session ends (KIP-368). Once per
connection (or re-authentication): nothing here runs per request.

Imports: kpax.proto, kpax.broker.{options,sasl} (kpax.broker.connection for types),
kpax.config, kpax._version, the standard library.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from kpax._version import __version__
from kpax.broker.options import ConnectionOptions
from kpax.broker.sasl import (
    GssapiMechanism,
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
    oauth_token,
)
from kpax.config import reveal
from kpax.proto.error_codes import (
    IllegalSaslStateError,
    RebootstrapRequiredError,
    UnsupportedVersionError,
)
from kpax.proto.errors import (
    AuthenticationError,
    BrokerIdentityError,
    KafkaError,
    ProtocolError,
    error_for_code,
)
from kpax.proto.header import decode_response
from kpax.proto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

if TYPE_CHECKING:
    from kpax.broker.connection import BrokerConnection

__all__ = [
    "api_versions_decoder",
    "authenticate",
    "make_mechanism",
    "negotiate_versions",
    "sasl_step",
]


async def negotiate_versions(conn: BrokerConnection, cluster_id: str | None = None) -> None:
    """ApiVersions, the highest version first (falling back when the broker
    answers UNSUPPORTED_VERSION or in v0): fills ``conn.api_versions`` and
    ``conn.finalized_features``; REBOOTSTRAP_REQUIRED (KIP-1242: the address now
    serves another node or cluster) is a BrokerIdentityError."""
    version = ApiVersionsRequest.MAX_VERSION
    # KIP-1242: both or neither (a bootstrap address has no node id yet).
    node_id = conn.node_id if conn.node_id is not None and conn.node_id >= 0 else -1
    if cluster_id is None or node_id < 0:
        cluster_id, node_id = None, -1
    for _ in range(3):
        request = ApiVersionsRequest(
            client_software_name="kpax",
            client_software_version=__version__,
            cluster_id=cluster_id,
            node_id=node_id,
        )
        try:
            resp: ApiVersionsResponse = await conn.submit(
                request, version=version, decode=api_versions_decoder(version)
            )
        except ProtocolError:
            if version == 0 or conn.closed:
                raise  # a broken stream, not a version it failed to parse
            # A broker that does not know our version answers in v0 format.
            version = 0
            continue
        if resp.error_code and issubclass(error_for_code(resp.error_code), UnsupportedVersionError):
            ranges = {k.api_key: k.max_version for k in resp.api_keys}
            broker_max = ranges.get(ApiVersionsRequest.API_KEY, 0)
            version = min(broker_max, ApiVersionsRequest.MAX_VERSION)
            continue
        if resp.error_code and issubclass(
            error_for_code(resp.error_code), RebootstrapRequiredError
        ):
            raise BrokerIdentityError(
                f"{conn.describe()} is not node {node_id} of cluster {cluster_id} any more "
                "(it answered ApiVersions with REBOOTSTRAP_REQUIRED): the metadata is "
                "stale, rebootstrap from the bootstrap addresses"
            )
        if resp.error_code:
            err = error_for_code(resp.error_code)
            raise err(f"ApiVersions on {conn.describe()}")
        conn.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        conn.finalized_features = {
            f.name: f.max_version_level for f in resp.finalized_features or ()
        }
        return
    raise ProtocolError(f"{conn.describe()} did not complete ApiVersions negotiation")


def _mechanism(opts: ConnectionOptions, host: str, broker: str) -> SaslMechanism:
    name = opts.sasl_mechanism
    if name == "PLAIN":
        return PlainMechanism(opts.sasl_username or "", reveal(opts.sasl_password) or "")
    if name.startswith("SCRAM-"):
        return ScramMechanism(name, opts.sasl_username or "", reveal(opts.sasl_password) or "")
    if name == "GSSAPI":
        return GssapiMechanism(
            opts.sasl_kerberos_service_name,
            opts.sasl_kerberos_domain_name or host,
            principal=opts.sasl_kerberos_principal,
            keytab=opts.sasl_kerberos_keytab,
            broker=broker,
        )
    raise AuthenticationError(f"SASL mechanism {name} needs a token (OAUTHBEARER)")


async def make_mechanism(opts: ConnectionOptions, host: str, broker: str) -> SaslMechanism:
    """The SASL mechanism ``opts`` name, an OAUTHBEARER token fetched first."""
    provider = opts.sasl_token_provider
    if opts.sasl_mechanism == "OAUTHBEARER" and provider is not None:
        return OAuthBearerMechanism(*await oauth_token(reveal(provider)))
    return _mechanism(opts, host, broker)


async def sasl_step(mechanism: SaslMechanism, step: Callable[[], bytes | None]) -> bytes | None:
    """One step of *mechanism*; in a worker thread if it may block (GSSAPI asks the KDC)."""
    if getattr(mechanism, "blocking", False):
        return await asyncio.to_thread(step)
    return step()


async def authenticate(conn: BrokerConnection) -> int:
    """SaslHandshake then SaslAuthenticate rounds on ``conn`` (past its
    authentication gate); the session lifetime the broker gave, in ms (0: none)."""
    mechanism = await make_mechanism(conn.options, conn.host, conn.describe())
    who = getattr(mechanism, "identity", None) or conn.options.sasl_username or "(token)"
    hs = await conn.request(SaslHandshakeRequest(mechanism=mechanism.name), bypass_gate=True)
    if hs.error_code:
        if issubclass(error_for_code(hs.error_code), IllegalSaslStateError):
            # What a broker answers to SaslHandshake on a listener without SASL.
            plain = "SSL" if conn.options.uses_tls else "PLAINTEXT"
            raise AuthenticationError(
                f"{conn.describe()} refused the SASL handshake (ILLEGAL_SASL_STATE): "
                f"this listener does not expect SASL: use security_protocol={plain}"
            )
        enabled = ", ".join(hs.mechanisms) or "none"
        raise AuthenticationError(
            f"SASL mechanism {mechanism.name} is not enabled on {conn.describe()} "
            f"(enabled: {enabled})"
        )
    token = await sasl_step(mechanism, mechanism.first)
    lifetime_ms = 0
    while token is not None:
        resp = await conn.request(SaslAuthenticateRequest(auth_bytes=token), bypass_gate=True)
        if resp.error_code:
            detail = resp.error_message or error_for_code(resp.error_code).name
            raise AuthenticationError(
                f"SASL {mechanism.name} authentication as {who!r} failed on "
                f"{conn.describe()}: {detail}"
            )
        lifetime_ms = getattr(resp, "session_lifetime_ms", 0) or 0
        server_token = bytes(resp.auth_bytes or b"")
        token = await sasl_step(mechanism, partial(mechanism.respond, server_token))
    return lifetime_ms


def api_versions_decoder(version: int) -> Callable[[bytes | bytearray], ApiVersionsResponse]:
    """Decode an ApiVersions answer to a ``version`` request. A broker that does not
    know ``version`` answers in v0 instead (KIP-511: UNSUPPORTED_VERSION with the
    versions it has), so a body that does not parse at ``version`` is read as v0."""

    def decode(frame: bytes | bytearray) -> ApiVersionsResponse:
        try:
            return decode_response(frame, ApiVersionsRequest.API_KEY, version)[1]  # type: ignore[return-value]
        except KafkaError as exc:
            first = exc
        v0: ApiVersionsResponse | None = None
        if version > 0:
            with contextlib.suppress(KafkaError):
                v0 = decode_response(frame, ApiVersionsRequest.API_KEY, 0)[1]  # type: ignore[assignment]
        if v0 is None or not v0.error_code:
            raise first
        return v0

    return decode
