"""The transaction coordinator: producer ids, epochs, transactions and their markers.

Role: the state behind InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn and TxnOffsetCommit (handlers in :mod:`kpax.testing.fake.txn_api`).
Transactions complete at once (no PrepareCommit / PrepareAbort phase visible):
EndTxn writes a control batch (COMMIT or ABORT marker) to every partition of
the transaction, applies or drops its staged group offsets and closes it.

- InitProducerId without a transactional id: a new producer id (epoch 0), or
  (v3+, KIP-360) the same id with the next epoch when the caller names its id
  and current epoch. With one: a new id for a new transactional id; else the
  next epoch (a new id when the epoch would overflow), aborting an open
  transaction first (its markers carry the new epoch, so the older producer's
  late batches are fenced in every partition).
- A wrong producer id: INVALID_PRODUCER_ID_MAPPING; an old epoch:
  PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for versions older than the one that
  introduced it).
- Transactions v2 (KIP-890, broker config ``transaction.version`` 2, the
  default; Produce v12+, TxnOffsetCommit v5+, EndTxn v5+): a transactional
  Produce adds its partition and TxnOffsetCommit its group; every EndTxn bumps
  the epoch (answered with the new epoch), and its retry with the previous epoch
  gets the same answer. Transactions v1: a transactional batch to a partition
  not added gets INVALID_TXN_STATE.
- A transaction open longer than its timeout is aborted (epoch bumped).

Imports: kpax.testing.fake.codes and the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["Transactions", "Txn"]

EMPTY, ONGOING, COMMITTED, ABORTED = "Empty", "Ongoing", "CompleteCommit", "CompleteAbort"
_MAX_EPOCH = 32767


@dataclass
class Txn:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started_ms: int = 0
    previous_epoch: int = -1
    previous_producer_id: int = -1


class Transactions:
    """Every transactional id of the cluster."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.txns: dict[str, Txn] = {}

    @property
    def v2(self) -> bool:
        return self.cluster.state.conf_int("transaction.version") >= 2

    def init_producer_id(
        self,
        txn_id: str | None,
        timeout_ms: int,
        *,
        producer_id: int,
        epoch: int,
        fenced: int,
        now: int,
    ) -> tuple[int, int]:
        """(producer id, epoch); ApiError on a refusal."""
        cluster = self.cluster
        if not txn_id:
            if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
                return producer_id, epoch + 1
            return cluster.new_producer_id(), 0
        max_timeout = cluster.state.conf_int("transaction.max.timeout.ms")
        if not 0 < timeout_ms <= max_timeout:
            raise ApiError(
                codes.INVALID_TRANSACTION_TIMEOUT,
                f"transaction timeout {timeout_ms} not in (0, {max_timeout}]",
            )
        txn = self.txns.get(txn_id)
        if txn is None:
            txn = self.txns[txn_id] = Txn(txn_id, cluster.new_producer_id(), 0, timeout_ms)
            return txn.producer_id, txn.epoch
        if producer_id >= 0:
            if producer_id not in (txn.producer_id, txn.previous_producer_id):
                raise ApiError(codes.INVALID_PRODUCER_ID_MAPPING)
            if epoch not in (txn.epoch, txn.previous_epoch):
                raise ApiError(fenced, f"epoch {epoch}, the current is {txn.epoch}")
        self._bump(txn)
        if txn.state == ONGOING:
            self._complete(txn, commit=False, now=now)
        txn.timeout_ms = timeout_ms
        txn.state = EMPTY
        return txn.producer_id, txn.epoch

    def _bump(self, txn: Txn) -> None:
        txn.previous_epoch, txn.previous_producer_id = txn.epoch, txn.producer_id
        if txn.epoch + 1 >= _MAX_EPOCH:
            txn.producer_id, txn.epoch = self.cluster.new_producer_id(), 0
        else:
            txn.epoch += 1

    def _check(self, txn_id: str, producer_id: int, epoch: int, fenced: int) -> Txn:
        txn = self.txns.get(txn_id)
        if txn is None or producer_id != txn.producer_id:
            raise ApiError(
                codes.INVALID_PRODUCER_ID_MAPPING, f"producer id {producer_id} is not {txn_id!r}'s"
            )
        if epoch != txn.epoch:
            raise ApiError(fenced, f"epoch {epoch}, the current is {txn.epoch}")
        return txn

    def _start(self, txn: Txn, now: int) -> None:
        if txn.state != ONGOING:
            txn.state = ONGOING
            txn.started_ms = now
            txn.partitions.clear()
            txn.groups.clear()

    def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        *,
        tps: list[tuple[str, int]],
        fenced: int,
        now: int,
    ) -> dict[tuple[str, int], int]:
        txn = self._check(txn_id, producer_id, epoch, fenced)
        state = self.cluster.state
        unknown = {tp for tp in tps if state.partition(*tp) is None}
        if unknown:
            return {
                tp: codes.UNKNOWN_TOPIC_OR_PARTITION
                if tp in unknown
                else codes.OPERATION_NOT_ATTEMPTED
                for tp in tps
            }
        self._start(txn, now)
        txn.partitions.update(tps)
        return dict.fromkeys(tps, codes.NONE)

    def add_offsets(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        *,
        group: str,
        fenced: int,
        now: int,
    ) -> None:
        txn = self._check(txn_id, producer_id, epoch, fenced)
        self._start(txn, now)
        txn.groups.add(group)

    def end_txn(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        *,
        commit: bool,
        v2: bool,
        fenced: int,
        now: int,
    ) -> tuple[int, int]:
        """(producer id, epoch) after EndTxn; ApiError on a refusal."""
        txn = self.txns.get(txn_id)
        if txn is None:
            raise ApiError(codes.INVALID_PRODUCER_ID_MAPPING, f"no transactional id {txn_id!r}")
        done = COMMITTED if commit else ABORTED
        if (
            v2
            and txn.state == done
            and (producer_id, epoch)
            == (
                txn.previous_producer_id,
                txn.previous_epoch,
            )
        ):
            return txn.producer_id, txn.epoch  # a retry of the EndTxn that bumped the epoch
        txn = self._check(txn_id, producer_id, epoch, fenced)
        if txn.state != ONGOING:
            if txn.state == done and not v2:
                return txn.producer_id, txn.epoch  # a retry
            # Transactions v2: an abort with nothing added to the transaction on the
            # broker (its first batch failed) ends it with an epoch bump, as Kafka 4's
            # coordinator does from Empty, CompleteCommit and CompleteAbort.
            if not (v2 and (txn.state == EMPTY or not commit)):
                raise ApiError(
                    codes.INVALID_TXN_STATE, f"{txn_id!r} is {txn.state}, not in a transaction"
                )
        if v2:
            self._bump(txn)
        self._complete(txn, commit, now)
        return txn.producer_id, txn.epoch

    def _complete(self, txn: Txn, commit: bool, now: int) -> None:
        state = self.cluster.state
        pid, epoch = txn.producer_id, txn.epoch
        if txn.previous_producer_id not in (-1, pid):  # the epoch overflowed: a new id
            pid, epoch = txn.previous_producer_id, txn.previous_epoch
        for topic, index in sorted(txn.partitions):
            p = state.partition(topic, index)
            if p is None:
                continue
            p.log.append_marker(
                pid, epoch, commit, coordinator_epoch=0, leader_epoch=p.leader_epoch, now_ms=now
            )
        for group in sorted(txn.groups):
            self.cluster.offsets.end_txn(group, pid, commit)
        txn.partitions.clear()
        txn.groups.clear()
        txn.state = COMMITTED if commit else ABORTED

    def check_produce(
        self,
        txn_id: str | None,
        producer_id: int,
        epoch: int,
        *,
        topic: str,
        partition: int,
        produce_version: int,
        now: int,
    ) -> int | None:
        """The error a transactional batch gets before it is written, else None."""
        if txn_id is None:
            return codes.INVALID_REQUEST if producer_id >= 0 else None
        txn = self.txns.get(txn_id)
        if txn is None or producer_id != txn.producer_id:
            return codes.INVALID_PRODUCER_ID_MAPPING
        if epoch < txn.epoch:
            return codes.INVALID_PRODUCER_EPOCH
        if epoch > txn.epoch:
            return codes.INVALID_PRODUCER_EPOCH
        if (topic, partition) in txn.partitions and txn.state == ONGOING:
            return None
        if self.v2 and produce_version >= 12:
            self._start(txn, now)
            txn.partitions.add((topic, partition))
            return None
        return codes.INVALID_TXN_STATE

    def check_offsets(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        *,
        group: str,
        v2: bool,
        fenced: int,
        now: int,
    ) -> None:
        """TxnOffsetCommit's producer check (ApiError); v2 adds the group."""
        txn = self._check(txn_id, producer_id, epoch, fenced)
        if v2 or group not in txn.groups:
            self._start(txn, now)
            txn.groups.add(group)

    # ------------------------------------------------------------ time

    def tick(self, now: int) -> None:
        for txn in self.txns.values():
            if txn.state == ONGOING and now >= txn.started_ms + txn.timeout_ms:
                self._bump(txn)
                self._complete(txn, commit=False, now=now)

    def next_deadline(self) -> int | None:
        times = [t.started_ms + t.timeout_ms for t in self.txns.values() if t.state == ONGOING]
        return min(times) if times else None
