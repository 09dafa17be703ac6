"""What a handler gets and gives back: the request context, answers, deferred answers.

Role: the types between :class:`~kpax.testing.fake.cluster.FakeCluster` and the
handler modules (which import this module, never the cluster, so there is no
import cycle).

- :class:`Answer`: the fake's answer to one request frame: a response frame
  (size prefix excluded), no frame (``acks=0``), or a closed connection; it
  may be pending (a long-poll Fetch, a JoinGroup waiting for the other
  members) and may be held back until ``ready_at`` (an injected delay).
- :class:`Deferred`: the handle with which a handler or a group completes a
  pending answer later.
- :class:`Ctx`: the request's context: the cluster, the broker (node id) and
  connection it came on, its header and version, the time, and the fault that
  matched it (:meth:`Ctx.forced` tells a handler which partitions to refuse).
- :class:`Waiter`: a pending answer the cluster re-checks after every change
  and at its deadline (the long-poll Fetch).

Imports: kpax.testing.fake.{codes,faults,frames}, kpax.proto.api and the standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kpax.proto.api import Response
from kpax.testing.fake import codes
from kpax.testing.fake.faults import Fault
from kpax.testing.fake.frames import RequestHeader, encode_response

if TYPE_CHECKING:
    from kpax.testing.fake.cluster import FakeCluster

__all__ = ["DEFERRED", "Answer", "Ctx", "Deferred", "Waiter"]


class Answer:
    """The answer to one request (see the module docstring)."""

    __slots__ = ("api", "close", "frame", "ready_at", "resolved")

    def __init__(self, api: str = "") -> None:
        self.api = api
        #: The response frame, None for no response (acks=0) or a close.
        self.frame: bytes | None = None
        #: The connection is closed instead of answering.
        self.close = False
        self.resolved = False
        #: Not sent before this time (ms): an injected delay.
        self.ready_at = 0

    def ready(self, now_ms: int) -> bool:
        return self.resolved and now_ms >= self.ready_at

    def set(self, frame: bytes | None) -> None:
        self.frame = frame
        self.resolved = True

    def set_close(self) -> None:
        self.frame = None
        self.close = True
        self.resolved = True

    def __repr__(self) -> str:
        what = "close" if self.close else ("pending" if not self.resolved else "ready")
        return f"Answer({self.api}, {what})"


class Deferred:
    """Completes a pending :class:`Answer` with a response object."""

    __slots__ = ("answer", "close_after", "conn_id", "header", "notify", "version")

    def __init__(
        self,
        answer: Answer,
        header: RequestHeader,
        version: int,
        conn_id: int = 0,
        notify: Callable[[int], None] | None = None,
    ) -> None:
        self.answer = answer
        self.header = header
        self.version = version
        self.conn_id = conn_id
        #: Told the connection id once the answer is ready (the cluster pumps it).
        self.notify = notify
        #: An injected "drop after": the connection closes instead of answering.
        self.close_after = False

    @property
    def done(self) -> bool:
        return self.answer.resolved

    def resolve(self, response: Response | Any) -> None:
        if self.answer.resolved:
            return
        if self.close_after:
            self.answer.set_close()
        else:
            self.answer.set(encode_response(self.header, response, self.version))
        if self.notify is not None:
            self.notify(self.conn_id)


class _DeferredMarker:
    def __repr__(self) -> str:
        return "DEFERRED"


#: A handler's return value when it answers later (through ``ctx.defer()``).
DEFERRED: Any = _DeferredMarker()


@dataclass
class Ctx:
    """The context of one request (see the module docstring)."""

    cluster: FakeCluster
    node_id: int
    conn_id: int
    header: RequestHeader
    version: int
    now_ms: int
    fault: Fault | None = None
    deferred: Deferred | None = None
    _answer: Answer | None = None

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def forced(self, topic: str | None = None, partition: int | None = None) -> int | None:
        """The error code an injected fault forces on this topic/partition (or on
        the whole request when both are None), else None."""
        f = self.fault
        if f is None or f.error is None:
            return None
        if f.topic is not None and topic is not None and f.topic != topic:
            return None
        if f.partition is not None and partition is not None and f.partition != partition:
            return None
        return f.error

    def coordinator_error(self, key_type: int, key: str) -> int:
        """NOT_COORDINATOR when this broker does not coordinate ``key`` (0 group, 1
        transaction), COORDINATOR_NOT_AVAILABLE when no broker can, else NONE."""
        node = self.cluster.state.coordinator(key_type, key)
        if node < 0:
            return codes.COORDINATOR_NOT_AVAILABLE
        return codes.NONE if node == self.node_id else codes.NOT_COORDINATOR

    def defer(self) -> Deferred:
        """Answer later: the handler returns :data:`DEFERRED` and resolves this."""
        assert self._answer is not None
        d = Deferred(self._answer, self.header, self.version, self.conn_id, self.cluster.mark_ready)
        self.deferred = d
        return d


class Waiter:
    """A pending answer re-checked after every change and at ``deadline_ms``:
    ``poll(now_ms, final)`` returns the response once it is due (always when
    ``final``), else None."""

    __slots__ = ("conn_id", "deadline_ms", "deferred", "poll")

    def __init__(
        self,
        deferred: Deferred,
        conn_id: int,
        deadline_ms: int,
        poll: Callable[[int, bool], Response | Any | None],
    ) -> None:
        self.deferred = deferred
        self.conn_id = conn_id
        self.deadline_ms = deadline_ms
        self.poll = poll
