"""Transactions: the producer's transaction manager (``transactional_id``).

Role: the state machine behind ``init_transactions``, ``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction`` and
``abort_transaction``, and the requests they need: InitProducerId at the
transaction coordinator (which also fences older producers with the same
``transactional_id`` and aborts their open transaction), AddPartitionsToTxn
before the first batch to a partition in a transaction, AddOffsetsToTxn and
TxnOffsetCommit for consume-transform-produce, EndTxn to commit or abort.

The sender asks :meth:`TransactionManager.may_send` before producing a
partition's batch in a transaction; the manager adds new partitions to the
transaction in the background and wakes the sender when they are in.

Transactions v2 (KIP-890 part 2): when the coordinator reports the cluster's
``transaction.version`` at 2 or more (ApiVersions' finalized features, read at
``init``) and speaks Produce v12+, TxnOffsetCommit v5+ and EndTxn v5+, there is
no AddPartitionsToTxn and no AddOffsetsToTxn: the first Produce to a partition
and the TxnOffsetCommit add them to the transaction on the broker, and every
EndTxn bumps the producer epoch. :attr:`TransactionManager.v2` says which path
is in use; on older clusters (``transaction.version`` 1, or Kafka 3.x) it is
the add-first path above.

The states and their transitions are one table in the sans-I/O core,
:mod:`kpax.producer.txn_state` (:class:`TxnMachine`): UNINITIALIZED -> READY
(init) -> IN_TRANSACTION (begin) -> READY (commit/abort). A failed send puts
the transaction in ABORTABLE_ERROR (only abort is allowed); PRODUCER_FENCED /
INVALID_PRODUCER_EPOCH / TRANSACTIONAL_ID_AUTHORIZATION_FAILED are FATAL:
every later call raises the same error (:class:`ProducerFencedError` for a
zombie). A commit or abort that failed on a retriable error (a timeout) may be
called again: it resumes.

Imports: kpax.cluster (cluster, request_path), kpax.broker, kpax.producer (idempotence, txn_state),
kpax.proto, kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP, TRANSACTION, Cluster
from kpax.cluster.request_path import Deadline, RequestPath, RetryPolicy, ToCoordinator
from kpax.producer.idempotence import ProducerIdentity
from kpax.producer.txn_state import TxnEvent, TxnMachine, TxnState
from kpax.proto.error_codes import ConcurrentTransactionsError, ProducerFencedError
from kpax.proto.error_families import (
    PRODUCER_FENCED_ERRORS,
    STALE_GENERATION_ERRORS,
    TXN_FATAL_ERRORS,
    TXN_RETRY_ERRORS,
    code_in,
)
from kpax.proto.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    TransactionAbortedError,
    error_for_code,
)
from kpax.proto.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

log = logging.getLogger("kpax.producer")

__all__ = ["ConsumerGroupMetadata", "TransactionAbortedError", "TransactionManager", "TxnState"]

# TxnOffsetCommit v6 (Kafka 4.4, KIP-1319) names topics by id only; kpax sends names,
# as its OffsetCommit does (v9 at most), so it stays at v5.
_TXN_OFFSET_COMMIT_MAX = 5


async def _speaks_v2(broker: Broker) -> bool:
    """Whether transactions v2 (KIP-890 part 2) can be used through ``broker``: the
    cluster's ``transaction.version`` is 2+ and the broker speaks the versions that
    carry it (Produce v12, TxnOffsetCommit v5, EndTxn v5)."""
    if await broker.feature_level("transaction.version") < 2:
        return False
    return (
        await broker.api_version(ProduceRequest) >= 12
        and await broker.api_version(TxnOffsetCommitRequest) >= 5
        and await broker.api_version(EndTxnRequest) >= 5
    )


def _txn_retriable(error: KafkaError, deadline: Deadline | None = None) -> bool:
    """Resend on a retriable error or CONCURRENT_TRANSACTIONS (the coordinator is
    still ending the previous transaction); never on a fatal one."""
    if isinstance(error, TXN_FATAL_ERRORS):
        return False
    return error.retriable or isinstance(error, ConcurrentTransactionsError)


class TransactionManager:
    """Transaction state and coordinator requests of one transactional producer."""

    def __init__(
        self,
        cluster: Cluster,
        identity: ProducerIdentity,
        transactional_id: str,
        *,
        transaction_timeout_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        wake_sender: Callable[[], None],
        on_new_epoch: Callable[[], None],
    ) -> None:
        self.cluster = cluster
        self.identity = identity
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout = request_timeout_ms / 1000
        self._backoff = (retry_backoff_ms, retry_backoff_max_ms)
        #: The one request path (coordinators, retries, deadline).
        self.requests = RequestPath(cluster, RetryPolicy(retry_backoff_ms, retry_backoff_max_ms))
        self._wake_sender = wake_sender
        self._on_new_epoch = on_new_epoch
        #: The state and the error that put it there: the sans-I/O core (kpax.producer.txn_state).
        self.machine = TxnMachine(self._describe())
        self._added: set[TopicPartition] = set()
        self._pending: set[TopicPartition] = set()
        self._adding: asyncio.Task[None] | None = None
        #: The EndTxn of a commit or abort under way (a call that timed out and is
        #: made again waits for it instead of sending another).
        self._ending: asyncio.Future[None] | None = None
        #: The coordinator knows of this transaction (partitions or offsets were added).
        self._open_on_broker = False
        #: Transactions v2 (KIP-890): partitions and offsets join a transaction
        #: implicitly (see the module docstring). Decided at ``init``.
        self.v2 = False
        #: A batch of the transaction failed: its sequence numbers may never have
        #: reached the broker (no answer came), so the abort bumps the epoch
        #: (KIP-360), which restarts every partition's sequences, as the Java
        #: client does. (Transactions v2 bump it at every EndTxn.)
        self.bump_at_abort = False

    # ------------------------------------------------------------ state checks

    def _describe(self) -> str:
        return f"transactional id {self.transactional_id!r}"

    @property
    def state(self) -> TxnState:
        return self.machine.state

    @property
    def _error(self) -> KafkaError | None:
        return self.machine.error

    @property
    def in_transaction(self) -> bool:
        return self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
            TxnState.ABORTING,
            TxnState.ABORTABLE_ERROR,
        )

    @property
    def blocking_error(self) -> KafkaError | None:
        """The error every batch of the transaction now fails with (or None)."""
        if self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL):
            return self._error
        return None

    def check_send(self) -> None:
        """``send`` is allowed only inside a transaction."""
        if self.machine.state is TxnState.IN_TRANSACTION:
            return
        self.machine.check(TxnEvent.SEND)

    def fail(self, error: KafkaError) -> None:
        """The transaction failed: fatal if fenced, else abortable."""
        if isinstance(error, TXN_FATAL_ERRORS):
            self._fatal(error)
        else:
            self.machine.fire(TxnEvent.FAILED, error)

    def batch_failed(self, error: KafkaError) -> None:
        """A batch of the transaction failed: :meth:`fail`, and the abort is to
        bump the epoch (``bump_at_abort``)."""
        if not isinstance(error, TXN_FATAL_ERRORS):
            self.bump_at_abort = True
        self.fail(error)

    def _fatal(self, error: KafkaError) -> None:
        if isinstance(error, PRODUCER_FENCED_ERRORS):
            fenced = ProducerFencedError(
                f"{self._describe()} was fenced: another producer with the same "
                "transactional id started (or the transaction timed out)"
            )
            fenced.__cause__ = error
            error = fenced
        self.machine.fire(TxnEvent.FATAL, error)

    # ------------------------------------------------------------ coordinator requests

    async def _call(  # noqa: PLR0917
        self,
        what: str,
        build: Callable[[], Any],
        key_type: int,
        key: str,
        deadline: float,
        max_version: int | None = None,
    ) -> Any:
        """Send a coordinator request until it succeeds, retrying retriable errors
        (and CONCURRENT_TRANSACTIONS) until ``deadline``, through the one request
        path; returns the response."""

        async def send(broker: Broker) -> Any:
            resp = await broker.request(build(), max_version=max_version)
            code = getattr(resp, "error_code", 0)
            if code:
                raise error_for_code(code)(f"{what} for {self._describe()} on {broker.describe()}")
            return resp

        return await self._coordinator_call(what, ToCoordinator(key, key_type), send, deadline)

    async def _coordinator_call(
        self,
        what: str,
        route: ToCoordinator,
        send: Callable[[Broker], Awaitable[Any]],
        deadline: float,
        *,
        fails_transaction: bool = False,
    ) -> Any:
        """``send(broker)`` on ``route`` until it succeeds, through the one request
        path: a fatal transaction error fails the producer; retriable ones (and
        CONCURRENT_TRANSACTIONS) are resent until ``deadline``. Then, with
        ``fails_transaction``, the last error fails the transaction and is
        raised; else a retriable one becomes a KafkaTimeoutError."""
        try:
            return await self.requests.call(
                what,
                route,
                send,
                timeout=max(deadline - time.monotonic(), 0.001),
                retry=_txn_retriable,
                cut=False,
            )
        except KafkaError as exc:
            if isinstance(exc, TXN_FATAL_ERRORS):
                self._fatal(exc)
                assert self._error is not None
                raise self._error from None
            if fails_transaction:
                self.fail(exc)
                raise
            if _txn_retriable(exc) and not isinstance(exc, KafkaTimeoutError):
                raise KafkaTimeoutError(
                    f"{what} for {self._describe()} did not succeed in time: {exc.message}"
                ) from None
            raise

    async def init(self, timeout: float) -> None:
        """InitProducerId at the coordinator: fences older producers with this id
        and aborts their open transaction."""
        self.machine.fire(TxnEvent.INIT)
        deadline = time.monotonic() + timeout

        async def send(broker: Broker) -> tuple[Any, bool]:
            resp = await broker.request(
                InitProducerIdRequest(
                    transactional_id=self.transactional_id,
                    transaction_timeout_ms=self.transaction_timeout_ms,
                )
            )
            if resp.error_code:
                raise error_for_code(resp.error_code)(
                    f"InitProducerId for {self._describe()} on {broker.describe()}"
                )
            return resp, await _speaks_v2(broker)

        try:
            resp, v2 = await self._coordinator_call(
                "InitProducerId", ToCoordinator(self.transactional_id, TRANSACTION), send, deadline
            )
        except BaseException:
            if self.state is TxnState.INITIALIZING:  # (not FATAL: that stays)
                self.machine.fire(TxnEvent.INIT_FAILED)
            raise
        self.v2 = v2
        self.identity.set(resp.producer_id, resp.producer_epoch)
        self.machine.fire(TxnEvent.INITIALIZED)

    async def _bump_epoch(self) -> None:
        """KIP-360: InitProducerId with this producer's id and epoch, after an
        abort, gives it the next epoch (or PRODUCER_FENCED if another producer
        took the transactional id over); sequences restart with it."""
        deadline = time.monotonic() + max(self.transaction_timeout_ms / 1000, self.request_timeout)
        identity = self.identity
        old = (identity.producer_id, identity.producer_epoch)

        async def send(broker: Broker) -> Any:
            if await broker.api_version(InitProducerIdRequest) < 3:
                raise IllegalStateError(
                    f"{self._describe()}: a batch of the aborted transaction failed, so "
                    f"sequence numbers may have a gap, and {broker.describe()} cannot bump "
                    "the producer epoch (InitProducerId v3, Kafka 2.5+): close this "
                    "producer and start a new one"
                )
            resp = await broker.request(
                InitProducerIdRequest(
                    transactional_id=self.transactional_id,
                    transaction_timeout_ms=self.transaction_timeout_ms,
                    producer_id=old[0],
                    producer_epoch=old[1],
                )
            )
            if resp.error_code:
                raise error_for_code(resp.error_code)(
                    f"InitProducerId (epoch bump) for {self._describe()} on {broker.describe()}"
                )
            return resp

        try:
            resp = await self._coordinator_call(
                "InitProducerId", ToCoordinator(self.transactional_id, TRANSACTION), send, deadline
            )
        except IllegalStateError as exc:
            self._fatal(exc)
            raise
        identity.set(resp.producer_id, resp.producer_epoch)
        self._on_new_epoch()
        self.bump_at_abort = False
        log.info(
            "%s: producer id %d epoch %d -> id %d epoch %d after a failed batch (sequences "
            "restart)",
            self._describe(),
            *old,
            resp.producer_id,
            resp.producer_epoch,
        )

    def begin(self) -> None:
        self.machine.fire(TxnEvent.BEGIN)
        self._added.clear()
        self._pending.clear()
        self._open_on_broker = False

    # ------------------------------------------------------------ partitions

    def may_send(self, tp: TopicPartition) -> bool:
        """True once ``tp`` is part of the transaction; otherwise schedule adding it."""
        if tp in self._added:
            return True
        if self.state is TxnState.FATAL or self.state is TxnState.ABORTABLE_ERROR:
            return False
        if self.v2:  # the Produce request adds it (KIP-890)
            self._added.add(tp)
            self._open_on_broker = True
            return True
        self._pending.add(tp)
        if self._adding is None or self._adding.done():
            self._adding = asyncio.ensure_future(self._add_partitions())
        return False

    async def _add_partitions(self) -> None:
        while self._pending and self.state not in (TxnState.FATAL, TxnState.ABORTABLE_ERROR):
            batch = sorted(self._pending)
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in batch:
                by_topic[tp.topic].append(tp.partition)
            topics = [
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ]
            try:
                resp = await self._call(
                    "AddPartitionsToTxn",
                    lambda topics=topics: AddPartitionsToTxnRequest(  # type: ignore[misc]
                        v3_and_below_transactional_id=self.transactional_id,
                        v3_and_below_producer_id=self.identity.producer_id,
                        v3_and_below_producer_epoch=self.identity.producer_epoch,
                        v3_and_below_topics=topics,
                    ),
                    TRANSACTION,
                    self.transactional_id,
                    time.monotonic() + self.transaction_timeout_ms / 1000,
                    max_version=3,  # v4+ is the brokers' own (verification) form
                )
            except KafkaError as exc:
                self.fail(exc)
                self._wake_sender()
                return
            retry = False
            for t in resp.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    tp = TopicPartition(t.name, p.partition_index)
                    code = p.partition_error_code
                    if not code:
                        self._added.add(tp)
                        self._pending.discard(tp)
                        self._open_on_broker = True
                    elif code_in(code, TXN_RETRY_ERRORS) or error_for_code(code).retriable:
                        retry = True
                    else:
                        self.fail(
                            error_for_code(code)(
                                f"adding {tp} to the transaction of {self._describe()}"
                            )
                        )
                        self._wake_sender()
                        return
            self._wake_sender()
            if retry:
                await asyncio.sleep(self._backoff[0] / 1000)

    # ------------------------------------------------------------ offsets

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: ConsumerGroupMetadata,
        timeout: float,
    ) -> None:
        """Commit consumed offsets as part of the transaction."""
        self.machine.check(TxnEvent.SEND_OFFSETS)
        deadline = time.monotonic() + timeout
        if not self.v2:  # (v2: TxnOffsetCommit adds the offsets, KIP-890)
            await self._add_offsets(group, deadline)
        self._open_on_broker = True
        await self._commit_offsets(offsets, group, deadline)

    async def _add_offsets(self, group: ConsumerGroupMetadata, deadline: float) -> None:
        await self._call(
            "AddOffsetsToTxn",
            lambda: AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.identity.producer_id,
                producer_epoch=self.identity.producer_epoch,
                group_id=group.group_id,
            ),
            TRANSACTION,
            self.transactional_id,
            deadline,
        )

    async def _commit_offsets(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: ConsumerGroupMetadata,
        deadline: float,
    ) -> None:
        by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = (
            defaultdict(list)
        )
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            by_topic[tp[0]].append(
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=tp[1],
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        request = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=self.identity.producer_id,
            producer_epoch=self.identity.producer_epoch,
            generation_id_or_member_epoch=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )

        async def send(broker: Broker) -> None:
            resp = await broker.request(request, max_version=_TXN_OFFSET_COMMIT_MAX)
            codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            if codes:
                code = min(codes)
                why = ""
                if code_in(code, STALE_GENERATION_ERRORS):
                    why = (
                        f" (generation {group.generation_id}, member {group.member_id!r}): the "
                        "group rebalanced after the consumer handed these records out, and "
                        "their partitions may be another member's now; abort the transaction, "
                        "seek to the committed offsets and poll again"
                    )
                raise error_for_code(code)(
                    f"TxnOffsetCommit of group {group.group_id!r} for {self._describe()} on "
                    f"{broker.describe()}{why}"
                )

        await self._coordinator_call(
            "TxnOffsetCommit",
            ToCoordinator(group.group_id, GROUP),
            send,
            deadline,
            fails_transaction=True,
        )

    # ------------------------------------------------------------ ending

    async def end(self, commit: bool, flush: Callable[[], Any], timeout: float) -> None:
        """Commit (after every batch of the transaction is acknowledged) or abort
        (after unsent batches are dropped and in-flight ones answered), waiting at
        most ``timeout`` seconds. Past it a KafkaTimeoutError says the outcome is
        not known yet; calling the same method again resumes (as in the Java
        client): it flushes what is left and waits for the EndTxn already sent."""
        self.machine.fire(TxnEvent.COMMIT if commit else TxnEvent.ABORT)
        deadline = time.monotonic() + timeout
        try:
            await flush()
        except KafkaTimeoutError:
            raise  # batches still in flight: the call may be made again
        except KafkaError as exc:
            self.fail(exc)  # committing: only abort is left; aborting: abort again
            raise
        if self.state is TxnState.FATAL:
            assert self._error is not None
            raise self._error
        if commit and self.state is TxnState.ABORTABLE_ERROR:
            assert self._error is not None
            raise self._error
        ending = self._ending
        if ending is None:
            ending = self._ending = asyncio.ensure_future(self._end_on_broker(commit))
            # (retrieved even if no call waits for it any more: the producer closed)
            ending.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            await asyncio.wait_for(asyncio.shield(ending), max(deadline - time.monotonic(), 0.001))
        except asyncio.TimeoutError:
            call = "commit_transaction()" if commit else "abort_transaction()"
            raise KafkaTimeoutError(
                f"EndTxn ({'commit' if commit else 'abort'}) for {self._describe()} not "
                f"answered within {timeout:g}s: the coordinator may still complete it; call "
                f"{call} again to wait for the outcome"
            ) from None
        finally:
            if ending.done():
                self._ending = None

    async def _end_on_broker(self, commit: bool) -> None:
        """EndTxn, once per commit or abort however often the call is made (its
        retries bounded by the transaction timeout, after which the coordinator
        aborts the transaction itself)."""
        if self._adding is not None and not self._adding.done():
            self._adding.cancel()
        if self._open_on_broker:
            resp = await self._call(
                "EndTxn",
                lambda: EndTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=self.identity.producer_id,
                    producer_epoch=self.identity.producer_epoch,
                    committed=commit,
                ),
                TRANSACTION,
                self.transactional_id,
                time.monotonic() + max(self.transaction_timeout_ms / 1000, self.request_timeout),
            )
            if getattr(resp, "producer_epoch", -1) >= 0 and resp.producer_id >= 0:
                # KIP-890 (transaction version 2): the coordinator bumps the epoch at
                # the end of every transaction; sequences restart with it.
                self.identity.set(resp.producer_id, resp.producer_epoch)
                self._on_new_epoch()
                self.bump_at_abort = False
        if not commit and self.bump_at_abort:
            await self._bump_epoch()
        self._added.clear()
        self._pending.clear()
        self._open_on_broker = False
        self.machine.fire(TxnEvent.ENDED)
