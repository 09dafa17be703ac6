"""Kafka's rules for topic names, checked before a name goes into a request.

Role: the one check of a topic name every kpax entry point runs (``send``,
``send_many``, ``subscribe``, ``assign``, the admin calls, the CLI), and the
cluster before it puts a name into a Metadata request. Kafka's rules
(``org.apache.kafka.common.internals.Topic.validate``): 1 to 249 characters,
each an ASCII letter, a digit, ``.``, ``_`` or ``-``; not ``.`` or ``..``.
A name the broker would refuse, or one that cannot even be encoded (a lone
surrogate such as ``"bad\\udcff"``, which ``os.fsdecode`` and surrogateescape'd
``sys.argv`` produce), fails at once with
:class:`~kpax.proto.error_codes.InvalidTopicError` naming it (its ``repr``, so
an invisible character shows) -- never a request that poisons the client's
metadata for the other topics.

Imports: kpax.proto.error_codes, the standard library.
"""

from __future__ import annotations

import re

from kpax.proto.error_codes import InvalidTopicError

__all__ = ["MAX_TOPIC_LENGTH", "check_topic", "topic_problem"]

#: The longest topic name Kafka accepts.
MAX_TOPIC_LENGTH = 249

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
_ILLEGAL = re.compile(r"[^a-zA-Z0-9._-]")

_RULE = "1 to 249 characters of ASCII letters, digits, '.', '_' and '-', not '.' or '..'"


def topic_problem(name: str) -> str | None:
    """What is wrong with topic name ``name`` by Kafka's rules, or None if nothing."""
    if _LEGAL.fullmatch(name) is not None:
        if len(name) > MAX_TOPIC_LENGTH:
            return f"it has {len(name)} characters (at most {MAX_TOPIC_LENGTH})"
        if name in (".", ".."):
            return f"{name!r} is reserved"
        return None
    if not name:
        return "it is empty"
    bad = _ILLEGAL.search(name)
    assert bad is not None
    return f"character {bad.group()!r} at index {bad.start()} is not allowed"


def check_topic(name: object) -> str:
    """``name`` if it is a valid topic name; a TypeError if it is not a str, an
    :class:`InvalidTopicError` (not retriable) naming it and what is wrong otherwise."""
    if (
        type(name) is str
        and _LEGAL.fullmatch(name) is not None
        and len(name) <= MAX_TOPIC_LENGTH
        and name not in (".", "..")
    ):
        return name
    if not isinstance(name, str):
        raise TypeError(f"a topic name must be a str, not {type(name).__name__} {name!r}")
    problem = topic_problem(name)
    if problem is None:  # a str subclass with a valid value
        return str(name)
    raise InvalidTopicError(
        f"topic name {name!r} is not valid: {problem} (Kafka topic names are {_RULE}); "
        "nothing was sent for it and retrying cannot help"
    )
