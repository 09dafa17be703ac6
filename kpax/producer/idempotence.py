"""Producer identity for idempotent delivery: InitProducerId and epoch bumps.

Role: :class:`ProducerIdentity` holds the producer id and epoch every
idempotent batch carries, gets them from any broker with InitProducerId
(retrying retriable errors until a deadline), and bumps the epoch (KIP-360:
InitProducerId with the current id and epoch) when the sender decides the
sequence state of a partition is broken (OUT_OF_ORDER_SEQUENCE_NUMBER or
UNKNOWN_PRODUCER_ID on the first unacknowledged batch). After a bump every
partition's sequence restarts at 0 and the sender re-sequences the unsent
batches with :func:`kpax.proto.records.rewrite_producer_state`.

This is also the slot where the transaction manager (a later release) goes:
it will own a ``transactional_id``, find the transaction coordinator and call
InitProducerId there; the sender only asks this object for (id, epoch).

Imports: kpax.cluster (cluster, request_path), kpax.broker, kpax.proto, the standard library.
"""

from __future__ import annotations

import asyncio
import logging

from kpax.broker.broker import Broker
from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import ANY_BROKER, RequestPath, RetryPolicy
from kpax.proto.errors import KafkaError, KafkaTimeoutError, error_for_code
from kpax.proto.messages import InitProducerIdRequest

log = logging.getLogger("kpax.producer")

__all__ = ["ProducerIdentity"]


class ProducerIdentity:
    """Producer id and epoch (idempotent producer; see the module docstring)."""

    def __init__(
        self, cluster: Cluster, *, retry_backoff_ms: int, retry_backoff_max_ms: int
    ) -> None:
        self.cluster = cluster
        self.producer_id = -1
        self.producer_epoch = -1
        #: The one request path (any broker, retries, deadline).
        self.requests = RequestPath(cluster, RetryPolicy(retry_backoff_ms, retry_backoff_max_ms))
        self._lock: asyncio.Lock | None = None
        #: Set by the sender when sequences must be reset with a new epoch.
        self.bump_needed = False
        self.bumps = 0
        #: The broker of the latest InitProducerId attempt, and how it failed (None:
        #: no answer yet): what a close that found no producer id names.
        self.asking: Broker | None = None
        self.asking_error: KafkaError | None = None

    @property
    def ready(self) -> bool:
        return self.producer_id >= 0

    def set(self, producer_id: int, producer_epoch: int) -> None:
        """Adopt an id and epoch obtained elsewhere (the transaction coordinator)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.bump_needed = False

    async def ensure(self, timeout: float) -> None:
        """Get a producer id (once)."""
        if self.producer_id >= 0:
            return
        await self._init(timeout, bump=False)

    async def bump(self, timeout: float) -> None:
        """Bump the epoch (or get a new id if the broker says so)."""
        await self._init(timeout, bump=True)
        self.bump_needed = False
        self.bumps += 1

    async def _init(self, timeout: float, *, bump: bool) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not bump and self.producer_id >= 0:
                return
            try:
                await self.requests.call(
                    "InitProducerId",
                    ANY_BROKER,
                    lambda broker: self._attempt(broker, bump),
                    timeout=timeout,
                    cut=False,
                )
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, KafkaTimeoutError):
                    raise
                raise KafkaTimeoutError(
                    f"InitProducerId did not succeed within {timeout:g}s: {exc.message}"
                ) from exc

    async def _attempt(self, broker: Broker, bump: bool) -> None:
        version = await broker.api_version(InitProducerIdRequest)
        pid, epoch = (self.producer_id, self.producer_epoch) if bump and version >= 3 else (-1, -1)
        req = InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout_ms=2147483647,
            producer_id=pid,
            producer_epoch=epoch,
        )
        self.asking, self.asking_error = broker, None
        try:
            resp = await broker.request(req, version=version)
        except KafkaError as exc:
            self.asking_error = exc
            raise
        if resp.error_code:
            raise error_for_code(resp.error_code)(f"InitProducerId on {broker.describe()}")
        if bump:
            log.info(
                "producer id %d epoch %d -> id %d epoch %d",
                self.producer_id,
                self.producer_epoch,
                resp.producer_id,
                resp.producer_epoch,
            )
        self.producer_id = resp.producer_id
        self.producer_epoch = resp.producer_epoch
