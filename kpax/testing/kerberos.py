"""A throw-away Kerberos realm (MIT Kerberos' KDC) for testing SASL GSSAPI.

Role: `KerberosRealm` makes a realm in a temporary directory -- ``kdc.conf``,
``krb5.conf``, a database created with ``kdb5_util create -s`` -- and runs
``krb5kdc`` in the foreground on a free loopback port (TCP, and UDP on the same
number). `add_principal` creates a principal with a random key (``kadmin.local
addprinc -randkey``) and exports it to a keytab (``ktadd``); `rekey` gives it a
new key, so that keytabs exported before no longer work.
`LocalCluster(kerberos=realm)` gives the broker a GSSAPI mechanism on its
SASL_PLAINTEXT listener, as principal ``kafka/localhost`` (see
`broker_settings`); clients then use ``sasl_kerberos_domain_name="localhost"``
and ``KRB5_CONFIG`` set to `krb5_conf` (the `client_env`).

The realm's ``krb5.conf`` turns off DNS (no KDC or realm lookup, no host name
canonicalisation) and UDP (``udp_preference_limit = 1``), for both MIT Kerberos
(the ``gssapi`` package) and Java.

Needs MIT Kerberos' KDC programs ``krb5kdc``, ``kdb5_util`` and ``kadmin.local``
(Debian packages krb5-kdc and krb5-admin-server; ``make krb5`` installs them):
without them `start` raises `KerberosUnavailable` naming what is missing.

Imports: the standard library, kpax.testing.errors.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from kpax.testing.errors import KafkaStartError

__all__ = ["BROKER_PRINCIPAL", "REALM", "KerberosRealm", "KerberosUnavailable", "find_programs"]

REALM = "KPAX.TEST"
#: The brokers' principal (service "kafka", host "localhost"), without the realm.
BROKER_PRINCIPAL = "kafka/localhost"
#: program -> the Debian package that has it
_PROGRAMS = {"krb5kdc": "krb5-kdc", "kdb5_util": "krb5-kdc", "kadmin.local": "krb5-admin-server"}
#: Where Debian puts them (not on a non-root user's PATH).
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


class KerberosUnavailable(KafkaStartError):
    """MIT Kerberos' KDC programs are not installed; the message names them."""


def find_programs() -> dict[str, str]:
    """Path of each KDC program, or `KerberosUnavailable` naming the missing ones."""
    found: dict[str, str] = {}
    for program in _PROGRAMS:
        path = shutil.which(program)
        if path is None:
            path = next(
                (str(Path(d) / program) for d in _SBIN if os.access(Path(d) / program, os.X_OK)),
                None,
            )
        if path is not None:
            found[program] = path
    missing = [p for p in _PROGRAMS if p not in found]
    if missing:
        packages = sorted({_PROGRAMS[p] for p in missing})
        raise KerberosUnavailable(
            f"a test Kerberos realm needs MIT Kerberos' {', '.join(missing)}, not found on "
            f"PATH or in {', '.join(_SBIN)}: install the Debian package(s) "
            f"{' '.join(packages)} (`make krb5` does, as root: apt-get install -y "
            "krb5-kdc krb5-admin-server)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_KDC_CONF = """[kdcdefaults]
 kdc_ports = {port}
 kdc_tcp_ports = {port}

[realms]
 {realm} = {{
  database_name = {dir}/principal
  key_stash_file = {dir}/stash
  acl_file = {dir}/kadm5.acl
  max_life = 10h
  max_renewable_life = 1d
 }}

[logging]
 kdc = FILE:{dir}/kdc.log
 admin_server = FILE:{dir}/kadmin.log
"""

_KRB5_CONF = """[libdefaults]
 default_realm = {realm}
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ticket_lifetime = 10h

[realms]
 {realm} = {{
  kdc = 127.0.0.1:{port}
 }}

[domain_realm]
 localhost = {realm}
 .localhost = {realm}
 127.0.0.1 = {realm}
"""


class KerberosRealm:
    """A Kerberos realm with its own KDC, for tests.

    >>> with KerberosRealm().start() as realm:
    ...     keytab = realm.add_principal("app")          # app@KPAX.TEST, random key
    ...     realm.krb5_conf, realm.principal("app"), realm.client_env()
    """

    def __init__(
        self,
        realm: str = REALM,
        *,
        workdir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.realm = realm
        self._workdir_arg = Path(workdir) if workdir else None
        self.startup_timeout = startup_timeout
        self.workdir: Path | None = None
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._programs: dict[str, str] = {}
        self._principals: set[str] = set()
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- files
    @property
    def krb5_conf(self) -> Path:
        """The realm's krb5.conf: for ``KRB5_CONFIG`` and ``-Djava.security.krb5.conf``."""
        return self._dir / "krb5.conf"

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise KafkaStartError("the Kerberos realm is not started (call start())")
        return self.workdir

    def principal(self, name: str) -> str:
        """*name* with the realm: ``app`` -> ``app@KPAX.TEST``."""
        return name if "@" in name else f"{name}@{self.realm}"

    def client_env(self) -> dict[str, str]:
        """What a client process needs in its environment to use this realm."""
        return {"KRB5_CONFIG": str(self.krb5_conf)}

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self._dir / "kdc.conf"),
        }

    def log_tail(self, n: int = 30) -> str:
        lines: list[str] = []
        for name in ("kdc.out", "kdc.log"):
            path = self._dir / name
            if path.is_file():
                lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n:])

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> KerberosRealm:
        """Create the realm and start its KDC; `KerberosUnavailable` without MIT Kerberos."""
        if self._proc is not None:
            return self
        self._programs = find_programs()
        if self._workdir_arg:
            self._workdir_arg.mkdir(parents=True, exist_ok=True)
            self.workdir = Path(tempfile.mkdtemp(prefix="krb5-", dir=self._workdir_arg))
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="kpax-krb5-"))
        atexit.register(self.stop)
        try:
            self.port = _free_port()
            fields = {"realm": self.realm, "port": self.port, "dir": self.workdir}
            (self.workdir / "kdc.conf").write_text(_KDC_CONF.format(**fields), encoding="utf-8")
            (self.workdir / "krb5.conf").write_text(_KRB5_CONF.format(**fields), encoding="utf-8")
            (self.workdir / "kadm5.acl").write_text("", encoding="utf-8")
            self._run(
                "kdb5_util", "create", "-s", "-W", "-r", self.realm, "-P", secrets.token_hex(16)
            )
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, program: str, *args: str) -> str:
        proc = subprocess.run(
            [self._programs[program], *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        out = (proc.stdout + proc.stderr).strip()
        # kadmin.local exits 0 after a failed query: its complaints name the query.
        failed = proc.returncode != 0 or any(
            line.startswith(f"{program}:") or "while " in line for line in out.splitlines()
        )
        if failed:
            raise KafkaStartError(
                f"{program} {' '.join(args[:3])} failed (exit {proc.returncode}): {out[-2000:]}"
            )
        return out

    def _launch(self) -> None:
        detach = threading.current_thread() is not threading.main_thread()
        with (self._dir / "kdc.out").open("ab") as out:
            self._proc = subprocess.Popen(
                [self._programs["krb5kdc"], "-n", "-r", self.realm],
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # only set from the main thread, where it is safe
                preexec_fn=None if detach else _die_with_parent,  # noqa: PLW1509
            )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                raise KafkaStartError(
                    f"krb5kdc exited with {self._proc.returncode} at start:\n{self.log_tail()}"
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0),
            ):
                return
            if time.monotonic() > deadline:
                raise KafkaStartError(
                    f"krb5kdc did not listen on 127.0.0.1:{self.port} within "
                    f"{self.startup_timeout:.0f}s:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the KDC and delete the realm's files."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(timeout=30)
            self._proc = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> KerberosRealm:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ----------------------------------------------------------------- principals
    def _kadmin(self, query: str) -> str:
        return self._run("kadmin.local", "-r", self.realm, "-q", query)

    def add_principal(self, name: str, keytab: str | os.PathLike[str] | None = None) -> Path:
        """Create principal *name* (random key; again: its key is exported anew) and
        write its key to *keytab* (default: ``<name>.keytab`` in the realm's
        directory); return the keytab's path."""
        principal = self.principal(name)
        path = Path(keytab) if keytab else self._dir / f"{name.replace('/', '_')}.keytab"
        with self._lock:
            if principal not in self._principals:
                self._kadmin(f"addprinc -randkey {principal}")
                self._principals.add(principal)
            # ktadd gives the principal a new key, added to the keytab
            self._kadmin(f"ktadd -k {path} {principal}")
        return path

    def rekey(self, name: str) -> None:
        """Give principal *name* a new random key: keytabs written before no longer work."""
        with self._lock:
            self._kadmin(f"cpw -randkey {self.principal(name)}")

    # ----------------------------------------------------------------- brokers
    def broker_settings(self, listener: str = "sasl_plaintext") -> tuple[dict[str, Any], list[str]]:
        """(server.properties entries, JVM flags) for a broker that accepts GSSAPI on
        *listener* as ``kafka/localhost``, besides PLAIN and SCRAM."""
        keytab = self.add_principal(BROKER_PRINCIPAL)
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="{self.principal(BROKER_PRINCIPAL)}";'
        )
        props = {
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,GSSAPI",
            "sasl.kerberos.service.name": BROKER_PRINCIPAL.split("/", 1)[0],
            f"listener.name.{listener}.gssapi.sasl.jaas.config": jaas,
        }
        return props, [f"-Djava.security.krb5.conf={self.krb5_conf}"]
