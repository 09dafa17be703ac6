"""The bodies of the producer's transaction methods.

Role: what :meth:`AsyncProducer.init_transactions
<kpax.producer.client.AsyncProducer.init_transactions>`, ``transaction()``,
``send_offsets_to_transaction``, ``commit_transaction`` and
``abort_transaction`` do around the transaction state machine
(:class:`~kpax.producer.transactions.TransactionManager`): refuse them on a
producer without ``transactional_id``, flush before a commit, drop unsent
records before an abort, restart the partitions' sequences at a new epoch.

Imports: kpax.producer.{accumulator,transactions}, kpax.proto.errors, kpax.structs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from kpax.producer.accumulator import Accumulator
from kpax.producer.transactions import TransactionAbortedError, TransactionManager
from kpax.proto.errors import IllegalStateError, KafkaError
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kpax.producer.client import AsyncProducer

log = logging.getLogger("kpax.producer")


def manager(p: AsyncProducer, action: str) -> TransactionManager:
    """The producer's transaction manager; IllegalStateError without ``transactional_id``."""
    if p.txn is None:
        raise IllegalStateError(
            f"cannot {action}: the producer has no transactional_id (set one to use transactions)"
        )
    return p.txn


def restart_sequences(accumulator: Accumulator) -> None:
    """A new producer epoch: every partition's sequence starts again at 0
    (called between transactions, when nothing of this producer is pending)."""
    queues = accumulator.all_queues()  # takes the (non-reentrant) lock itself
    with accumulator.lock:
        accumulator.saved_sequences.clear()
        for pq in queues:
            pq.sequence.reset()


async def init(p: AsyncProducer, timeout: float | None) -> None:
    """``init_transactions``."""
    txn = manager(p, "init transactions")
    if not p._started:
        await p.start()
    await txn.init(p._max_block if timeout is None else timeout)


@contextlib.asynccontextmanager
async def transaction(p: AsyncProducer, timeout: float | None) -> AsyncIterator[AsyncProducer]:
    """``transaction()``: begin; commit at the end of the block, abort when an
    exception leaves it or the commit fails."""
    p.begin_transaction()
    try:
        yield p
    except BaseException:
        await abort_quietly(p, timeout)
        raise
    try:
        await p.commit_transaction(timeout)
    except KafkaError:
        await abort_quietly(p, timeout)
        raise


async def abort_quietly(p: AsyncProducer, timeout: float | None) -> None:
    """Abort the open transaction after a failure; the failure is what the
    caller sees, so an abort that fails too (a fenced producer) is logged."""
    try:
        await p.abort_transaction(timeout)
    except Exception as exc:
        log.warning("aborting the transaction after an error failed too: %s", exc)


async def send_offsets(
    p: AsyncProducer,
    offsets: Mapping[Any, int | OffsetAndMetadata],
    group_metadata: ConsumerGroupMetadata | str,
    timeout: float | None,
) -> None:
    """``send_offsets_to_transaction``."""
    txn = manager(p, "send offsets to a transaction")
    group = (
        ConsumerGroupMetadata(group_metadata) if isinstance(group_metadata, str) else group_metadata
    )
    tps = {TopicPartition(*tp): o for tp, o in offsets.items()}
    await txn.send_offsets(tps, group, p._max_block if timeout is None else timeout)


async def commit(p: AsyncProducer, timeout: float | None) -> None:
    """``commit_transaction``: flush, then commit."""
    txn = manager(p, "commit a transaction")
    limit = p._max_block if timeout is None else timeout
    await txn.end(True, lambda: p.flush(limit), limit)


async def abort(p: AsyncProducer, timeout: float | None) -> None:
    """``abort_transaction``: fail the unsent records, wait for those in flight, abort."""
    txn = manager(p, "abort a transaction")
    limit = p._max_block if timeout is None else timeout

    async def drain() -> None:
        p.sender._fail_unsent(
            TransactionAbortedError(f"the transaction of {txn.transactional_id!r} was aborted")
        )
        try:
            await p.flush(limit)
        except KafkaError:
            pass  # in-flight batches of an aborted transaction may fail; that is the point

    await txn.end(False, drain, limit)
