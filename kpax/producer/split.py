"""Splitting a batch the broker refused as too large.

Role: a rare error path of the sender. When a partition leader answers
MESSAGE_TOO_LARGE or RECORD_LIST_TOO_LARGE for a batch of several records
(the topic's ``max.message.bytes`` or the broker's ``message.max.bytes`` is
below the producer's ``batch_size``), :func:`split_batch` decodes the batch's
bytes and re-encodes its records as two parts (halves by size), which the
sender puts back at the head of the partition's queue, in order; a part
refused again is split again. As the Java producer does
(``ProducerBatch.split``), the parts keep the producer id, epoch and
sequence range of the batch they come from -- the first part starts at its
base sequence, the second where the first ends -- so the batches after it keep
their sequence numbers: they are refused as out of order while the parts are
unwritten and retried behind them. Nothing of a refused batch was written, so
resending its records under the same sequence numbers is exactly-once.

The records' futures stay on the original batch (the parent): it records its
parts (``parts``: index of each part's first record, part) and each part its
``parent``; the parent completes once all its parts have, and a record's
metadata or error is its part's (:meth:`ProducerBatch.record_error`).

:func:`too_large_error` is the error of a single record too large: its size,
the batch's, and the limits that would let it through.

Imports: kpax.producer.{batch,batch_state,sequences}, kpax.proto (records, errors, error_codes),
the standard library.
"""

from __future__ import annotations

from kpax.producer.batch import ProducerBatch
from kpax.producer.batch_state import BatchEvent
from kpax.producer.sequences import seq_add
from kpax.proto.error_codes import MessageTooLargeError, RecordListTooLargeError
from kpax.proto.errors import BrokerResponseError, KafkaError
from kpax.proto.records import Header, decode_batches, encode_columns

# (module names: read per batch, where an Enum class attribute costs ~100 ns)
_ON_SPLIT = BatchEvent.SPLIT
_ON_SPLIT_OFF = BatchEvent.SPLIT_OFF


__all__ = ["TOO_LARGE_ERRORS", "split_batch", "too_large_error"]

#: The broker's answers to a batch too large for the topic, broker or log segment.
TOO_LARGE_ERRORS = (MessageTooLargeError, RecordListTooLargeError)


def split_batch(
    b: ProducerBatch, *, codec: int, transactional: bool, last_error: KafkaError
) -> list[ProducerBatch]:
    """Two encoded parts of ``b`` (at least 2 records), halves by size, with
    ``b``'s producer id, epoch, creation time and serial and consecutive
    sequence ranges; ``b.parts`` is set, each part's ``parent`` is ``b``; ``b``
    is SPLIT, its parts RETRY_WAIT.
    Each part counts as tried once (it must go out alone, as a retry does)."""
    assert b.data is not None and b.count > 1
    records = [r for batch in decode_batches(b.data) for r in batch]
    n = len(records)
    sizes = [
        len(r.key or b"") + len(r.value or b"") + sum(len(k) + len(v or b"") for k, v in r.headers)
        for r in records
    ]
    half, acc, mid = sum(sizes) / 2, 0, 0
    while mid < n - 1 and acc + sizes[mid] <= half:
        acc += sizes[mid]
        mid += 1
    mid = min(max(mid, 1), n - 1)
    parts: list[tuple[int, ProducerBatch]] = []
    for lo, hi in ((0, mid), (mid, n)):
        chunk = records[lo:hi]
        headers: list[list[Header] | None] | None = None
        if any(r.headers for r in chunk):
            headers = [list(r.headers) or None for r in chunk]
        part = ProducerBatch(b.topic, b.partition, b.created, 0, b.serial)
        part.producer_id, part.producer_epoch = b.producer_id, b.producer_epoch
        if b.base_sequence >= 0:
            part.base_sequence = seq_add(b.base_sequence, lo)
        part.count = hi - lo
        part.data = encode_columns(
            [r.timestamp for r in chunk],
            [r.key for r in chunk],
            [r.value for r in chunk],
            headers,
            compression=codec,
            transactional=transactional,
            producer_id=part.producer_id,
            producer_epoch=part.producer_epoch,
            base_sequence=part.base_sequence,
        )
        part.timestamps = part.keys = part.values = []  # type: ignore[assignment]
        part.fire(_ON_SPLIT_OFF)
        part.attempts = max(b.attempts, 1)
        part.maybe_written = b.maybe_written
        part.last_error = last_error
        part.parent = b
        parts.append((lo, part))
    b.parts = parts
    b.fire(_ON_SPLIT)
    return [part for _, part in parts]


def too_large_error(b: ProducerBatch, err: BrokerResponseError, where: str) -> BrokerResponseError:
    """The error of a batch of one record the broker refused as too large: the
    same class, a message naming the record's size, the batch's and the limits."""
    assert b.data is not None
    size = -1
    for batch in decode_batches(b.data):
        for r in batch:
            size = len(r.key or b"") + len(r.value or b"")
            size += sum(len(k) + len(v or b"") for k, v in r.headers)
    out = type(err)(
        f"a record of {size} bytes (key, value and headers; a batch of {len(b.data)} bytes) "
        f"for {b.topic}-{b.partition} is larger than {where} accepts; retrying cannot help: "
        "raise the topic's max.message.bytes (or the broker's message.max.bytes), and keep "
        "the producer's max_request_size above the record",
        error_message=err.error_message,
    )
    out.__cause__ = err
    return out
