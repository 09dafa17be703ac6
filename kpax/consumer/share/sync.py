"""``kpax.ShareConsumer``: the blocking face of the asyncio share consumer.

Role: the asyncio core runs on a :class:`~kpax.loop_thread.LoopThread`;
``poll`` hands one call to the loop per batch of records (never one per
record). ``acknowledge`` is checked on the caller's thread (so a wrong call
raises there) and kept there; the acknowledgements made since the last call
travel to the loop with the next ``poll``, ``commit``, ``commit_async``,
``unsubscribe`` or ``close`` (one hop for the whole batch), or at once for a
RENEW (its lock is running out). The
acknowledgement commit callback runs on the caller's thread, inside
``poll``, ``commit`` and ``close``, as in the Java client.

Iteration (``for rec in consumer``) hands each poll's records out one by one
from a list iterator on the caller's thread (no per-record work added); where
it stopped (how many it handed out) travels with the next call in the same
hop, to :meth:`AsyncShareConsumer._iterated`: the records it moved past count
as processed, the last one handed out is in the application's hand, and the
ones never handed out go back to the buffer.

Not for polling from several threads at once (neither is Java's).

Imports: kpax.consumer.share.*, kpax.consumer.record, kpax.sync_face, kpax.structs,
kpax.proto.errors.
"""

from __future__ import annotations

import logging
import operator
from collections import deque
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.consumer.record import ShareConsumerRecord
from kpax.consumer.share.acks import AcknowledgeType
from kpax.consumer.share.client import AckCallback, AsyncShareConsumer
from kpax.consumer.share.options import ShareConsumerConfig
from kpax.proto.errors import IllegalStateError, KafkaError
from kpax.structs import TopicPartition
from kpax.sync_face import SyncFace

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

log = logging.getLogger("kpax.share")

__all__ = ["ShareConsumer"]

T = TypeVar("T")


class ShareConsumer(SyncFace):
    """``kpax.ShareConsumer("host:9092", group_id="workers")``: a member of a share
    group (KIP-932). ``subscribe([...])``, then ``poll(timeout)`` (a list of
    :class:`~kpax.ShareConsumerRecord`) or ``for rec in consumer``; in explicit
    mode ``acknowledge(record, AcknowledgeType.X)`` each. A context manager."""

    _call_what = "share consumer call"
    _closed_text = "the share consumer is closed"
    _client_name = "kpax.ShareConsumer"

    def __init__(
        self,
        *topics: str,
        **config: Unpack[ShareConsumerConfig],
    ) -> None:
        names: list[Any] = list(topics)
        options: dict[str, Any] = dict(config)
        bootstrap_servers = options.pop("bootstrap_servers", None)  # (given as a keyword)
        if names and isinstance(names[0], Mapping):
            options = {**names.pop(0), **options}  # confluent-kafka's Consumer(conf) shape
        if bootstrap_servers is None and names and (":" in names[0] or "," in names[0]):
            bootstrap_servers = names.pop(0)
        core = self._core = AsyncShareConsumer(bootstrap_servers, **options)
        settings = core.settings
        margin = 5.0 + settings.request_timeout
        super().__init__("kpax-share-consumer", settings.api_timeout, margin)
        self._callback: AckCallback | None = None
        #: Acknowledgements made on the caller's thread, not yet handed to the loop.
        self._acks: list[tuple[TopicPartition, int, AcknowledgeType]] = []
        self._acked: set[tuple[TopicPartition, int]] = set()
        #: ``for rec in consumer``: the iterator over the last poll's records, their number.
        self._cursor: tuple[Iterator[ShareConsumerRecord], int] | None = None
        self._start(
            core.start(), margin + 30, "share consumer start", lambda: core.close(5.0), 10.0
        )
        if names:
            try:
                self.subscribe(names)
            except BaseException:
                self.close(5.0)
                raise

    def _unreferenced_close(self) -> Coroutine[Any, Any, Any]:
        return self._with_acks(self._core.close())

    @property
    def aio(self) -> AsyncShareConsumer:
        """The asyncio core (for use on this consumer's own loop only)."""
        return self._core

    def _sync(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)

        return self._run(run())

    def _with_acks(
        self, coro: Coroutine[Any, Any, T], *, closing: bool = False
    ) -> Coroutine[Any, Any, T]:
        """``coro``, run on the loop after the core learnt where this face's iterator
        stopped and the acknowledgements made so far are applied."""
        acks, self._acks = self._acks, []
        self._acked.clear()
        handed = self._take_cursor(closing)
        if not acks and handed is None:
            return coro
        core = self._core

        async def run() -> T:
            if handed is not None:
                core._iterated(handed)
            for tp, off, kind in acks:
                core._apply_acknowledge(tp, off, kind)
            return await coro

        return run()

    def _take_cursor(self, closing: bool) -> int | None:
        """How many of the last poll's records this face's iterator handed out, if
        the core needs to know (it stopped part-way, or the consumer closes: the
        last one handed out is in the application's hand); that batch ends for
        the iterator."""
        cursor, self._cursor = self._cursor, None
        if cursor is None:
            return None
        it, count = cursor
        left = operator.length_hint(it)
        if left:
            deque(it, maxlen=0)  # a suspended ``for`` must not hand them out now
        elif not closing:
            return None  # all handed out: the next poll or commit accepts them all
        return count - left

    def _run_callbacks(self) -> None:
        callback = self._callback
        if callback is None:
            return
        for offsets, err in self._core._take_ack_results():
            try:
                callback(offsets, err)
            except Exception:  # the application's own failure: logged
                log.exception("acknowledgement commit callback failed")

    # ------------------------------------------------------------ API

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group, reading ``topics``."""
        self._sync(self._core.subscribe, topics)

    def unsubscribe(self) -> None:
        """Leave the share group (acknowledgements are sent first)."""
        self._run(self._with_acks(self._core.unsubscribe()))

    def subscription(self) -> set[str]:
        """The topics subscribed to."""
        return self._core.subscription()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group gives this member now (other members may
        share them).
        """
        return self._core.assignment()

    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long acquired records stay locked (ms), as the brokers last said."""
        return self._core.acquisition_lock_timeout_ms()

    def poll(self, timeout: float = 0.0) -> list[ShareConsumerRecord]:
        """Records acquired for this member (at most ``max_poll_records``), waiting up
        to ``timeout`` seconds for the first; [] when none came."""
        try:
            return self._run(
                self._with_acks(self._core.poll(timeout, run_callbacks=False)), timeout
            )
        finally:
            self._run_callbacks()

    def __iter__(self) -> Iterator[ShareConsumerRecord]:
        if self._forked:
            raise self._closed_error("iteration")
        while not self._closed:
            records = self.poll(1.0)
            if not records:
                continue
            it = iter(records)
            self._cursor = (it, len(records))
            yield from it  # one by one: see _take_cursor

    def acknowledge(
        self,
        record: ShareConsumerRecord | str,
        partition: int | Any = None,
        offset: int | None = None,
        type: AcknowledgeType | str | int = AcknowledgeType.ACCEPT,
    ) -> None:
        """Acknowledge a record the last poll returned (explicit mode):
        ``acknowledge(record, AcknowledgeType.REJECT)`` or
        ``acknowledge(topic, partition, offset, type)``."""
        if self._closed:
            raise self._closed_error("acknowledge")
        tp, off, kind = self._core._check_acknowledge(record, partition, offset, type)
        key = (tp, off)
        if key in self._acked:
            raise IllegalStateError(f"record {tp}@{off} is already acknowledged")
        if kind is AcknowledgeType.RENEW:  # its lock is running out: send it now
            self._thread.loop.call_soon_threadsafe(self._core._apply_acknowledge, tp, off, kind)
            return
        self._acked.add(key)
        self._acks.append((tp, off, kind))

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        """``callback(offsets, error)`` for every acknowledgement result, run on the
        thread calling poll, commit or close."""
        self._callback = callback
        core = self._core

        def collect() -> None:
            core.collect_ack_results = callback is not None
            if callback is None:
                core._take_ack_results()

        self._sync(collect)

    def commit(self, timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements made so far (implicit mode: accept what the last
        poll returned first; in a ``for`` loop, what it has handed out, the record in
        hand included) and wait for the answers: ``{TopicPartition: None or the
        error}``."""
        try:
            return self._run(
                self._with_acks(self._core.commit(timeout, run_callbacks=False)), timeout
            )
        finally:
            self._run_callbacks()

    def commit_async(self) -> None:
        """Send the acknowledgements made so far; results reach the callback."""

        async def run() -> None:
            self._core.commit_async()

        self._run(self._with_acks(run()))

    def close(self, timeout: float = 30.0) -> None:
        """Accept only what the application finished with (implicit mode: the records
        the iterator moved past; explicit mode: what it acknowledged), release the
        rest (the record in hand, the last poll's records, whatever was acquired and
        not handed out), close the share sessions and leave the group, within
        ``timeout`` seconds. Call :meth:`commit` first to accept the last poll's
        records (implicit mode)."""
        try:
            self._close_once(
                self._with_acks(self._core.close(timeout), closing=True),
                timeout + 2.0,
                "share consumer close",
            )
        finally:
            self._run_callbacks()
