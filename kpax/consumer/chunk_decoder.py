"""A partition's framed batches from a Fetch response, decoded into one buffer chunk.

Role: :class:`ChunkDecoder` turns what the fetcher (kpax.consumer.fetcher) framed
and CRC-checked for one partition into one :class:`~kpax.consumer.buffer.Chunk`
and puts it in the fetch buffer. The :class:`~kpax.consumer.record.ConsumerRecord`
objects of a v2 batch are built later by the thread that takes the chunk (see
:class:`~kpax.consumer.buffer.Chunk`), just before the application reads them;
here the batch is only decompressed and every record checked
(``RecordBatchV2.checked_rows``, no object built; an uncompressed batch's
records were checked with its CRC by the fetcher's C walk: ``batch.checked``).
So the sync face's I/O thread stays free to read the next response, and
neither face builds a whole response's records at once: a response of six
partitions holds some 50,000, more than the free list of records
(kpax.consumer.record) keeps, and their allocations set off young-GC
collections. With a deserializer, or a legacy (v0/v1) batch, the records are
built here (``zip``/``map`` in C). ``read_committed`` drops batches of aborted
transactions (the response's aborted list) and control batches are never shown.

Bad records (a batch failing its CRC or any other check, one decompressing to
more than ``max_decompressed_batch_bytes``, a failing deserializer) stop their
partition where they start: the records before them are delivered, then the
error (the same class, naming the partition, the offset and where the batch
ends: :meth:`ChunkDecoder.record_error`), which the buffer raises again at
every poll until the application seeks (as the Java client does).

Imports: kpax.consumer.{buffer,options,positions,record,state}, kpax.proto.
"""

from __future__ import annotations

import collections
from functools import partial
from itertools import repeat
from typing import Any

from kpax.consumer.buffer import Chunk, FetchBuffer
from kpax.consumer.options import ConsumerSettings
from kpax.consumer.positions import Positions
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.proto.errors import (
    CorruptRecordError,
    DecompressionLimitError,
    KafkaError,
    SerializationError,
)
from kpax.proto.gc_pause import gc_paused
from kpax.proto.records.control import ControlRecord
from kpax.proto.records.v2 import untrack

_make = partial(tuple.__new__, ConsumerRecord)
#: Where the record loop puts offset, timestamp, key, value and headers in a ConsumerRecord.
_ROW_SLOTS = (2, 3, 5, 6, 7)


class ChunkDecoder:
    """Decodes a partition's batches into a chunk of the fetch buffer (module docstring)."""

    def __init__(
        self, settings: ConsumerSettings, buffer: FetchBuffer, positions: Positions
    ) -> None:
        self.buffer = buffer
        #: Where a partition's error goes (``positions.fail``).
        self.positions = positions
        self.read_committed = settings.read_committed
        self.key_deserializer = settings.key_deserializer
        self.value_deserializer = settings.value_deserializer
        self.max_decompressed = settings.max_decompressed_batch_bytes

    def decode(  # noqa: PLR0917 - hot path
        self,
        st: PartitionState,
        gen: int,
        topic: str,
        partition: int,
        batches: list[Any],
        fetch_offset: int,
        aborted_list: Any,
        error: KafkaError | None = None,
    ) -> None:
        """Decode framed batches into one chunk (its buffer slot is reserved when there
        are batches); ``error`` (bad bytes after these batches) follows their records.
        A batch that fails to decode, or a record whose deserializer fails, ends the
        chunk there with an error at its offset. Once the batches decoded hold more
        than ``max_decompressed_batch_bytes`` decompressed, the chunk ends and the rest
        is fetched again later: a fetch full of small decompression bombs costs about
        one cap, not one per batch."""
        out: list[ConsumerRecord] = []
        #: What the chunk's records are built from (see Chunk): record lists, batches.
        sources: collections.deque[tuple[int, Any]] = collections.deque()
        pending = 0
        budget = self.max_decompressed
        decompressed = 0
        previous: Any = None
        next_offset = fetch_offset
        next_epoch = st.fetch_epoch
        read_committed = self.read_committed
        aborted: list[tuple[int, int]] = []
        aborted_pids: set[int] = set()
        if read_committed and aborted_list:
            aborted = sorted((a.first_offset, a.producer_id) for a in aborted_list)
            aborted.reverse()
        kd = self.key_deserializer
        vd = self.value_deserializer
        templates: dict[tuple[int, int], ConsumerRecord] = {}
        # Only tuples of ints/bytes/str are made here, never a cycle: the cyclic GC's
        # passes over them (triggered by the allocations) would cost more than decoding.
        with gc_paused():
            try:
                for batch in batches:
                    nxt = batch.next_offset
                    if nxt <= fetch_offset:
                        continue
                    if previous is not None:
                        decompressed += previous.decompressed_size
                        if decompressed > budget:  # enough for one chunk: fetch the rest again
                            if st.gen == gen:
                                if error is not None:
                                    st.drop_error(error)  # found again if still there
                                st.refetch(next_offset, next_epoch)
                            error = None
                            break
                    previous = batch
                    if batch.magic < 2:  # legacy message set: no epochs, transactions or control
                        epoch = -1
                    else:
                        epoch = batch.partition_leader_epoch
                        if read_committed:
                            last = batch.last_offset
                            while aborted and aborted[-1][0] <= last:
                                aborted_pids.add(aborted.pop()[1])
                            if batch.is_control:
                                pid = batch.producer_id
                                if pid in aborted_pids:
                                    for rec in batch:  # an ABORT marker is type 0
                                        if isinstance(rec, ControlRecord) and rec.type == 0:
                                            aborted_pids.discard(pid)
                                next_offset, next_epoch = nxt, epoch
                                continue
                            if batch.is_transactional and batch.producer_id in aborted_pids:
                                next_offset, next_epoch = nxt, epoch
                                continue
                        elif batch.is_control:
                            next_offset, next_epoch = nxt, epoch
                            continue
                    if kd is None and vd is None and batch.magic == 2:
                        # the record loop builds the ConsumerRecords itself (C when built)
                        # from a template: one per timestamp type and epoch, not per batch
                        shape = (batch.timestamp_type, epoch)
                        template = templates.get(shape)
                        if template is None:
                            template = templates[shape] = untrack(
                                ConsumerRecord(
                                    topic, partition, 0, 0, shape[0], None, None, (), epoch
                                )
                            )
                        # Checked here, built by the taking thread (see Chunk).
                        n, args = batch.checked_rows(template, _ROW_SLOTS, fetch_offset)
                        if n:
                            if out:
                                sources.append((len(out), out))
                                pending += len(out)
                                out = []
                            sources.append(untrack((n, args)))
                            pending += n
                        next_offset, next_epoch = nxt, epoch
                        continue
                    rows = batch.tuples()
                    if not rows:
                        next_offset, next_epoch = nxt, epoch
                        continue
                    if rows[0][0] < fetch_offset:
                        rows = [r for r in rows if r[0] >= fetch_offset]
                    offsets, timestamps, keys, values, headers = zip(*rows, strict=True)
                    failed: tuple[int, SerializationError] | None = None
                    if kd is not None or vd is not None:
                        keys, values, failed = self.deserialize(
                            topic, partition, offsets, keys, values
                        )
                        if failed is not None:  # the records before the failing one only
                            offsets = offsets[: failed[0]]
                    out.extend(
                        map(
                            _make,
                            zip(
                                repeat(topic),
                                repeat(partition),
                                offsets,
                                timestamps,
                                repeat(batch.timestamp_type),
                                keys,
                                values,
                                headers,
                                repeat(epoch),
                            ),
                        )
                    )
                    if failed is not None:
                        index, serr = failed
                        next_offset, next_epoch = rows[index][0], epoch
                        error = self.record_error(st, serr, next_offset, next_offset + 1)
                        break
                    next_offset, next_epoch = nxt, epoch
            except KafkaError as exc:
                # `batch` failed to decode: the chunk ends before it
                error = self.record_error(st, exc, next_offset)
        # Deliver what decoded; an error comes when the position reaches it.
        if batches:
            if sources:
                if out:
                    sources.append((len(out), out))
                    pending += len(out)
                chunk = Chunk(st, [], next_offset, next_epoch, gen, sources, pending)
            else:
                chunk = Chunk(st, out, next_offset, next_epoch, gen)
            self.buffer.put(chunk)
        if error is not None:
            if st.gen == gen and st.assigned:
                # (whatever a fetch in flight brings is dropped)
                self.positions.fail(st, error, drop_in_flight=True)
            else:  # paused meanwhile: found again when fetched again
                st.drop_error(error)

    def deserialize(
        self, topic: str, partition: int, offsets: Any, keys: Any, values: Any
    ) -> tuple[Any, Any, tuple[int, SerializationError] | None]:
        """Deserialized keys and values; on a failure, those of the records before the
        first failing one, with its index and the error naming its offset."""
        kd = self.key_deserializer
        vd = self.value_deserializer
        try:
            if kd is not None:
                keys = [None if k is None else kd(k) for k in keys]
            if vd is not None:
                values = [None if v is None else vd(v) for v in values]
        except Exception:  # find the first failing record, in offset order, below
            pass
        else:
            return keys, values, None
        out_keys: list[Any] = []
        out_values: list[Any] = []
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            which = "key"
            try:
                dk = k if kd is None or k is None else kd(k)
                which = "value"
                dv = v if vd is None or v is None else vd(v)
            except Exception as exc:  # any deserializer failure
                err = SerializationError(
                    f"{which} deserializer failed on {topic}-{partition} at offset "
                    f"{offsets[i]}: {exc!r}"
                )
                err.__cause__ = exc
                return out_keys, out_values, (i, err)
            out_keys.append(dk)
            out_values.append(dv)
        return out_keys, out_values, None  # it failed once only: take this pass's results

    def record_error(
        self, st: PartitionState, exc: KafkaError, offset: int, next_offset: int | None = None
    ) -> KafkaError:
        """``exc`` as the application gets it: bad data at ``offset`` (where the
        partition's position stops), naming the partition, the offset and how to
        skip it. ``next_offset`` (the end of the bad batch from its header) is
        used when it is plausible, else the record at ``offset`` is what is skipped."""
        if not isinstance(exc, (CorruptRecordError, SerializationError)):
            return exc
        tp = st.tp
        hw = st.high_watermark
        nxt = next_offset if next_offset is not None else exc.next_offset
        if nxt is None or nxt <= offset or (hw >= 0 and nxt > hw):
            nxt = offset + 1
        detail = exc.message
        if isinstance(exc, DecompressionLimitError):
            detail += (
                f"; this consumer's max_decompressed_batch_bytes is {self.max_decompressed}: "
                "raise it to read a batch this large"
            )
        skips = (
            f"the record at offset {offset}"
            if nxt == offset + 1
            else f"offsets {offset} to {nxt - 1} (the rest of the batch)"
        )
        if not isinstance(exc, SerializationError):  # which names them already
            detail = f"partition {tp}, offset {offset}: {detail}"
        err = type(exc)(
            f"{detail}. poll() raises this until the partition's position moves: "
            f"seek(TopicPartition({tp.topic!r}, {tp.partition}), {nxt}) skips {skips}"
        )
        err.topic_partition = tp
        err.offset = offset
        err.next_offset = nxt
        err.__cause__ = exc.__cause__  # a deserializer's own exception
        return err
