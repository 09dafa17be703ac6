"""Idempotent producers' state in one partition: epochs, sequences, duplicates.

Role: what a Kafka partition leader remembers of each producer id
(``ProducerStateManager``): its epoch and the sequence ranges and offsets of
its last five batches. :meth:`ProducerStates.check` judges a new batch before it
is written:

- an epoch older than the one known: ``INVALID_PRODUCER_EPOCH``;
- the same epoch and the first and last sequence of one of the last five
  batches: a duplicate (a retry of a batch that was written): the answer is
  the offset it was written at, and nothing is written;
- the same epoch, a first sequence other than the last one + 1 (wrapping at
  2**31 - 1), or other than 0 right after a new epoch:
  ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
- a newer epoch: the first sequence must be 0;
- a producer id the partition does not know: any sequence (as Kafka, which may
  have dropped the state with the log).

A transaction marker with another epoch (an epoch bump: fencing, or every
transaction with transactions v2) resets the producer's sequences.

Imports: kpax.testing.fake.codes and the standard library.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kpax.testing.fake import codes

__all__ = ["ProducerEntry", "ProducerStates", "Verdict"]

_SEQ_MOD = 2**31
#: Batches remembered per producer for duplicate detection (Kafka's number).
RECENT_BATCHES = 5


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    last_seq: int = -1
    #: (first sequence, last sequence, base offset) of the last batches.
    recent: deque[tuple[int, int, int]] = field(
        default_factory=lambda: deque(maxlen=RECENT_BATCHES)
    )


@dataclass(slots=True)
class Verdict:
    error: int = codes.NONE
    message: str | None = None
    duplicate_offset: int | None = None


def last_sequence(first_seq: int, count: int) -> int:
    return (first_seq + count - 1) % _SEQ_MOD


class ProducerStates:
    """Producer id -> :class:`ProducerEntry` of one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, pid: int, epoch: int, first_seq: int, count: int) -> Verdict:
        entry = self.entries.get(pid)
        if entry is None:
            return Verdict()
        if epoch < entry.epoch:
            return Verdict(
                codes.INVALID_PRODUCER_EPOCH,
                f"producer {pid}: epoch {epoch} is older than the current epoch {entry.epoch}",
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                return Verdict(
                    codes.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: new epoch {epoch} starts at sequence {first_seq}, not 0",
                )
            return Verdict()
        last = last_sequence(first_seq, count)
        for f, ls, offset in entry.recent:
            if f == first_seq and ls == last:
                return Verdict(duplicate_offset=offset)
        expected = 0 if entry.last_seq < 0 else (entry.last_seq + 1) % _SEQ_MOD
        if first_seq != expected:
            return Verdict(
                codes.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid} epoch {epoch}: sequence {first_seq}, expected {expected}",
            )
        return Verdict()

    def record(self, pid: int, epoch: int, first_seq: int, count: int, base_offset: int) -> None:
        entry = self.entries.get(pid)
        if entry is None or entry.epoch != epoch:
            entry = self.entries[pid] = ProducerEntry(epoch)
        entry.last_seq = last_sequence(first_seq, count)
        entry.recent.append((first_seq, entry.last_seq, base_offset))

    def marker(self, pid: int, epoch: int) -> None:
        entry = self.entries.get(pid)
        if entry is None or entry.epoch != epoch:
            self.entries[pid] = ProducerEntry(epoch)
