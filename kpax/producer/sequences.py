"""A partition's idempotent sequence numbers, owned by one object with no I/O.

Role: :class:`PartitionSequence` is the sequence state of one partition
queue (:class:`~kpax.producer.accumulator.PartitionQueue` holds one, as
franz-go's ``recBuf`` owns its ``seq``), and the only code that changes it.
It keeps two numbers: ``next``, the base sequence the next sealed batch gets,
and ``acked``, the first sequence the broker has not acknowledged. The
numbers from ``acked`` up to ``next`` (wrapping at :data:`MAX_SEQUENCE`, as
the broker's do) are the *window*: handed out to batches not yet written, or
whose outcome is not known. Every change is one of these calls, each per batch
(never per record):

- :meth:`~PartitionSequence.assign`: a batch is sealed; it gets ``next`` and
  ``next`` moves past its records.
- :meth:`~PartitionSequence.unassign`: the batch just sealed could not be
  encoded: its numbers (the last ones handed out) come back.
- :meth:`~PartitionSequence.give_back`: a batch in the window failed for good
  unwritten; the numbers after it move down by its count (the caller
  renumbers those batches: ``seq_add(seq, -count)``).
- :meth:`~PartitionSequence.rewind_to`: every batch from ``base`` on was
  never sent (aborted): ``next`` goes back to ``base``.
- :meth:`~PartitionSequence.ack`: the broker wrote a batch: ``acked`` moves
  past it (and past anything before it the broker must have written for it to
  be accepted: an expired batch's numbers, say); a late answer for a batch
  already behind ``acked`` changes nothing.
- :meth:`~PartitionSequence.reset`: a new producer id or epoch: both restart at 0.

Invariants (a call that would break one raises IllegalStateError naming the
partition, the call and the numbers): a number is never handed out twice
while a batch holding it is unacknowledged (``next`` only moves back to a
base of the window); a rewind or give-back never reaches below ``acked``
(acknowledged data keeps its numbers); an acknowledgement is of numbers
handed out; the window is less than half the sequence space.

:func:`seq_add` and :func:`seq_before` are the wrapping arithmetic the
producer's other modules use on a batch's own numbers.

Imports: kpax.proto.errors.
"""

from __future__ import annotations

from kpax.proto.errors import IllegalStateError

__all__ = ["MAX_SEQUENCE", "PartitionSequence", "seq_add", "seq_before"]

#: Sequence numbers wrap at int32's maximum (as the broker's): after it comes 0.
MAX_SEQUENCE = 2**31 - 1
#: The window is kept below this many numbers, so "before" and "after" within
#: it are unambiguous under wrapping.
_HALF = 1 << 30


def seq_add(seq: int, n: int) -> int:
    """``seq + n`` wrapped as the broker wraps sequence numbers (``n`` may be negative)."""
    return (seq + n) & MAX_SEQUENCE


def seq_before(a: int, b: int) -> bool:
    """Whether sequence ``a`` comes before ``b`` (both of one window: less than
    half the sequence space apart), wrapping included: ``2**31 - 2`` comes
    before ``3``."""
    return 0 < ((b - a) & MAX_SEQUENCE) < _HALF


class PartitionSequence:
    """See the module docstring. ``topic`` and ``partition`` name it in errors."""

    __slots__ = ("_acked", "_next", "partition", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._next = 0
        self._acked = 0

    def __repr__(self) -> str:
        where = f"{self.topic}-{self.partition}"
        return f"<PartitionSequence {where} acked={self._acked} next={self._next}>"

    @property
    def next(self) -> int:
        """The base sequence the next sealed batch gets."""
        return self._next

    @property
    def acked(self) -> int:
        """The first sequence the broker has not acknowledged."""
        return self._acked

    @property
    def outstanding(self) -> int:
        """How many numbers are handed out and not acknowledged (the window)."""
        return (self._next - self._acked) & MAX_SEQUENCE

    def _offset(self, seq: int) -> int:
        """Where ``seq`` is from ``acked`` (0: ``acked`` itself)."""
        return (seq - self._acked) & MAX_SEQUENCE

    def _refuse(self, call: str, why: str) -> IllegalStateError:
        return IllegalStateError(
            f"cannot {call} on {self.topic}-{self.partition}: {why} "
            f"(acknowledged up to {self._acked}, next {self._next}); this is a bug in kpax"
        )

    def _check_range(self, call: str, base: int, count: int) -> int:
        """``base``'s offset in the window, after checking that ``base .. base +
        count`` lies in it."""
        if count <= 0:
            raise self._refuse(call, f"a batch of {count} record(s)")
        off = self._offset(base)
        if off + count > self.outstanding:
            last = seq_add(base, count - 1)
            raise self._refuse(
                call, f"sequences {base}..{last} are not handed out and unacknowledged"
            )
        return off

    def assign(self, count: int) -> int:
        """Hand out ``count`` numbers to a batch being sealed; return its base."""
        base = self._next
        if count <= 0 or ((base - self._acked) & MAX_SEQUENCE) + count >= _HALF:
            why = (
                f"a batch of {count} record(s)"
                if count <= 0
                else f"{self.outstanding + count} numbers would be unacknowledged at once"
            )
            raise self._refuse("assign sequences", why)
        self._next = (base + count) & MAX_SEQUENCE
        return base

    def unassign(self, base: int, count: int) -> None:
        """Take back the numbers just handed out (``base``, ``count``: the last
        :meth:`assign`): that batch could not be encoded."""
        self._check_range("give back a batch's sequences", base, count)
        if seq_add(base, count) != self._next:
            raise self._refuse(
                "give back a batch's sequences",
                f"sequences {base}..{seq_add(base, count - 1)} are not the last handed out",
            )
        self._next = base

    def give_back(self, base: int, count: int) -> None:
        """A batch of the window failed for good unwritten: the numbers after
        it move down by ``count`` (the caller renumbers those batches:
        ``seq_add(seq, -count)``)."""
        self._check_range("give back a failed batch's sequences", base, count)
        self._next = (self._next - count) & MAX_SEQUENCE

    def rewind_to(self, base: int) -> None:
        """The batches from ``base`` on were never sent: ``next`` goes back to it."""
        if self._offset(base) > self.outstanding:
            raise self._refuse(
                "rewind sequences", f"{base} is not a sequence handed out and unacknowledged"
            )
        self._next = base

    def ack(self, base: int, count: int) -> None:
        """The broker wrote the batch ``base`` .. ``base + count - 1``: every
        number up to it is acknowledged (the broker takes a batch only after
        the numbers before it). An answer may come late, after a later batch's
        (an earlier attempt's, over a connection since replaced): a batch
        already behind ``acked`` changes nothing. A batch past ``next`` was
        never handed out: refused."""
        if count <= 0:
            raise self._refuse("acknowledge sequences", f"a batch of {count} record(s)")
        end = (base + count) & MAX_SEQUENCE
        if seq_before(end, self._acked) or end == self._acked:
            return  # acknowledged already (by a later batch's answer)
        if self._offset(end) > self.outstanding:
            last = seq_add(base, count - 1)
            raise self._refuse(
                "acknowledge sequences", f"sequences {base}..{last} were never handed out"
            )
        self._acked = end

    def reset(self) -> None:
        """A new producer id or epoch: numbering restarts at 0."""
        self._next = self._acked = 0

    def in_window(self, seq: int) -> bool:
        """Whether ``seq`` is handed out and not acknowledged."""
        return self._offset(seq) < self.outstanding
