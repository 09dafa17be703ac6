"""SASL mechanisms as small state machines: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER, GSSAPI.

Role: turn credentials into the token exchange that SaslAuthenticate carries.
Each mechanism answers ``first()`` with the client's opening token and
``respond(server_token)`` with the next token, or ``None`` once the exchange is
complete; a failed server check raises :class:`AuthenticationError` naming the
mechanism. The connection (:mod:`kpax.broker.connection`) does the I/O.
:func:`oauth_token` asks an OAUTHBEARER token provider for its token (kpax's
function form, or kafka-python's and aiokafka's ``token()`` objects). No
message here holds a password or a token.

PLAIN, SCRAM and OAUTHBEARER are sans-I/O. GSSAPI (Kerberos V5, RFC 4752) hands
the tokens to the ``gssapi`` package (the ``kpax[gssapi]`` extra, MIT Kerberos or
Heimdal underneath), which may ask the KDC for tickets: its steps may block, so
it says ``blocking = True`` and the connection runs them in a worker thread.

Imports: kpax.proto.errors, the standard library; gssapi (optional, on first use).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import os
import re
import secrets
from typing import Any, Protocol

from kpax.proto.errors import AuthenticationError, ConfigError

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class SaslMechanism(Protocol):
    name: str

    def first(self) -> bytes: ...

    def respond(self, server_token: bytes) -> bytes | None: ...


class PlainMechanism:
    """RFC 4616: one message ``authzid NUL user NUL password``; nothing follows."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._token

    def respond(self, server_token: bytes) -> bytes | None:
        return None


def _scram_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramMechanism:
    """RFC 5802 / RFC 7677 SCRAM with SHA-256 or SHA-512 (Kafka's two SCRAM mechanisms)."""

    def __init__(
        self, name: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        if name not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"unknown SCRAM mechanism {name!r}")
        self.name = name
        self._hash = hashlib.sha256 if name.endswith("256") else hashlib.sha512
        self._hash_name = "sha256" if name.endswith("256") else "sha512"
        self._password = password.encode()
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self._first_bare = f"n={_scram_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._step = 0

    def first(self) -> bytes:
        self._step = 1
        return ("n,," + self._first_bare).encode()

    def _fail(self, why: str) -> AuthenticationError:
        return AuthenticationError(f"SASL {self.name} authentication failed: {why}")

    def respond(self, server_token: bytes) -> bytes | None:
        if self._step == 1:
            self._step = 2
            return self._client_final(server_token)
        if self._step == 2:
            self._step = 3
            self._verify_server_final(server_token)
            return None
        raise self._fail("unexpected extra server message")

    def _client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode(errors="replace")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if "e" in attrs:
            raise self._fail(f"server error {attrs['e']!r}")
        nonce, salt_b64, iterations = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if not nonce or not salt_b64 or not iterations or not iterations.isdigit():
            raise self._fail(f"malformed server-first message {text!r}")
        if not nonce.startswith(self._nonce):
            raise self._fail("server nonce does not extend the client nonce")
        rounds = int(iterations)
        if rounds < 4096:
            raise self._fail(f"iteration count {rounds} below the minimum 4096")
        salt = base64.b64decode(salt_b64)
        salted = hashlib.pbkdf2_hmac(self._hash_name, self._password, salt, rounds)
        client_key = hmac.digest(salted, b"Client Key", self._hash_name)
        stored_key = self._hash(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash_name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash_name)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash_name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode(errors="replace")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if "e" in attrs:
            raise self._fail(f"server error {attrs['e']!r}")
        got = base64.b64decode(attrs.get("v", ""))
        if self._server_signature is None or not hmac.compare_digest(got, self._server_signature):
            raise self._fail("server signature does not verify (is this the real broker?)")


async def oauth_token(provider: Any) -> tuple[str, dict[str, str]]:
    """The token and SASL extensions of an OAUTHBEARER ``provider``: a function
    (or coroutine function) returning the token, or an object with a
    ``token()`` method, sync or async, and optionally ``extensions()`` (a dict,
    or an awaitable of one): kafka-python's and aiokafka's AbstractTokenProvider."""
    method = getattr(provider, "token", None)
    get = method if callable(method) else provider
    what = "sasl_oauth_token_provider" + (".token()" if get is method else "()")
    try:
        token = get()
        if inspect.isawaitable(token):
            token = await token
    except Exception as exc:
        raise AuthenticationError(
            f"OAUTHBEARER: {what} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(token, str) or not token:
        raise AuthenticationError(
            f"OAUTHBEARER: {what} returned a {type(token).__name__}, not a token string"
        )
    extensions: Any = {}
    ext = getattr(provider, "extensions", None)
    if get is method and callable(ext):
        extensions = ext()
        if inspect.isawaitable(extensions):
            extensions = await extensions
        if not isinstance(extensions, dict):
            raise AuthenticationError(
                "OAUTHBEARER: sasl_oauth_token_provider.extensions() returned a "
                f"{type(extensions).__name__}, not a dict"
            )
    return token, {str(k): str(v) for k, v in (extensions or {}).items()}


class OAuthBearerMechanism:
    """RFC 7628 client response ``n,,\\x01auth=Bearer <token>[\\x01k=v...]\\x01\\x01``."""

    name = "OAUTHBEARER"

    def __init__(self, token: str, extensions: dict[str, str] | None = None) -> None:
        ext = "".join(f"\x01{k}={v}" for k, v in sorted((extensions or {}).items()))
        self._token = f"n,,\x01auth=Bearer {token}{ext}\x01\x01".encode()
        self._sent = False

    def first(self) -> bytes:
        self._sent = True
        return self._token

    def respond(self, server_token: bytes) -> bytes | None:
        if server_token:
            # An error challenge: the broker sends JSON; reply with the dummy %x01
            # (RFC 7628 3.2.3) and let the broker fail the exchange.
            return b"\x01"
        return None


GSSAPI_PACKAGE_HINT = (
    "sasl_mechanism GSSAPI needs the gssapi package: pip install 'kpax[gssapi]' (on Linux "
    "it is built against MIT Kerberos: apt-get install libkrb5-dev, or dnf install krb5-devel)"
)


def import_gssapi() -> Any:
    """The ``gssapi`` module, or a :class:`ConfigError` saying how to install it."""
    try:
        import gssapi
    except (ImportError, OSError) as exc:  # OSError: the Kerberos library cannot load
        raise ConfigError(f"{GSSAPI_PACKAGE_HINT} ({exc})") from None
    return gssapi


def _gss_errors() -> tuple[type[BaseException], ...]:
    try:
        from gssapi.raw.misc import GSSError
    except (ImportError, OSError):
        return ()
    return (GSSError,)


def _gss_detail(exc: BaseException) -> str:
    """A GSSError without its numeric status codes: what the library says, major then minor."""
    text = re.sub(r"(Major|Minor) \(\d+\): ", "", str(exc)).strip()
    return text or type(exc).__name__


def keytab_ccache(principal: str | None, keytab: str) -> str:
    """The in-memory credential cache a keytab's tickets go to: one per (principal,
    keytab) in a process, so the clients that share them share their tickets."""
    key = hashlib.sha256(f"{principal or ''}\0{os.path.abspath(keytab)}".encode()).hexdigest()
    return f"MEMORY:kpax-{key[:16]}"


class GssapiMechanism:
    """RFC 4752 Kerberos V5 through GSS-API, as Kafka brokers speak it.

    The client's GSS tokens go in SaslAuthenticate frames until the security
    context is established (the broker's last token is the mutual-authentication
    reply; the client then sends an empty token). The broker then sends, wrapped,
    the security layers it offers and its largest buffer; the client answers,
    wrapped, with "no security layer" (Kafka has none: TLS is the listener's
    business), a maximum buffer of 0 (RFC 4752: no layer, no buffer) and an empty
    authorization identity (act as the authenticated principal).

    Credentials: with ``keytab``, tickets for ``principal`` (default: the keytab's
    first principal) are got from that keytab into an in-memory cache of this
    process; without it, the default Kerberos credentials (``kinit``'s cache,
    ``KRB5CCNAME``, or MIT's ``KRB5_CLIENT_KTNAME``) are used, as kafka-python and
    aiokafka do. The target is the host-based service ``service@host``
    (``kafka/broker.example.com@REALM``).
    """

    name = "GSSAPI"
    #: Steps may wait on the KDC: the connection runs them in a worker thread.
    blocking = True

    def __init__(
        self,
        service: str,
        host: str,
        *,
        principal: str | None = None,
        keytab: str | None = None,
        broker: str = "",
        context: Any = None,
    ) -> None:
        self.target = f"{service}@{host}"
        self._on = f" on {broker}" if broker else ""
        self._principal = principal
        self._keytab = keytab
        self.identity: str
        if principal:
            self.identity = principal
        elif keytab:
            self.identity = f"(the first principal of keytab {keytab})"
        else:
            self.identity = "(the default Kerberos credentials)"
        self._ctx = context  # an established-or-not gssapi.SecurityContext (tests pass one)
        self._state = "context"

    def _fail(self, why: str) -> AuthenticationError:
        return AuthenticationError(
            f"SASL GSSAPI authentication as {self.identity} to {self.target}{self._on} "
            f"failed: {why}"
        )

    def _new_context(self) -> Any:
        gssapi = import_gssapi()
        creds = None
        if self._principal or self._keytab:
            name = (
                gssapi.Name(self._principal, gssapi.NameType.kerberos_principal)
                if self._principal
                else None
            )
            store = None
            if self._keytab:
                store = {
                    "client_keytab": self._keytab,
                    "ccache": keytab_ccache(self._principal, self._keytab),
                }
            creds = gssapi.Credentials(name=name, usage="initiate", store=store)
        target = gssapi.Name(self.target, gssapi.NameType.hostbased_service)
        return gssapi.SecurityContext(name=target, creds=creds, usage="initiate")

    def first(self) -> bytes:
        try:
            if self._ctx is None:
                self._ctx = self._new_context()
            return bytes(self._ctx.step(None) or b"")
        except _gss_errors() as exc:
            raise self._fail(
                f"{_gss_detail(exc)} (check the keytab or `kinit`, the KDC of the realm in "
                "krb5.conf or KRB5_CONFIG, and that the broker's principal is "
                f"{self.target.replace('@', '/', 1)}@REALM: sasl_kerberos_service_name, "
                "sasl_kerberos_domain_name)"
            ) from None

    def respond(self, server_token: bytes) -> bytes | None:
        try:
            if self._state == "context":
                # (A context complete at first() -- no mutual authentication --
                # has no token to take: the broker's answer is empty.)
                token = None if self._ctx.complete else self._ctx.step(server_token)
                if self._ctx.complete:
                    # The broker sends its security-layer offer in answer to the
                    # next message: the last GSS token, or an empty one.
                    self._state = "layers"
                return bytes(token or b"")
            if self._state == "layers":
                self._state = "done"
                return self._choose_layer(server_token)
        except _gss_errors() as exc:
            raise self._fail(_gss_detail(exc)) from None
        if server_token:
            raise self._fail("unexpected extra server message after the security layer")
        return None

    def _choose_layer(self, server_token: bytes) -> bytes:
        offer = bytes(self._ctx.unwrap(server_token).message)
        if len(offer) != 4:
            raise self._fail(f"the broker's security-layer offer is {len(offer)} bytes, not 4")
        if not offer[0] & _NO_SECURITY_LAYER:
            raise self._fail(
                f"the broker requires a security layer (offered 0x{offer[0]:02x}); "
                "kpax, like Kafka's clients, runs without one"
            )
        # no security layer, max buffer 0, no authorization identity (RFC 4752 3.1)
        return bytes(self._ctx.wrap(bytes((_NO_SECURITY_LAYER, 0, 0, 0)), False).message)


#: RFC 4752 3.1: bit 1 of the security-layer octet is "no security layer".
_NO_SECURITY_LAYER = 0x01
