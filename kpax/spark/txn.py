"""The exactly-once sink's transactions: task side (prepare) and driver side (commit).

Role: a write task with ``deliveryGuarantee=exactly-once`` writes its rows in a
Kafka transaction of its own (transactional id ``<prefix>-<query id>-<task's
partition>``) together with a *marker*, the batch id committed as an offset of
the consumer group named like the transactional id (TxnOffsetCommit, in the
same transaction), flushes, and hands the driver its transactional id,
producer id and epoch without committing (:func:`prepare`). The driver commits
every task's transaction with EndTxn when Spark commits the micro-batch
(:func:`end_transactions`); a failed batch's transactions are aborted.

Replays: a task first registers its transactional id (InitProducerId, which
aborts what an earlier attempt left open: never committed, so never visible),
then reads its marker (OffsetFetch, require_stable). When the marker says this
batch or a later one is committed -- Spark replays a batch whose commit log
entry is missing although the sink committed it -- the task writes nothing.
A read_committed reader sees each row once whatever is killed when, provided
a replayed batch gives each task the same rows (Spark's replay of the same
offsets through the same plan does; a nondeterministic query does not: a row
count that differs is logged).

Imports: kpax (Producer, Admin), kpax.cluster, kpax.proto (EndTxn), kpax.config,
kpax.spark.options, kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kpax.errors import KafkaError
from kpax.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger("kpax.spark")

__all__ = ["Marker", "PreparedTxn", "end_transactions", "read_marker", "transactional_id"]

#: The marker's metadata names its writer (a group offset with other metadata is not ours).
MARKER_TAG = "kpax-spark-eos"


@dataclass(frozen=True)
class PreparedTxn:
    """A task's flushed, uncommitted transaction: what EndTxn needs."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition: int


@dataclass(frozen=True)
class Marker:
    """The last batch committed under a transactional id, and how many rows it wrote."""

    batch: int
    rows: int


def transactional_id(prefix: str, query_id: str, partition: int) -> str:
    return f"{prefix}-{query_id}-{partition}"


def marker_offsets(topic: str, batch: int, rows: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """The marker a task commits in its transaction: offset = batch id of partition 0 of
    a topic it wrote (an offset commit must name an existing partition)."""
    meta = json.dumps({"tag": MARKER_TAG, "batch": batch, "rows": rows})
    return {TopicPartition(topic, 0): OffsetAndMetadata(batch, meta)}


def read_marker(admin: Any, group: str) -> Marker | None:
    """The newest marker of ``group`` (a transactional id), or None. Call after
    InitProducerId, which ends any transaction of the id still open, so the
    stable offsets are there to read."""
    offsets = admin.list_group_offsets(group, require_stable=True)
    best: Marker | None = None
    for om in offsets.values():
        try:
            meta = json.loads(om.metadata or "{}")
        except ValueError:
            continue
        if not isinstance(meta, dict) or meta.get("tag") != MARKER_TAG:
            continue
        marker = Marker(int(meta.get("batch", om.offset)), int(meta.get("rows", -1)))
        if best is None or marker.batch > best.batch:
            best = marker
    return best


def end_transactions(
    client: dict[str, Any], txns: Sequence[PreparedTxn], *, commit: bool, timeout: float
) -> dict[str, KafkaError]:
    """EndTxn for each prepared transaction, all at once, from a process that did not
    open them (the driver): the transactional id, producer id and epoch are all the
    coordinator asks for. Returns the failures by transactional id (empty: all
    ended). Retriable errors and CONCURRENT_TRANSACTIONS are retried until
    ``timeout``; a second EndTxn of a transaction already ended the same way
    succeeds, so a retried commit is harmless."""
    if not txns:
        return {}
    return asyncio.run(_end_all(client, txns, commit, timeout))


async def _end_all(
    client: dict[str, Any], txns: Sequence[PreparedTxn], commit: bool, timeout: float
) -> dict[str, KafkaError]:
    from kpax.admin.base import ADMIN_OPTIONS
    from kpax.cluster.cluster import TRANSACTION, Cluster
    from kpax.cluster.request_path import RequestPath, RetryPolicy, ToCoordinator
    from kpax.config import resolve
    from kpax.proto.error_codes import ConcurrentTransactionsError
    from kpax.proto.errors import error_for_code
    from kpax.proto.messages import EndTxnRequest
    from kpax.spark.options import admin_options

    cfg = resolve("admin", ADMIN_OPTIONS, admin_options(client))
    cluster = Cluster.from_config(cfg, allow_auto_topic_creation=False)
    path = RequestPath(cluster, RetryPolicy(cfg["retry_backoff_ms"], cfg["retry_backoff_max_ms"]))
    failures: dict[str, KafkaError] = {}
    action = "commit" if commit else "abort"

    def retry(error: KafkaError, _deadline: Any) -> bool:
        return error.retriable or isinstance(error, ConcurrentTransactionsError)

    async def one(t: PreparedTxn) -> None:
        async def send(broker: Any) -> None:
            resp = await broker.request(
                EndTxnRequest(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    producer_epoch=t.producer_epoch,
                    committed=commit,
                )
            )
            if resp.error_code:
                raise error_for_code(resp.error_code)(
                    f"EndTxn ({action}) of transactional id {t.transactional_id!r} (task "
                    f"{t.partition}, producer {t.producer_id} epoch {t.producer_epoch}) on "
                    f"{broker.describe()}"
                )

        try:
            await path.call(
                f"EndTxn ({action}) of {t.transactional_id!r}",
                ToCoordinator(t.transactional_id, TRANSACTION),
                send,
                timeout=timeout,
                retry=retry,
            )
        except KafkaError as exc:
            failures[t.transactional_id] = exc

    try:
        await cluster.start()
        started = time.monotonic()
        await asyncio.gather(*(one(t) for t in txns))
        log.info(
            "kpax spark: %s of %d transaction(s) took %.0f ms",
            action,
            len(txns),
            (time.monotonic() - started) * 1000,
        )
    finally:
        await cluster.close()
    return failures
