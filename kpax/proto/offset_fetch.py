"""OffsetFetch in either of its two shapes, for the clients that send it.

Role: from v8 on, OffsetFetch names groups in a ``groups`` array; before, the
request is for one group and the answer's error and topics sit at the top.
:func:`offset_fetch_request` builds the request for one group in the shape of
``version``, :func:`offset_fetch_answer` reads that group's error code and
topics back, so the consumer (committed offsets) and the admin (a group's
offsets) write neither twice. Sans-I/O: message objects in and out.

Imports: kpax.proto.messages only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kpax.proto.messages import OffsetFetchRequest

__all__ = ["offset_fetch_answer", "offset_fetch_request"]


def offset_fetch_request(
    version: int,
    group_id: str,
    topics: Mapping[str, Sequence[int]] | None,
    *,
    require_stable: bool,
) -> OffsetFetchRequest:
    """An OffsetFetch of ``group_id`` for ``{topic: [partition, ...]}`` (None:
    every partition the group has offsets for)."""
    if version >= 8:
        return OffsetFetchRequest(
            groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=None
                    if topics is None
                    else [
                        OffsetFetchRequest.OffsetFetchRequestTopics(
                            name=t, partition_indexes=list(ps)
                        )
                        for t, ps in topics.items()
                    ],
                )
            ],
            require_stable=require_stable,
        )
    return OffsetFetchRequest(
        group_id=group_id,
        topics=None
        if topics is None
        else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=list(ps))
            for t, ps in topics.items()
        ],
        require_stable=require_stable,
    )


def offset_fetch_answer(response: Any, version: int) -> tuple[int, list[Any]]:
    """``(error_code, topics)`` of the one group an OffsetFetch asked for; each
    topic has ``name`` and ``partitions`` (``partition_index``,
    ``committed_offset``, ``committed_leader_epoch``, ``metadata``, ``error_code``)."""
    if version >= 8:
        group = response.groups[0]
        return group.error_code, list(group.topics)
    return response.error_code, list(response.topics)
