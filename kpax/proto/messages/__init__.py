"""Every Kafka API message, generated from Apache Kafka's JSON specs.

Role: the public face of :mod:`kpax.proto.messages._generated` (written by
``tools/gen_proto.py``; see docs/protocol.md). Import message classes from
here: ``from kpax.proto.messages import MetadataRequest, FetchResponse``.
``REQUESTS``/``RESPONSES`` map an api key to its classes.

A message class's module is imported when the class is first used (PEP 562
``__getattr__``, here and in the generated package; REQUESTS/RESPONSES import
on lookup), so importing this package costs no message module.

Imports: kpax.proto only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kpax.proto.messages import _generated
from kpax.proto.messages._generated import KAFKA_SPECS_VERSION as KAFKA_SPECS_VERSION
from kpax.proto.messages._generated import REQUESTS as REQUESTS
from kpax.proto.messages._generated import RESPONSES as RESPONSES
from kpax.proto.messages._generated import __all__ as __all__

if TYPE_CHECKING:
    from kpax.proto.messages._generated import *  # noqa: F403

_NAMES = frozenset(__all__)


def _load(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_generated, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _NAMES)


# Hidden from type checkers: they take the names from the star import above, and so
# still report a misspelt one.
if not TYPE_CHECKING:
    __getattr__ = _load
