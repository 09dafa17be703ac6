"""SASL GSSAPI without a KDC: the options, the missing-package error, and the RFC 4752
exchange against a scripted GSS context (tokens as bytes). The real exchange with a
KDC and a broker is tests/integration/test_kerberos.py."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

import kpax
from kpax.broker.connection import BrokerConnection
from kpax.broker.options import COMMON_OPTIONS, connection_options
from kpax.broker.sasl import GssapiMechanism
from kpax.config import resolve
from kpax.proto.errors import AuthenticationError, ConfigError


@pytest.fixture
def fake_gssapi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gssapi module, as far as option checks go (it may not be installed here)."""
    monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))


def _options(**given: Any) -> dict[str, Any]:
    return resolve("client", COMMON_OPTIONS, {"security_protocol": "sasl_plaintext", **given})


def test_gssapi_options_are_accepted_with_kafka_python_names(fake_gssapi: None) -> None:
    opts = connection_options(_options(sasl_mechanism="GSSAPI"))
    assert opts.sasl_mechanism == "GSSAPI"
    assert opts.sasl_kerberos_service_name == "kafka"
    assert opts.sasl_kerberos_domain_name is None
    opts = connection_options(
        _options(
            sasl_mechanism="gssapi",
            sasl_kerberos_service_name="kfk",
            sasl_kerberos_domain_name="broker.example.com",
        )
    )
    assert (opts.sasl_kerberos_service_name, opts.sasl_kerberos_domain_name) == (
        "kfk",
        "broker.example.com",
    )


def test_bad_gssapi_options_fail_at_construction(fake_gssapi: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sasl_kerberos_service_name"):
        _options(sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka/host")
    missing = tmp_path / "none.keytab"
    with pytest.raises(ConfigError, match=r"none\.keytab.*no such file"):
        connection_options(_options(sasl_mechanism="GSSAPI", sasl_kerberos_keytab=str(missing)))


def test_without_the_gssapi_package_the_client_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi -> ImportError
    threads = threading.active_count()
    with pytest.raises(ConfigError, match=r"kpax\[gssapi\]") as caught:
        kpax.Producer("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")
    assert "libkrb5-dev" in str(caught.value)
    assert threading.active_count() == threads  # refused before any thread started


class _Wrapped:
    def __init__(self, message: bytes) -> None:
        self.message = message


class ScriptedContext:
    """A GSS initiator context: tokens from a script, wrap = b"W:" + message."""

    def __init__(self, tokens: list[bytes | None]) -> None:
        self._tokens = tokens
        self.taken: list[bytes | None] = []
        self.complete = False

    def step(self, token: bytes | None) -> bytes | None:
        self.taken.append(token)
        out = self._tokens.pop(0)
        self.complete = not self._tokens
        return out

    def wrap(self, message: bytes, encrypt: bool) -> _Wrapped:
        assert not encrypt
        return _Wrapped(b"W:" + message)

    def unwrap(self, token: bytes) -> _Wrapped:
        assert token.startswith(b"W:"), token
        return _Wrapped(token[2:])


def _mechanism(ctx: ScriptedContext) -> GssapiMechanism:
    return GssapiMechanism("kafka", "b1.example.com", broker="broker 1 (b1:9092)", context=ctx)


def test_rfc4752_exchange_chooses_no_security_layer() -> None:
    ctx = ScriptedContext([b"AP-REQ", None])  # complete after the broker's AP-REP
    mech = _mechanism(ctx)
    assert mech.target == "kafka@b1.example.com"
    assert mech.first() == b"AP-REQ"
    # the context is complete and has nothing to send: an empty token asks for the offer
    assert mech.respond(b"AP-REP") == b""
    assert ctx.taken == [None, b"AP-REP"]
    # offer: every layer (0x07), max buffer 65536; answer: no layer (0x01), buffer 0,
    # no authorization identity
    assert mech.respond(b"W:\x07\x01\x00\x00") == b"W:\x01\x00\x00\x00"
    assert mech.respond(b"") is None


def test_a_context_complete_at_once_answers_the_empty_reply_with_an_empty_token() -> None:
    ctx = ScriptedContext([b"AP-REQ"])  # no mutual authentication: complete at first()
    mech = _mechanism(ctx)
    assert mech.first() == b"AP-REQ"
    assert mech.respond(b"") == b""
    assert ctx.taken == [None]
    assert mech.respond(b"W:\x01\x00\x00\x00") == b"W:\x01\x00\x00\x00"


@pytest.mark.parametrize(
    ("offer", "match"),
    [
        (b"W:\x04\x00\x10\x00", "requires a security layer .offered 0x04."),
        (b"W:\x01\x00", "offer is 2 bytes, not 4"),
    ],
)
def test_an_offer_kpax_cannot_take_is_an_authentication_error(offer: bytes, match: str) -> None:
    mech = _mechanism(ScriptedContext([b"AP-REQ", None]))
    mech.first()
    mech.respond(b"AP-REP")
    with pytest.raises(AuthenticationError, match=match) as caught:
        mech.respond(offer)
    assert "kafka@b1.example.com on broker 1 (b1:9092)" in str(caught.value)


def test_a_message_after_the_exchange_is_an_error() -> None:
    mech = _mechanism(ScriptedContext([b"AP-REQ", None]))
    mech.first()
    mech.respond(b"AP-REP")
    mech.respond(b"W:\x01\x00\x00\x00")
    with pytest.raises(AuthenticationError, match="unexpected extra server message"):
        mech.respond(b"more")


async def test_blocking_steps_run_off_the_event_loop() -> None:
    ran_in: list[int] = []

    class Probe:
        name = "GSSAPI"
        blocking = True

        def first(self) -> bytes:
            ran_in.append(threading.get_ident())
            return b"t"

        def respond(self, server_token: bytes) -> bytes | None:
            return None

    probe = Probe()
    assert await BrokerConnection._sasl_step(probe, probe.first) == b"t"
    assert ran_in and ran_in[0] != threading.get_ident()  # not the event loop's thread
