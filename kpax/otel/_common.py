"""Names every part of :mod:`kpax.otel` shares: the instrumentation scope, the
logger, the type of a record's headers.

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: the standard library.
"""

from __future__ import annotations

import logging

_SCOPE = "kpax"
log = logging.getLogger("kpax.otel")

Headers = list[tuple[str, bytes | None]]
