"""Writes through the "kpax" data source: Arrow batches -> Kafka, per task.

Role: check the DataFrame's columns at planning time (``value`` required,
binary or string; optional ``key`` binary/string, ``topic`` string,
``partition`` int, ``headers`` array<struct<key:string,value:binary>>; a
``topic`` column or the ``topic`` option, the option wins as in Spark), then
in each task send every row, flush, and fail the task with the first delivery
error; only then return the commit message.

``deliveryGuarantee=at-least-once`` (the default, as Spark's built-in sink): a
retried task sends its rows again; the task's producer is the Python worker's
(kpax.spark.clients), kept from task to task. ``exactly-once``: each task
writes in a Kafka transaction the driver commits when Spark commits the batch
(kpax.spark.txn: the design, and what a replay does).

Imports: kpax (errors), kpax.spark.options, kpax.spark.source; kpax.spark.txn,
kpax.spark.clients, pyarrow, pyspark and the kpax clients inside the functions
that use them (the Python workers Spark starts to plan and to commit a write
unpickle this module: an at-least-once commit loads nothing more).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from kpax.errors import ConfigError, KafkaError
from kpax.spark.options import WriteOptions
from kpax.spark.source import user_errors

if TYPE_CHECKING:
    from kpax.spark.txn import PreparedTxn

__all__ = [
    "KpaxBatchWriter",
    "KpaxCommitMessage",
    "KpaxStreamWriter",
    "check_write_schema",
    "write_batches",
]

log = logging.getLogger("kpax.spark")

#: Producer defaults of a write task (see :func:`producer_config`).
WRITE_BATCH_SIZE = 262144
WRITE_LINGER_MS = 20

_ALLOWED = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
}


def check_write_schema(schema: Any, opts: WriteOptions | None = None) -> None:
    """Planning-time check of the columns a write gets."""
    types = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    if "value" not in types:
        raise ConfigError(
            f"kpax write: a 'value' column (binary or string) is required; columns are "
            f"{[f.name for f in schema.fields]}"
        )
    for name, allowed in _ALLOWED.items():
        if name in types and types[name] not in allowed:
            raise ConfigError(
                f"kpax write: column {name!r} must be {' or '.join(allowed)}, got {types[name]}"
            )
    if opts is not None and opts.topic is None and "topic" not in types:
        raise ConfigError("kpax write: no topic: set the 'topic' option or write a 'topic' column")


@dataclass
class KpaxCommitMessage(WriterCommitMessage):
    """What one task wrote (rows per topic) and, exactly-once, its prepared transaction
    (None: nothing to commit) or that it found its batch committed already."""

    rows: int
    topics: dict[str, int]
    txn: PreparedTxn | None = None
    replayed: bool = False
    notes: list[str] = field(default_factory=list)


def _binary(col: Any) -> list[Any]:
    import pyarrow as pa

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return list(col.to_pylist())


def producer_config(opts: WriteOptions) -> dict[str, Any]:
    cfg = dict(opts.client)
    cfg.setdefault("client_id", "kpax-spark")
    # A task sends a whole partition of rows at once: bigger batches cut the per-batch
    # Python work (measured: 172k -> 296k rows/s for one task). kafka.batch.size /
    # kafka.linger.ms override these.
    cfg.setdefault("batch_size", WRITE_BATCH_SIZE)
    cfg.setdefault("linger_ms", WRITE_LINGER_MS)
    return cfg


def _send_all(
    producer: Any, opts: WriteOptions, batches: Iterator[Any]
) -> tuple[int, dict[str, int], list[Any]]:
    """Send every row of ``batches``; returns rows, rows per topic, the futures."""
    futures: list[Any] = []
    topics: dict[str, int] = {}
    rows = 0
    send = producer.send
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        values = _binary(batch.column(names["value"]))
        keys = _binary(batch.column(names["key"])) if "key" in names else [None] * n
        if opts.topic is not None:
            topic_col: list[Any] = [opts.topic] * n
        else:
            topic_col = batch.column(names["topic"]).to_pylist()
            if None in topic_col:
                row = topic_col.index(None)
                raise ConfigError(
                    f"kpax write: row {rows + row} has a null topic and no 'topic' option is set"
                )
        parts = batch.column(names["partition"]).to_pylist() if "partition" in names else None
        hdrs = None
        if "headers" in names:
            hdrs = [
                None if h is None else [(x["key"], x["value"]) for x in h]
                for h in batch.column(names["headers"]).to_pylist()
            ]
        append = futures.append
        if parts is None and hdrs is None:
            if opts.topic is not None:
                t = opts.topic
                for v, k in zip(values, keys, strict=True):
                    append(send(t, v, k))
            else:
                for t, v, k in zip(topic_col, values, keys, strict=True):
                    append(send(t, v, k))
        else:
            ps = parts if parts is not None else [None] * n
            hs = hdrs if hdrs is not None else [None] * n
            for t, v, k, p, h in zip(topic_col, values, keys, ps, hs, strict=True):
                append(send(t, v, k, partition=p, headers=h))
        rows += n
        if opts.topic is not None:
            topics[opts.topic] = topics.get(opts.topic, 0) + n
        else:
            for t in set(topic_col):
                topics[t] = topics.get(t, 0) + topic_col.count(t)
    return rows, topics, futures


def _raise_first_failure(futures: list[Any]) -> None:
    for fut in futures:
        if fut.failed():
            exc = fut.exception()
            assert exc is not None
            raise exc


def write_batches(opts: WriteOptions, batches: Iterator[Any]) -> KpaxCommitMessage:
    """At-least-once: send every row of ``batches`` with the worker's producer;
    flush; raise the first delivery error."""
    from kpax.spark.clients import producer_for, warn_if_pure_python

    warn_if_pure_python()
    with producer_for(producer_config(opts)) as producer:
        rows, topics, futures = _send_all(producer, opts, batches)
        producer.flush()
        _raise_first_failure(futures)
    return KpaxCommitMessage(rows=rows, topics=topics)


def _task_context() -> tuple[int, str | None, int | None]:
    """This task's partition, and the streaming query id and batch id (None in a
    batch write)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:  # pragma: no cover - only inside a Spark task
        raise RuntimeError("kpax write: no Spark task context")
    query = tc.getLocalProperty("sql.streaming.queryId")
    batch = tc.getLocalProperty("streaming.sql.batchId")
    return tc.partitionId(), query, int(batch) if batch is not None else None


def write_transactional(
    opts: WriteOptions,
    batches: Iterator[Any],
    write_id: str,
    *,
    partition: int | None = None,
    batch_id: int | None = None,
) -> KpaxCommitMessage:
    """Exactly-once: the task's rows in a transaction of its own, flushed and left
    open for the driver to commit (kpax.spark.txn). A streaming task also commits
    the marker of its batch in that transaction, and writes nothing when the marker
    says the batch is committed already (a replay)."""
    import kpax
    from kpax.spark.clients import admin_for, warn_if_pure_python
    from kpax.spark.options import admin_options
    from kpax.spark.txn import PreparedTxn, marker_offsets, read_marker, transactional_id

    if partition is None:
        partition, query, batch = _task_context()
        if query is not None:
            write_id, batch_id = query, batch
    warn_if_pure_python()
    first = next(batches, None)
    if first is None:
        return KpaxCommitMessage(rows=0, topics={})
    batches = _chain(first, batches)
    tid = transactional_id(opts.transactional_id_prefix, write_id, partition)
    cfg = producer_config(opts)
    cfg["transactional_id"] = tid
    producer = kpax.Producer(**cfg)
    try:
        producer.init_transactions()  # aborts what an earlier attempt left open
        if batch_id is not None:
            marker = read_marker(admin_for(admin_options(opts.client)), tid)
            if marker is not None and marker.batch >= batch_id:
                rows = sum(b.num_rows for b in batches)
                notes = []
                if marker.batch == batch_id and marker.rows not in (-1, rows):
                    notes.append(
                        f"task {partition}: batch {batch_id} replayed with {rows} rows where "
                        f"the committed one had {marker.rows} (a nondeterministic query?)"
                    )
                    log.warning("kpax spark exactly-once: %s", notes[-1])
                log.info(
                    "kpax spark exactly-once: task %d: batch %d is committed already "
                    "(marker of batch %d): nothing written",
                    partition,
                    batch_id,
                    marker.batch,
                )
                return KpaxCommitMessage(rows=0, topics={}, replayed=True, notes=notes)
        producer.begin_transaction()
        rows, topics, futures = _send_all(producer, opts, batches)
        if batch_id is not None and topics:
            producer.send_offsets_to_transaction(marker_offsets(min(topics), batch_id, rows), tid)
        producer.flush()
        _raise_first_failure(futures)
        identity = producer.aio.identity
        assert identity is not None  # a transactional producer has one
        prepared = PreparedTxn(tid, identity.producer_id, identity.producer_epoch, partition)
    finally:
        producer.close(5.0)  # leaves the transaction open: the driver commits it
    return KpaxCommitMessage(rows=rows, topics=topics, txn=prepared)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def commit_prepared(
    opts: WriteOptions, messages: list[WriterCommitMessage | None], what: str
) -> None:
    """Commit every task's transaction; raise naming the ones that failed."""
    from kpax.spark.txn import end_transactions

    txns = [m.txn for m in messages if isinstance(m, KpaxCommitMessage) and m.txn is not None]
    for m in messages:
        if isinstance(m, KpaxCommitMessage):
            for note in m.notes:
                log.warning("kpax spark exactly-once: %s", note)
    timeout = opts.client.get("transaction_timeout_ms", 60000) / 1000
    failed = end_transactions(opts.client, txns, commit=True, timeout=timeout)
    if failed:
        tid, exc = next(iter(failed.items()))
        raise KafkaError(
            f"kpax exactly-once: committing {what} failed for {len(failed)} of {len(txns)} "
            f"task transaction(s), first {tid!r}: {exc}. The rows of those tasks are not "
            f"visible; restarting the query from its checkpoint writes them again (tasks "
            f"already committed write nothing)"
        )


def abort_prepared(opts: WriteOptions, messages: list[WriterCommitMessage | None]) -> None:
    """Abort the transactions of a failed write (best effort: an abandoned one ends
    at transaction.timeout.ms, or when its task's id is used again)."""
    from kpax.spark.txn import end_transactions

    txns = [m.txn for m in messages if isinstance(m, KpaxCommitMessage) and m.txn is not None]
    failed = end_transactions(opts.client, txns, commit=False, timeout=10.0)
    for tid, exc in failed.items():
        log.warning("kpax spark exactly-once: could not abort %r: %s", tid, exc)


class KpaxBatchWriter(DataSourceArrowWriter):
    @user_errors
    def __init__(self, opts: WriteOptions, schema: Any) -> None:
        check_write_schema(schema, opts)
        self.opts = opts
        #: Names this write's transactions (exactly-once); pickled with the writer.
        self.write_id = str(uuid.uuid4())

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            return write_transactional(self.opts, iterator, self.write_id)
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """At-least-once: every task flushed before its message, the rows are in Kafka.
        Exactly-once: commit every task's transaction."""
        if self.opts.exactly_once:
            commit_prepared(self.opts, messages, "the write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """At-least-once: rows already sent stay in Kafka (as Spark's Kafka sink).
        Exactly-once: abort the tasks' transactions."""
        if self.opts.exactly_once:
            abort_prepared(self.opts, messages)


class KpaxStreamWriter(DataSourceStreamArrowWriter):
    @user_errors
    def __init__(self, opts: WriteOptions, schema: Any) -> None:
        check_write_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            return write_transactional(self.opts, iterator, "")
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once: every task flushed before its message. Exactly-once: commit
        every task's transaction (with it, each task's marker of this batch)."""
        if self.opts.exactly_once:
            commit_prepared(self.opts, messages, f"batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            abort_prepared(self.opts, messages)
