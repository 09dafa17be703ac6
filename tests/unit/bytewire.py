"""Playing the broker on a connection's byte stream, for the unit tests that
drive kpax's state machines with plain bytes (test_*_bytes.py).

``Wire`` is the connection's transport (keeps what is written); ``attach``
gives a cluster's broker handle such a connection; ``ScriptedBroker`` reads
the request frames written, decodes them with the generated classes and feeds
back the frames of the responses its handlers return; ``group_consumer`` is a
consumer group member wired to such a broker.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kpax.broker.broker import Broker
from kpax.broker.connection import BrokerConnection
from kpax.broker.options import ConnectionOptions
from kpax.cluster.metadata import snapshot_from_response
from kpax.consumer.client import AsyncConsumer
from kpax.proto.messages import (
    REQUESTS,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

MR = MetadataResponse


def metadata_response(*topics: str) -> Any:
    """Broker 1 (127.0.0.1:9, which refuses a real connection at once) leading
    the one partition of each of ``topics`` (those named ``__...`` internal)."""
    return MR(
        brokers=[MR.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9)],
        cluster_id="c",
        controller_id=1,
        topics=[
            MR.MetadataResponseTopic(
                name=topic,
                is_internal=topic.startswith("__"),
                partitions=[
                    MR.MetadataResponsePartition(
                        partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
            for topic in topics
        ],
    )


def find_coordinator_response(key: str) -> Any:
    """Broker 1 coordinates ``key``."""
    c = FindCoordinatorResponse.Coordinator(key=key, node_id=1, host="127.0.0.1", port=9)
    return FindCoordinatorResponse(coordinators=[c])


#: ``handler(request, version) -> response`` (a generated response object).
Handler = Callable[[Any, int], Any]


class Wire(asyncio.Transport):
    """The connection's transport: keeps what is written, answers nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def requests(self) -> list[tuple[int, int, int]]:
        """(api key, version, correlation id) of every frame written so far."""
        out = []
        for frame in self.written:
            size, key, version, corr = struct.unpack_from(">ihhi", frame)
            assert size == len(frame) - 4
            out.append((key, version, corr))
        return out


def connection(
    options: ConnectionOptions, versions: dict[int, tuple[int, int]]
) -> tuple[BrokerConnection, Wire]:
    """An open connection to broker 1 over a Wire, speaking ``versions``."""
    conn = BrokerConnection("127.0.0.1", 9, options, node_id=1)
    wire = Wire()
    conn.connection_made(wire)
    conn.api_versions = dict(versions)
    return conn, wire


def attach(
    handle: Broker, options: ConnectionOptions, versions: dict[int, tuple[int, int]]
) -> tuple[BrokerConnection, Wire]:
    """Give a cluster's broker handle a Wire connection (as if it were open)."""
    conn, wire = connection(options, versions)
    handle._conn = conn
    return conn, wire


def feed(conn: BrokerConnection, correlation_id: int, body: bytes, flexible: bool) -> None:
    """One response frame into the connection, as the socket would deliver it."""
    frame = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"") + body
    data = struct.pack(">i", len(frame)) + frame
    buf = conn.get_buffer(len(data))
    buf[: len(data)] = data
    del buf
    conn.buffer_updated(len(data))


def decode_request(frame: bytes) -> tuple[int, int, int, Any]:
    """(api key, version, correlation id, request object) of a request frame."""
    _, key, version, corr = struct.unpack_from(">ihhi", frame)
    cls = REQUESTS[key]
    (clen,) = struct.unpack_from(">h", frame, 12)
    pos = 14 + max(clen, 0) + (1 if cls.is_flexible(version) else 0)
    return key, version, corr, cls.decode(memoryview(frame)[pos:], version)


class ScriptedBroker:
    """The broker's side of one connection: each request is answered with
    ``handlers[api_key](request, version)``; a handler returning None leaves
    that request unanswered."""

    def __init__(self, wire: Wire, conn: BrokerConnection, handlers: dict[int, Handler]) -> None:
        self.wire, self.conn, self.handlers = wire, conn, handlers
        self.seen = 0
        self.log: list[str] = []

    def pump(self) -> None:
        while self.seen < len(self.wire.written):
            frame = self.wire.written[self.seen]
            self.seen += 1
            key, version, corr, request = decode_request(frame)
            cls = REQUESTS[key]
            self.log.append(cls.API_NAME)
            response = self.handlers[key](request, version)
            if response is not None:
                feed(self.conn, corr, bytes(response.encode(version)), cls.is_flexible(version))


async def serve(brokers: list[ScriptedBroker], done: Callable[[], bool]) -> None:
    """Answer the brokers' requests until ``done()`` (fails after ~3 s)."""
    for _ in range(3000):
        for b in brokers:
            b.pump()
        if done():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"not done; brokers saw {[b.log for b in brokers]}")


async def group_consumer(
    group: str,
    topics: list[str],
    versions: dict[int, tuple[int, int]],
    handlers: dict[int, Handler],
    *,
    on_metadata: Callable[[Any], None] | None = None,
    **config: Any,
) -> tuple[AsyncConsumer, ScriptedBroker]:
    """A started AsyncConsumer of ``group`` (fast retries, no auto commit) whose
    cluster is broker 1, on a scripted connection speaking ``versions``: it knows
    ``topics``, and broker 1 coordinates the group. FindCoordinator and Metadata
    are answered (``on_metadata(request)`` sees each Metadata request); the
    rest by ``handlers``."""
    c = AsyncConsumer(
        "127.0.0.1:9",
        group_id=group,
        enable_auto_commit=False,
        retry_backoff_ms=1,
        retry_backoff_max_ms=5,
        default_api_timeout_ms=2000,
        **config,
    )
    cluster = c.cluster
    cluster._adopt(snapshot_from_response(metadata_response(*topics), None, None))
    cluster._started = True
    conn, wire = attach(
        cluster.broker(1),
        cluster.options,
        {FindCoordinatorRequest.API_KEY: (0, 4), MetadataRequest.API_KEY: (0, 12), **versions},
    )
    await c.start()

    def metadata(request: Any, version: int) -> Any:
        if on_metadata is not None:
            on_metadata(request)
        return metadata_response(*topics)

    base: dict[int, Handler] = {
        FindCoordinatorRequest.API_KEY: lambda request, version: find_coordinator_response(group),
        MetadataRequest.API_KEY: metadata,
    }
    return c, ScriptedBroker(wire, conn, {**base, **handlers})
