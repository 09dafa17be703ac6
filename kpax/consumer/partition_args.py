"""The partitions a consumer call is given, as TopicPartitions, with a clear error.

Role: ``pause``, ``resume``, ``assign``, ``seek_to_*``, offset lookups take
TopicPartitions, ``(topic, partition)`` pairs or collections of them
(:func:`partition_list`); ``seek`` and ``position`` take one
(:func:`one_partition`, a TypeError that says how to ask for several).

Imports: kpax.proto.topic_names, kpax.structs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kpax.proto.topic_names import check_topic
from kpax.structs import TopicPartition


def partition_list(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """The partitions given: TopicPartitions, ``(topic, partition)`` pairs, or
    collections of them (``pause(consumer.assignment())`` as well as
    ``pause(tp1, tp2)``, as the peers' methods take a list)."""
    out = []
    for item in partitions:
        if isinstance(item, TopicPartition):
            tp = item
        elif (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
        ):
            tp = TopicPartition(*item)
        elif isinstance(item, Iterable) and not isinstance(item, (str, bytes)):
            out.extend(partition_list(item))
            continue
        else:
            raise TypeError(
                f"expected TopicPartition(topic, partition) or a collection of them, "
                f"not {item!r} ({type(item).__name__})"
            )
        check_topic(tp.topic)  # InvalidTopicError naming a name Kafka would refuse
        out.append(tp)
    return out


def one_partition(tp: Any, call: str) -> TopicPartition:
    """The one partition of ``seek``/``position``; a clear TypeError for several."""
    if isinstance(tp, TopicPartition):
        return tp
    if isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str):
        return TopicPartition(*tp)
    raise TypeError(
        f"{call}() takes one TopicPartition(topic, partition), not {tp!r} "
        f"({type(tp).__name__}); for several: one call each "
        f"({{tp: consumer.{call}(tp) for tp in partitions}})"
    )
