"""Offset and time specs of the `kpax` command: ``earliest``, ``latest``, offsets, times.

Role: parse what ``--from``, ``--to``, ``--time`` and ``rollback --to`` accept
into a :class:`Spec`. A TIME is ISO-8601 (``2024-05-01T12:00:00Z``, a date,
no zone = local time), relative to now (``-1h``, ``-30m``, ``-10s``, ``-2d``,
``-500ms``), or epoch milliseconds written ``@1714564800000``. An OFFSET is a
non-negative integer; ``-N`` (a bare negative integer) means N records before
the end of each partition. Bad input raises UsageError.

A time before 1970 means the epoch (Kafka timestamps are not negative, and
ListOffsets reads small negative ones as "earliest"/"latest"); a time after
every record gives "no offset", which the commands read as the end of the
partition. Epoch milliseconds beyond a 64-bit integer are a usage error.

Imports: kpax.cli.errors, the standard library.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from kpax.cli.errors import UsageError

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
#: The largest record timestamp (Kafka's int64).
MAX_TIMESTAMP = 2**63 - 1
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


@dataclass(frozen=True)
class Spec:
    """``kind`` is "earliest", "latest", "offset" (value = offset), "from_end"
    (value = records before the end) or "time" (value = epoch ms)."""

    kind: str
    value: int = 0

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "offset":
            return f"offset {self.value}"
        if self.kind == "from_end":
            return f"{self.value} before the end"
        try:
            return "time " + datetime.fromtimestamp(self.value / 1000).astimezone().isoformat()
        except (ValueError, OverflowError, OSError):  # beyond datetime's years
            return f"time @{self.value}"


def parse_time(text: str, *, what: str = "time", now_ms: int | None = None) -> int:
    """A TIME (ISO-8601, ``-1h``-style relative, ``@ms``) as epoch milliseconds
    (0 for a time before the epoch)."""
    s = text.strip()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    m = _RELATIVE.match(s)
    if m:
        try:
            return max(0, now - int(float(m.group(1)) * _UNITS_MS[m.group(2)]))
        except OverflowError:  # -1e400d: float inf
            return 0
    if s.startswith("@") and s[1:].isdigit():
        ms = int(s[1:])
        if ms > MAX_TIMESTAMP:
            raise UsageError(
                f"bad {what} {text!r}: epoch milliseconds above {MAX_TIMESTAMP} (2**63-1)"
            )
        return ms
    try:
        iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise UsageError(
            f"bad {what} {text!r}: expected ISO-8601 (2024-05-01T12:00:00Z), "
            "relative (-1h, -30m, -10s, -2d) or @epoch_ms"
        ) from None
    try:
        if dt.tzinfo is None:
            dt = dt.astimezone()  # local time
        ms = int(dt.timestamp() * 1000)
    except (ValueError, OverflowError, OSError):  # year 1 or 9999 in local time: read as UTC
        ms = int(dt.replace(tzinfo=dt.tzinfo or timezone.utc).timestamp() * 1000)
    return max(0, ms)


def parse_spec(text: str, *, what: str = "--from", allow_times: bool = True) -> Spec:
    """An offset or time spec (see the module docstring)."""
    s = text.strip()
    low = s.lower()
    if low in ("earliest", "beginning", "start"):
        return Spec("earliest")
    if low in ("latest", "end"):
        return Spec("latest")
    if s.isdigit():
        return Spec("offset", int(s))
    if s.startswith("-") and s[1:].isdigit():
        return Spec("from_end", int(s[1:]))
    if not allow_times:
        raise UsageError(f"bad {what} {text!r}: expected earliest, latest, OFFSET or -N")
    return Spec("time", parse_time(s, what=f"{what} value"))
