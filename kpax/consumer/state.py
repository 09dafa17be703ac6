"""Per-partition consumer state: positions, fetch positions, pause, reset, epochs.

Role: one :class:`PartitionState` per assigned partition, shared by the
fetcher (loop thread: ``fetch_position``, ``gen``), the buffer's taker (the
application's thread: ``position``, ``in_hand``) and the group code (commits
read ``position``; automatic commits only what the application has moved
past, ``in_hand``). ``gen`` is bumped by every seek / pause / reset so that data
fetched for an older position is dropped wherever it is (in flight or
buffered). Plain attribute writes of ints are atomic under the GIL; no locks.

Imports: kpax.structs, the standard library.
"""

from __future__ import annotations

import uuid

from kpax.structs import TopicPartition

__all__ = ["PartitionState"]


class PartitionState:
    __slots__ = (
        "assigned",
        "committed",
        "error",
        "fetch_epoch",
        "fetch_position",
        "gen",
        "high_watermark",
        "in_hand",
        "in_hand_epoch",
        "in_hand_take",
        "last_stable_offset",
        "log_start_offset",
        "paused",
        "position",
        "position_epoch",
        "puts",
        "reset_to",
        "takes",
        "topic_id",
        "tp",
        "validate",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        #: Next offset the application will see (None: unknown, needs a reset/committed lookup).
        self.position: int | None = None
        #: Leader epoch of the record before ``position`` (-1 unknown).
        self.position_epoch = -1
        #: Next offset the fetcher asks for (runs ahead of ``position``).
        self.fetch_position: int | None = None
        #: Leader epoch of the last fetched batch (Fetch v12 LastFetchedEpoch).
        self.fetch_epoch = -1
        self.gen = 0
        self.paused = False
        self.assigned = True
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
        #: Pending reset: "earliest", "latest", "none", "committed" or None.
        self.reset_to: str | None = None
        #: Position must be validated with OffsetForLeaderEpoch (leader changed).
        self.validate = False
        #: An error to raise to the application (e.g. no offset, truncation).
        self.error: BaseException | None = None
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        #: The id of the topic the position belongs to (None: not seen yet). Another
        #: id in the metadata means the topic was deleted and re-created: the
        #: position is found again (loop thread only; see Fetcher._dispatch).
        self.topic_id: uuid.UUID | None = None

    def seek(self, offset: int, epoch: int = -1) -> None:
        """Move both positions (drops fetched data of the old position)."""
        self.gen += 1
        self.position = offset
        self.position_epoch = epoch
        self.fetch_position = offset
        self.fetch_epoch = epoch
        self.reset_to = None
        self.error = None

    def rewind_fetch(self) -> None:
        """Forget fetched-ahead data: fetch again from the application's position."""
        self.gen += 1
        self.fetch_position = self.position
        self.fetch_epoch = self.position_epoch

    @property
    def buffered(self) -> int:
        return self.puts - self.takes

    @property
    def fetchable(self) -> bool:
        return (
            self.assigned
            and not self.paused
            and self.fetch_position is not None
            and self.reset_to is None
            and not self.validate
            and self.error is None
        )

    def __repr__(self) -> str:
        return f"<PartitionState {self.tp} pos={self.position} fetch={self.fetch_position}>"
