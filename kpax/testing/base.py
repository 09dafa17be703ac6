"""The handle every test-Kafka backend returns, and the "existing cluster" backend.

Role: `KafkaCluster` is the common surface (bootstrap addresses, listeners,
broker control, log tails, context manager); `ExistingCluster` wraps a cluster
someone else runs (``KPAX_TEST_BOOTSTRAP``): nothing is started or stopped and
broker control raises KafkaStartError.

Imports: the standard library and kpax.testing.errors only.
"""

from __future__ import annotations

import os
import signal
from types import TracebackType

from kpax.testing.errors import KafkaStartError, NotAvailableHere

#: signal.SIGKILL where it exists (POSIX): the module must import anywhere.
_SIGKILL = getattr(signal, "SIGKILL", 9)

__all__ = ["DEFAULT_SASL_USERS", "ExistingCluster", "KafkaCluster"]

#: SASL users every started broker knows, for PLAIN and both SCRAM mechanisms.
DEFAULT_SASL_USERS: dict[str, str] = {"kpax": "kpax-secret", "alice": "alice-secret"}


class KafkaCluster:
    """A running Kafka cluster for tests: addresses, and (where supported) broker control.

    Listener names are Kafka's security protocols: "PLAINTEXT", "SASL_PLAINTEXT", "SSL".
    """

    backend: str = "?"
    version: str | None = None
    #: PEM file of the CA that signed the SSL listener's certificate (None without SSL).
    ssl_cafile: str | None = None
    #: username -> password, valid for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
    sasl_users: dict[str, str]

    def __init__(self) -> None:
        self.sasl_users = {}

    @property
    def brokers(self) -> dict[int, str]:
        """Node id -> "127.0.0.1:port" of its PLAINTEXT listener."""
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        """Comma-joined PLAINTEXT addresses of all brokers."""
        return ",".join(self.brokers[n] for n in sorted(self.brokers))

    def listeners(self, name: str) -> dict[int, str]:
        """Node id -> address of listener *name* on that broker."""
        raise NotImplementedError

    def listener(self, name: str) -> str:
        """Comma-joined bootstrap addresses of listener *name* ("SASL_PLAINTEXT", "SSL", ...)."""
        addrs = self.listeners(name.upper())
        return ",".join(addrs[n] for n in sorted(addrs))

    def kill_broker(self, node_id: int, sig: int = _SIGKILL) -> None:
        """Send *sig* to broker *node_id* (SIGKILL by default: a crash) and reap it."""
        raise NotAvailableHere(f"{self.backend} cluster: cannot kill broker {node_id}")

    def restart_broker(self, node_id: int, timeout: float = 90.0) -> None:
        """Start broker *node_id* again on the same ports and data dir; wait until it answers."""
        raise NotAvailableHere(f"{self.backend} cluster: cannot restart broker {node_id}")

    def pause_broker(self, node_id: int) -> None:
        """Freeze broker *node_id* (SIGSTOP), returning once it is frozen.

        Its connections stay open and nothing answers on them.
        """
        raise NotAvailableHere(f"{self.backend} cluster: cannot pause broker {node_id}")

    def resume_broker(self, node_id: int) -> None:
        """Unfreeze a paused broker (SIGCONT)."""
        raise NotAvailableHere(f"{self.backend} cluster: cannot resume broker {node_id}")

    def log_tail(self, node_id: int | None = None, n: int = 40) -> str:
        """Last *n* lines of broker *node_id*'s log (all brokers when None)."""
        return ""

    def stop(self) -> None:
        """Stop every broker and remove what was created. Idempotent."""

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.backend} {self.version or ''} {self.bootstrap}>"


class ExistingCluster(KafkaCluster):
    """A cluster run by someone else (``KPAX_TEST_BOOTSTRAP=host:port[,host:port...]``).

    Optional: ``KPAX_TEST_SASL_BOOTSTRAP``, ``KPAX_TEST_SSL_BOOTSTRAP`` and
    ``KPAX_TEST_SSL_CAFILE`` describe its other listeners; ``KPAX_TEST_SASL_USERS``
    ("user:password,...") its SASL users.
    """

    backend = "existing"

    def __init__(self, bootstrap: str | None = None) -> None:
        super().__init__()
        bootstrap = bootstrap or os.environ.get("KPAX_TEST_BOOTSTRAP", "")
        if not bootstrap:
            raise KafkaStartError("ExistingCluster needs a bootstrap (set KPAX_TEST_BOOTSTRAP)")
        self._addrs: dict[str, list[str]] = {"PLAINTEXT": bootstrap.split(",")}
        for name, env in (
            ("SASL_PLAINTEXT", "KPAX_TEST_SASL_BOOTSTRAP"),
            ("SSL", "KPAX_TEST_SSL_BOOTSTRAP"),
        ):
            if os.environ.get(env):
                self._addrs[name] = os.environ[env].split(",")
        self.ssl_cafile = os.environ.get("KPAX_TEST_SSL_CAFILE") or None
        for pair in filter(None, os.environ.get("KPAX_TEST_SASL_USERS", "").split(",")):
            user, _, password = pair.partition(":")
            self.sasl_users[user] = password

    @property
    def brokers(self) -> dict[int, str]:
        # Node ids are unknown without a Metadata request; number the bootstrap entries.
        return dict(enumerate(self._addrs["PLAINTEXT"], start=1))

    def listeners(self, name: str) -> dict[int, str]:
        if name not in self._addrs:
            env = (
                "KPAX_TEST_SASL_BOOTSTRAP" if name.startswith("SASL") else "KPAX_TEST_SSL_BOOTSTRAP"
            )
            raise NotAvailableHere(
                f"existing cluster {self.bootstrap}: no {name} listener known (set {env})"
            )
        return dict(enumerate(self._addrs[name], start=1))
