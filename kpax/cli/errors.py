"""Errors of the `kpax` command and their exit codes.

Role: :class:`UsageError` (exit 2: bad arguments, time formats, config files)
and :class:`CommandError` (exit 1: what Kafka or the connection refused);
main.py turns them, and kpax's own errors, into one line on stderr.

Imports: the standard library only.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1  # Kafka / connection / data error
EXIT_USAGE = 2  # bad command line, config file or input format
EXIT_INTERRUPTED = 130  # Ctrl-C


class CliError(Exception):
    """An error the command reports as one line; ``code`` is the exit status."""

    code = EXIT_ERROR


class UsageError(CliError):
    """The command line, a config file or a time/offset spec is wrong (exit 2)."""

    code = EXIT_USAGE


class CommandError(CliError):
    """Kafka refused, a topic or group is missing, input data is malformed (exit 1)."""

    code = EXIT_ERROR
