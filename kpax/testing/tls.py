"""Throw-away TLS material for a test broker, made with the `openssl` command line tool.

Role: create a CA (PEM, for the Python side's ``cafile``) and a broker
certificate for 127.0.0.1/localhost signed by it, packed in a PKCS#12 keystore
the broker reads (``ssl.keystore.type=PKCS12``).

Imports: the standard library and kpax.testing.errors only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kpax.testing.errors import KafkaStartError

__all__ = ["TlsMaterial", "make_tls_material"]

KEYSTORE_PASSWORD = "kpax-test-pass"


@dataclass(frozen=True)
class TlsMaterial:
    """Paths of the generated files and the keystore password."""

    cafile: Path
    certfile: Path
    keyfile: Path
    keystore: Path
    password: str = KEYSTORE_PASSWORD


def _openssl(args: list[str], cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise KafkaStartError(
            "openssl is not on PATH: it is needed to make the test broker's TLS certificate. "
            "Install openssl, or start the broker without the SSL listener (ssl=False)."
        )
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise KafkaStartError(
            f"openssl {args[0]} failed (exit {proc.returncode}) in {cwd}:\n{proc.stderr.strip()}"
        )


def make_tls_material(directory: Path) -> TlsMaterial:
    """Write ca.pem, broker.pem, broker.key and broker.p12 into *directory*."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _openssl(
        [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=kpax-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ],
        d,
    )  # fmt: skip
    _openssl(
        [
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
            "-out", "broker.csr", "-subj", "/CN=localhost",
        ],
        d,
    )  # fmt: skip
    (d / "broker.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n",
        encoding="utf-8",
    )
    _openssl(
        [
            "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", "broker.pem", "-extfile", "broker.ext",
        ],
        d,
    )  # fmt: skip
    _openssl(
        [
            "pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key",
            "-certfile", "ca.pem", "-name", "broker", "-out", "broker.p12",
            "-passout", f"pass:{KEYSTORE_PASSWORD}",
        ],
        d,
    )  # fmt: skip
    return TlsMaterial(
        cafile=d / "ca.pem",
        certfile=d / "broker.pem",
        keyfile=d / "broker.key",
        keystore=d / "broker.p12",
    )
