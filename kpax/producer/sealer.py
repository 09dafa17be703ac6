"""Sealing: a closing producer batch encoded with its producer id, epoch and sequence.

Role: :class:`Sealer` is what the accumulator calls when a batch closes (full,
lingered, flushed) and the sender when it takes a batch that could not be
sealed at close (no producer id yet, an epoch bump due). It gives the batch the
partition's next sequence numbers (``PartitionQueue.sequence.assign``) and encodes it
(:func:`kpax.proto.records.encode_columns`: for an uncompressed batch one C
call that copies the records and computes the CRC; lz4 by kpax's C block
compressor; below 256 KiB neither releases the GIL, which in the sync face
would hand it to the I/O thread mid-seal). A batch
that cannot be encoded fails alone: it gets ``seal_error`` and its sequence
numbers are given back, so the partition goes on without a gap. Built once
by the producer and handed to both at construction.

Imports: kpax.producer.{accumulator,batch,batch_state,idempotence}, kpax.proto, the standard
library.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kpax.producer.batch import ProducerBatch
from kpax.producer.batch_state import BatchEvent
from kpax.producer.idempotence import ProducerIdentity
from kpax.proto.compression import codec_id
from kpax.proto.errors import KafkaError
from kpax.proto.records import encode_columns

if TYPE_CHECKING:
    from kpax.producer.accumulator import PartitionQueue

# (module names: read per batch, where an Enum class attribute costs ~100 ns)
_ON_SEAL = BatchEvent.SEAL
_ON_SEAL_FAILED = BatchEvent.SEAL_FAILED


log = logging.getLogger("kpax.producer")

__all__ = ["Sealer"]


class Sealer:
    """See the module docstring."""

    __slots__ = ("codec", "identity", "transactional")

    def __init__(
        self, identity: ProducerIdentity | None, compression: str, *, transactional: bool
    ) -> None:
        self.identity = identity
        self.codec = codec_id(None if compression == "none" else compression)
        self.transactional = transactional

    def seal(self, pq: PartitionQueue, b: ProducerBatch) -> bool:
        """Encode a closing batch (OPEN, or CLOSED earlier) with its sequence
        numbers (accumulator lock held).
        Declines (False) while the producer id is unknown or an epoch bump is due:
        the batch is then sealed before it is sent (``Sender._take``). A batch
        that cannot be encoded gets ``seal_error`` (True is returned: it was
        dealt with) and its sequence numbers are given back."""
        ident = self.identity
        if ident is not None:
            if ident.producer_id < 0 or ident.bump_needed:
                return False
            b.producer_id, b.producer_epoch = ident.producer_id, ident.producer_epoch
            b.base_sequence = pq.sequence.assign(len(b.values))
        b.count = len(b.values)
        try:
            b.data = encode_columns(
                b.timestamps,
                b.keys,
                b.values,
                b.headers,
                compression=self.codec,
                transactional=self.transactional,
                producer_id=b.producer_id,
                producer_epoch=b.producer_epoch,
                base_sequence=b.base_sequence,
            )
        except Exception as exc:  # never let one batch stop the producer
            if ident is not None:  # give its sequence numbers back: no gap
                pq.sequence.unassign(b.base_sequence, b.count)
                b.base_sequence = -1
            log.error(
                "cannot encode a batch of %d record(s) for %s-%d: %r",
                b.count,
                pq.topic,
                pq.partition,
                exc,
            )
            err = KafkaError(
                f"encoding {b.count} record(s) for {pq.topic}-{pq.partition} failed: {exc!r}"
            )
            err.__cause__ = exc
            b.seal_error = err  # the caller hands it to Accumulator.fail_later
            b.fire(_ON_SEAL_FAILED)
            return True
        b.fire(_ON_SEAL)
        b.timestamps = b.keys = b.values = []  # type: ignore[assignment]
        b.headers = None
        return True
