"""Errors of the `kpax` command and their exit codes.

Role: :class:`UsageError` (exit 2: bad arguments, time formats, config files)
and :class:`CommandError` (exit 1: what Kafka or the connection refused);
main.py turns them, and kpax's own errors, into one line on stderr.
:class:`Interrupted` is a stop by a signal: SIGINT (Ctrl-C) exits 130 and
SIGTERM (``kill``) 143, 128 plus the signal's number as shells report it.

Imports: the standard library only.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_ERROR = 1  # Kafka / connection / data error
EXIT_USAGE = 2  # bad command line, config file or input format
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # kill (SIGTERM)


class CliError(Exception):
    """An error the command reports as one line; ``code`` is the exit status."""

    code = EXIT_ERROR


class UsageError(CliError):
    """The command line, a config file or a time/offset spec is wrong (exit 2)."""

    code = EXIT_USAGE


class CommandError(CliError):
    """Kafka refused, a topic or group is missing, input data is malformed (exit 1)."""

    code = EXIT_ERROR


class Interrupted(KeyboardInterrupt):
    """A signal stopped the command (a KeyboardInterrupt, so every clean stop
    that handles Ctrl-C handles it too); ``code`` is 128 + the signal number."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__()
        self.signum = int(signum)

    @property
    def code(self) -> int:
        return 128 + self.signum


def interrupted_status(exc: BaseException) -> int:
    """The exit status for a stop by ``exc``: 143 after SIGTERM, else 130 (a
    plain KeyboardInterrupt is Ctrl-C)."""
    return exc.code if isinstance(exc, Interrupted) else EXIT_INTERRUPTED
