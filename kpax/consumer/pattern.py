"""Pattern subscriptions: the ``subscribe`` arguments checked, and topic names matched.

Role: :func:`subscribe_args` checks ``subscribe(topics=...)`` /
``subscribe(pattern=...)`` (exactly one of them; a compiled ``re.Pattern``
given as ``topics`` is a pattern, as Java's ``subscribe(Pattern)``; each name
by Kafka's rules: InvalidTopicError naming it);
:func:`compile_pattern` makes the ``re.Pattern`` the classic protocol
matches with; :func:`matching_topics` is the match itself: ``re.fullmatch``
(Java's ``matcher().matches()``) over the cluster's topic names, internal
topics (``__``-prefixed or flagged internal: :func:`is_internal`) left out
unless ``exclude_internal_topics`` is off. Under KIP-848 the broker matches
instead (RE2/J syntax): :func:`regex_text` is what is sent, and the broker's
assignment is filtered with :func:`is_internal` the same way.

Imports: kpax.cluster.metadata, kpax.proto.topic_names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kpax.cluster.metadata import TopicInfo
from kpax.proto.topic_names import check_topic

__all__ = ["compile_pattern", "is_internal", "matching_topics", "regex_text", "subscribe_args"]

#: What ``subscribe(pattern=...)`` takes.
Pattern = str | re.Pattern[str]


def subscribe_args(
    topics: Iterable[str] | Pattern | None, pattern: Pattern | None
) -> tuple[list[str] | None, Pattern | None]:
    """``(names, None)`` or ``(None, pattern)``; TypeError/ValueError naming the mistake."""
    if isinstance(topics, re.Pattern):
        if pattern is not None:
            raise TypeError("subscribe() takes topics or a pattern, not both")
        topics, pattern = None, topics
    if topics is not None and pattern is not None:
        raise TypeError("subscribe() takes topics=[...] or pattern=..., not both")
    if topics is None and pattern is None:
        raise TypeError("subscribe() needs topics=[...] or pattern='regex'")
    if pattern is not None:
        return None, _checked(pattern)
    assert topics is not None
    names = [topics] if isinstance(topics, str) else list(topics)
    for t in names:
        if not isinstance(t, str):
            raise TypeError(f"subscribe() takes topic names, not {t!r}")
        check_topic(t)  # InvalidTopicError naming a name Kafka would refuse
    return sorted(set(names)), None


def _checked(pattern: object) -> Pattern:
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, str):
            raise TypeError("subscribe(pattern=...) takes a str regex, not a bytes one")
        text: str = pattern.pattern
    elif isinstance(pattern, str):
        text = pattern
    else:
        raise TypeError(
            f"subscribe(pattern=...) takes a regex (str or re.Pattern), not {pattern!r}"
        )
    if not text:
        raise ValueError("subscribe(pattern=...): the regex is empty")
    return pattern


def regex_text(pattern: Pattern) -> str:
    """The regex as text (what KIP-848's SubscribedTopicRegex carries)."""
    return pattern.pattern if isinstance(pattern, re.Pattern) else pattern


def compile_pattern(pattern: Pattern) -> re.Pattern[str]:
    """``pattern`` compiled; a regex Python cannot compile is a ValueError naming it."""
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"subscribe(pattern={pattern!r}): not a valid regex: {exc}") from exc


def is_internal(name: str, info: TopicInfo | None) -> bool:
    """An internal topic: ``__``-prefixed (``__consumer_offsets``,
    ``__transaction_state``...) or flagged internal in the metadata."""
    return name.startswith("__") or (info is not None and info.is_internal)


def matching_topics(
    pattern: re.Pattern[str], topics: Mapping[str, TopicInfo], *, exclude_internal: bool = True
) -> list[str]:
    """The names of ``topics`` that ``pattern`` matches in full, sorted; no
    internal topic unless ``exclude_internal`` is False."""
    return sorted(
        name
        for name, info in topics.items()
        if not (exclude_internal and is_internal(name, info)) and pattern.fullmatch(name)
    )
