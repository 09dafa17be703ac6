"""One partition's offsets in a parallel consumer: what is done, what may be committed (sans-I/O).

Role: :class:`PartitionOffsets` follows the records a parallel consumer took
from one partition. Records arrive in offset order; each is incomplete until
its handler is done with it. The *committed point* is the first incomplete
offset (or, with none, the offset after the last record received): every
record before it is done. The done records after it are the gaps between
incomplete offsets, and :mod:`kpax.parallel.codec` writes them into the
commit's metadata. Offsets that never reached the consumer between two records
it returned (compacted away, transaction markers) count as done: they have
nothing to process.

After an assignment the tracker starts from the group's committed offset and
the done ranges its metadata recorded (the *seed*): a record the seed says is
done is skipped (not handed to the application again), and the seed's ranges
beyond the records received so far are written into the next commits too, so
they survive another restart.

No I/O and no clock: the engine (:mod:`kpax.parallel.engine`) calls it.

Imports: kpax.parallel.{codec,schedule}, kpax.structs.
"""

from __future__ import annotations

from kpax.parallel.codec import Encoded, encode
from kpax.parallel.schedule import Work
from kpax.structs import TopicPartition

__all__ = ["NEW", "OLD", "SKIP", "PartitionOffsets"]

#: What :meth:`PartitionOffsets.receive` says of a record: to process; done
#: already (the seed says so); not after the records received (a duplicate).
NEW, SKIP, OLD = range(3)


class PartitionOffsets:
    """The incomplete records of one partition, and what to commit for it."""

    __slots__ = (
        "_seed_at",
        "bytes",
        "committed",
        "end",
        "fresh",
        "incomplete",
        "last_epoch",
        "pending",
        "records",
        "removed",
        "revoked",
        "running",
        "seed",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        committed: int | None = None,
        metadata: str = "",
        seed: list[tuple[int, int]] | None = None,
    ) -> None:
        self.tp = tp
        #: The offset after the last record received (where the next one is
        #: expected); the committed offset before any; None while unknown.
        self.end = committed
        #: No record received yet.
        self.fresh = True
        #: Done ranges read from the committed metadata, not yet passed by ``end``.
        self.seed = list(seed or ())
        self._seed_at = 0
        #: offset -> work, in offset order (dict order: records arrive in order).
        self.incomplete: dict[int, Work] = {}
        self.last_epoch = -1
        #: Done works not yet in a commit the group accepted.
        self.pending: list[Work] = []
        #: Records (and their bytes) received and not yet released: incomplete,
        #: or done but not yet covered by an accepted commit.
        self.records = 0
        self.bytes = 0
        #: Handlers running for this partition.
        self.running = 0
        #: What the group holds for this partition, as last known: (offset, metadata).
        self.committed: tuple[int, str] | None = (
            (committed, metadata) if committed is not None else None
        )
        #: Revoked: no record of it starts any more. Removed: forgotten (works
        #: still running for it are of no account).
        self.revoked = False
        self.removed = False

    def receive(self, offset: int, epoch: int) -> int:
        """A record at ``offset`` arrived: NEW (to process), SKIP (done already,
        by the seed) or OLD (not after the records received: ignored)."""
        end = self.end
        if end is None or (self.fresh and offset < end):
            # The first record; or the consumer starts before the committed
            # offset (it was reset, e.g. after truncation): the seed is about
            # records that are not these.
            if end is not None:
                self.seed = []
                self._seed_at = 0
        elif offset < end:
            return OLD
        self.fresh = False
        self.end = offset + 1
        self.last_epoch = epoch
        seed = self.seed
        if seed:
            i = self._seed_at
            while i < len(seed) and seed[i][1] <= offset:
                i += 1
            if i == len(seed):
                self.seed = []
                self._seed_at = 0
                return NEW
            self._seed_at = i
            if seed[i][0] <= offset:
                return SKIP
        return NEW

    def point(self) -> int | None:
        """The committed point: the first incomplete offset, else ``end``."""
        for offset in self.incomplete:
            return offset
        return self.end

    def done_ranges(self) -> list[tuple[int, int]]:
        """The done offsets after :meth:`point`, as sorted, disjoint and
        non-adjacent half-open ranges (the seed's beyond ``end`` included)."""
        end = self.end
        if end is None:
            return []
        out: list[tuple[int, int]] = []
        prev = -1
        for offset in self.incomplete:
            if prev >= 0 and offset > prev + 1:
                out.append((prev + 1, offset))
            prev = offset
        if prev >= 0:
            if prev + 1 < end:
                out.append((prev + 1, end))
            floor = end
        else:
            floor = end + 1  # the point is ``end``: a range must start after it
        for seed_start, stop in self.seed[self._seed_at :]:
            start = max(seed_start, floor)
            if start >= stop:
                continue
            if out and out[-1][1] == start:
                out[-1] = (out[-1][0], stop)
            else:
                out.append((start, stop))
        return out

    def epoch_at(self, point: int) -> int:
        """The leader epoch to commit with ``point``: its record's, when it is
        one of ours, else the last record's."""
        work = self.incomplete.get(point)
        return work.epoch if work is not None else self.last_epoch

    def commit_state(self, max_bytes: int) -> tuple[int, Encoded] | None:
        """The committed point and its metadata (at most ``max_bytes``), or None
        while the point is unknown."""
        point = self.point()
        if point is None:
            return None
        return point, encode(point, self.done_ranges(), max_bytes)

    def oldest(self) -> Work | None:
        """The incomplete record with the lowest offset."""
        for work in self.incomplete.values():
            return work
        return None
