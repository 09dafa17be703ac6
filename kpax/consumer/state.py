"""Per-partition consumer state: the position's machine plus what the buffer and group keep.

Role: one :class:`PartitionState` per assigned partition, shared by the
fetcher (loop thread: ``fetch_position``, ``gen``), the buffer's taker (the
application's thread: ``position``, ``in_hand``) and the group code (commits
read ``position``; automatic commits only what the application has moved
past, ``in_hand``). Its fetch state, reset strategy, error, positions and
``gen`` are :class:`~kpax.consumer.position_state.PositionMachine`'s, changed
only by that machine's events; the fields added here are the buffer's and the
group's bookkeeping. Plain attribute writes of ints are atomic under the GIL;
no locks.

Imports: kpax.consumer.position_state, kpax.structs, the standard library.
"""

from __future__ import annotations

import uuid

from kpax.consumer.position_state import PositionMachine, Reset
from kpax.structs import TopicPartition

__all__ = ["PartitionState"]


class PartitionState(PositionMachine):
    __slots__ = (
        "committed",
        "high_watermark",
        "in_hand",
        "in_hand_epoch",
        "in_hand_take",
        "last_stable_offset",
        "log_start_offset",
        "puts",
        "takes",
        "topic_id",
    )

    def __init__(self, tp: TopicPartition, reset: Reset = Reset.POLICY) -> None:
        super().__init__(tp, reset)
        #: Decoded fetches of this partition put in the buffer (loop thread only) and
        #: taken from it (taking thread only): two counters, so no lock is needed.
        self.puts = 0
        self.takes = 0
        #: The offset of the first record the application holds and may not have
        #: processed yet (and its leader epoch): records handed out by the take
        #: numbered ``in_hand_take``, valid while that is the buffer's last take
        #: (see :meth:`kpax.consumer.buffer.FetchBuffer.processed_position`).
        self.in_hand: int | None = None
        self.in_hand_epoch = -1
        self.in_hand_take = -1
        #: The group's committed offset as this member last knew it (looked up or
        #: committed by it): a commit of an unchanged position is skipped, so a
        #: member never writes back a stale offset another member moved on from.
        self.committed: int | None = None
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        #: The id of the topic the position belongs to (None: not seen yet). Another
        #: id in the metadata means the topic was deleted and re-created: the
        #: position is found again (loop thread only; see Fetcher._dispatch).
        self.topic_id: uuid.UUID | None = None

    @property
    def buffered(self) -> int:
        return self.puts - self.takes

    def __repr__(self) -> str:
        return (
            f"<PartitionState {self.tp} {self.state.value} pos={self.position} "
            f"fetch={self.fetch_position}>"
        )
