"""What a connection does with bytes it cannot trust: the wrong listener (TLS
where plaintext was configured, SASL or not), bogus 4-byte size prefixes,
responses cut short or trickled, a wrong correlation id.

Each case runs against the real broker: its own listeners, or a relay on
127.0.0.1 that passes requests and responses between kpax and the broker
byte for byte except the one response a test replaces. Memory is measured,
not assumed: peak RSS (VmHWM) of a fresh interpreter for the wrong-listener
cases, the tracemalloc peak for the relay cases."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import kpax
from kpax.broker import BrokerConnection, ConnectionOptions
from kpax.broker.tls import build_ssl_context
from kpax.cluster.cluster import split_address
from kpax.proto.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ProtocolError,
)
from kpax.proto.messages import ApiVersionsRequest, MetadataRequest

pytestmark = pytest.mark.integration

MB = 1024 * 1024
_API_VERSIONS = ApiVersionsRequest.API_KEY
_METADATA = MetadataRequest.API_KEY


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=[], allow_auto_topic_creation=False)


def _first(address: str) -> tuple[str, int]:
    return split_address(address.split(",", maxsplit=1)[0])


# ------------------------------------------------------------------ the wrong listener


async def test_plaintext_connection_on_the_tls_listener_says_so_at_once(kafka):
    host, port = _first(kafka.listener("SSL"))
    for protocol, wanted in (("PLAINTEXT", "SSL"), ("SASL_PLAINTEXT", "SASL_SSL")):
        opts = ConnectionOptions(security_protocol=protocol, sasl_username="u", sasl_password="p")
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            await BrokerConnection.open(host, port, opts)
        assert time.monotonic() - started < 3
        message = str(info.value)
        assert f"this looks like a TLS listener: use security_protocol={wanted}" in message
        assert f"{host}:{port}" in message
        assert "TLS alert record" in message
        assert not info.value.retriable


_RSS_PROBE = r"""
import json, sys, time
import kpax

def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))

bootstrap, topic = sys.argv[1], sys.argv[2]
base = hwm()
attempts = []
for _ in range(3):
    for kind in ("admin", "producer"):
        started = time.monotonic()
        try:
            if kind == "admin":
                with kpax.Admin(bootstrap) as a:
                    a.list_topics()
            else:
                with kpax.Producer(bootstrap, max_block_ms=10000) as p:
                    p.send(topic, b"v").result(timeout=10)
            error = None
        except kpax.KafkaError as exc:
            error = [type(exc).__name__, str(exc)]
        attempts.append({"kind": kind, "seconds": time.monotonic() - started, "error": error})
print(json.dumps({"base": base, "peak": hwm(), "attempts": attempts}))
"""


def test_admin_and_producer_on_the_tls_listener_fail_fast_in_little_memory(kafka):
    host, port = _first(kafka.listener("SSL"))
    # Two bootstrap addresses for the same listener, as a user would list brokers.
    bootstrap = f"{host}:{port},localhost:{port}"
    out = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, bootstrap, "tls-probe"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result["attempts"]) == 6
    for attempt in result["attempts"]:
        assert attempt["error"] is not None, attempt
        name, message = attempt["error"]
        assert name == "AuthenticationError", attempt
        assert "this looks like a TLS listener: use security_protocol=SSL" in message
        assert f":{port}" in message
        assert attempt["seconds"] < 5, attempt
    # Before: a TLS alert read as a 4-byte size made every attempt allocate 336 MiB.
    grown = result["peak"] - result["base"]
    assert grown < 50 * MB, f"peak RSS grew by {grown / MB:.0f} MiB over 6 attempts"


async def test_tls_connection_on_a_plaintext_listener_names_the_likely_mismatch(kafka):
    host, port = _first(kafka.bootstrap)
    opts = ConnectionOptions(
        security_protocol="SSL", ssl_context=build_ssl_context(cafile=kafka.ssl_cafile)
    )
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        await BrokerConnection.open(host, port, opts)
    assert time.monotonic() - started < 5
    assert "TLS handshake" in str(info.value)
    assert "use security_protocol=PLAINTEXT" in str(info.value)


async def test_sasl_connection_on_a_listener_without_sasl_says_so(kafka):
    host, port = _first(kafka.bootstrap)
    opts = ConnectionOptions(
        security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="p"
    )
    with pytest.raises(AuthenticationError) as info:
        await BrokerConnection.open(host, port, opts)
    message = str(info.value)
    assert "ILLEGAL_SASL_STATE" in message
    assert "does not expect SASL: use security_protocol=PLAINTEXT" in message
    assert f"{host}:{port}" in message


async def test_plaintext_connection_on_the_sasl_listener_says_so(kafka):
    host, port = _first(kafka.listener("SASL_PLAINTEXT"))
    # ApiVersions is allowed before authentication: the connection opens...
    conn = await BrokerConnection.open(host, port, ConnectionOptions())
    try:
        # ...and the broker drops it on the first other request.
        with pytest.raises(KafkaConnectionError) as info:
            await conn.request(_metadata())
        message = str(info.value)
        assert "SASL listener" in message
        assert "use security_protocol=SASL_PLAINTEXT" in message
        assert info.value.retriable
    finally:
        conn.close()


# ------------------------------------------------------------------ a relay that lies once

#: Answers one request: (client reader, client writer, correlation id, the request's bytes).
Action = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int, bytes], Awaitable[None]]


class Relay:
    """A TCP server on 127.0.0.1 in front of a real broker: each request is
    passed to the broker and its response back, unless ``lie(api_key)``
    returns an action, which then answers that request instead (and ends the
    connection when it returns)."""

    def __init__(self, broker: tuple[str, int], lie: Callable[[int], Action | None]) -> None:
        self.broker = broker
        self.lie = lie
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Relay:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection(*self.broker)
        try:
            while True:
                head = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", head)[0])
                api_key, _version, correlation_id = struct.unpack_from(">hhi", body)
                action = self.lie(api_key)
                if action is not None:
                    await action(reader, writer, correlation_id, head + body)
                    return
                up_writer.write(head + body)
                size = await up_reader.readexactly(4)
                writer.write(size + await up_reader.readexactly(struct.unpack(">i", size)[0]))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._tasks.discard(task)
            up_writer.close()
            writer.close()


async def _until_client_closes(reader: asyncio.StreamReader) -> None:
    """Keep the connection open: kpax must fail on the bytes, not on an EOF."""
    await asyncio.wait_for(reader.read(), 30)


def send(make: Callable[[int], bytes]) -> Action:
    async def action(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int, request: bytes
    ) -> None:
        writer.write(make(cid))
        await writer.drain()
        await _until_client_closes(reader)

    return action


def send_then_close(make: Callable[[int], bytes]) -> Action:
    async def action(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int, request: bytes
    ) -> None:
        writer.write(make(cid))
        await writer.drain()

    return action


def trickle(size: int, first: int, step: int, every: float) -> Action:
    """A size prefix announcing ``size`` bytes and the right correlation id, then
    ``first`` bytes, then ``step`` bytes every ``every`` seconds."""

    async def action(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int, request: bytes
    ) -> None:
        writer.write(struct.pack(">ii", size, cid) + bytes(first))
        try:
            while not reader.at_eof():
                await asyncio.sleep(every)
                writer.write(bytes(step))
                await writer.drain()
        except ConnectionError:
            pass

    return action


def relay_response_with_correlation_id(
    delta: int, broker: tuple[str, int], seen: list[int]
) -> Action:
    """Pass the request to the broker (on a fresh connection: Kafka needs no
    ApiVersions first) and answer with its real response, the correlation id
    changed by ``delta``; the request's own id goes to ``seen``."""

    async def action(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int, request: bytes
    ) -> None:
        seen.append(cid)
        r, w = await asyncio.open_connection(*broker)
        try:
            w.write(request)
            size = await r.readexactly(4)
            body = bytearray(await r.readexactly(struct.unpack(">i", size)[0]))
        finally:
            w.close()
        struct.pack_into(">i", body, 0, cid + delta)
        writer.write(size + body)
        await writer.drain()
        await _until_client_closes(reader)

    return action


@pytest.fixture
async def relay_to(kafka) -> AsyncIterator[Callable[..., Awaitable[Relay]]]:
    made: list[Relay] = []

    async def make(lie: Callable[[int], Action | None]) -> Relay:
        relay = await Relay(_first(kafka.bootstrap), lie).start()
        made.append(relay)
        return relay

    yield make
    for relay in made:
        await relay.close()


class _Peak:
    """The tracemalloc peak (bytes) over a block."""

    def __enter__(self) -> _Peak:
        tracemalloc.start()
        tracemalloc.reset_peak()
        self.peak = 0
        return self

    def __exit__(self, *exc: object) -> None:
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def _on(api_key: int, action: Action) -> Callable[[int], Action | None]:
    return lambda key: action if key == api_key else None


@pytest.mark.parametrize(
    ("prefix", "size", "why"),
    [
        (b"\x7f\xff\xff\xff", 2147483647, "above max_response_size"),
        (b"\x80\x00\x00\x00", -2147483648, "negative"),
    ],
)
async def test_2gb_size_prefix_fails_at_once_naming_the_size(relay_to, prefix, size, why):
    relay = await relay_to(_on(_METADATA, send(lambda cid: prefix + bytes(64))))
    conn = await BrokerConnection.open("127.0.0.1", relay.port, ConnectionOptions())
    try:
        with _Peak() as mem:
            started = time.monotonic()
            with pytest.raises(ProtocolError) as info:
                await conn.request(_metadata())
            elapsed = time.monotonic() - started
        assert elapsed < 2
        assert mem.peak < 8 * MB
        assert f"bad response size {size}" in str(info.value)
        assert why in str(info.value)
        assert prefix.hex(" ") in str(info.value)
        # A later request on the closed connection keeps the reason.
        with pytest.raises(KafkaConnectionError) as later:
            await conn.request(_metadata())
        assert f"bad response size {size}" in str(later.value)
    finally:
        conn.close()


async def test_bad_size_on_api_versions_reaches_the_bootstrap_error(relay_to):
    relay = await relay_to(_on(_API_VERSIONS, send(lambda cid: b"\x7f\xff\xff\xff" + bytes(8))))
    address = f"127.0.0.1:{relay.port}"
    # A bare connection: the protocol error itself, not "connection is closed".
    with pytest.raises(ProtocolError, match="bad response size 2147483647"):
        await BrokerConnection.open("127.0.0.1", relay.port, ConnectionOptions())
    # A client: the bootstrap error lists the address with that reason.
    started = time.monotonic()
    with pytest.raises(NoBrokersAvailableError) as info:
        async with kpax.aio.Admin(address) as admin:
            await admin.list_topics()
    assert time.monotonic() - started < 5
    assert f"{address}: protocol error on broker {address}: bad response size 2147483647" in str(
        info.value
    )


async def test_400mb_size_prefix_trickled_is_bounded_and_times_out_naming_it(relay_to):
    size = 400 * MB
    relay = await relay_to(
        _on(_METADATA, trickle(size, first=64 * 1024, step=16 * 1024, every=0.02))
    )
    conn = await BrokerConnection.open(
        "127.0.0.1", relay.port, ConnectionOptions(request_timeout_ms=1500)
    )
    try:
        with _Peak() as mem, pytest.raises(KafkaTimeoutError) as info:
            await conn.request(_metadata())
        # Before: the whole 400 MiB at the first byte.
        assert mem.peak < 8 * MB, f"peak {mem.peak / MB:.1f} MiB"
        assert f"of {size} bytes of a response" in str(info.value)
    finally:
        conn.close()


async def test_400mb_size_prefix_then_close_names_what_arrived(relay_to):
    size = 400 * MB
    sent = 3 * MB
    blob = bytearray(struct.pack(">i", size) + bytes(4 + sent))  # built before measuring

    def response(cid: int) -> bytes:
        struct.pack_into(">i", blob, 4, cid)
        return blob

    relay = await relay_to(_on(_METADATA, send_then_close(response)))
    conn = await BrokerConnection.open("127.0.0.1", relay.port, ConnectionOptions())
    try:
        with _Peak() as mem, pytest.raises(KafkaConnectionError) as info:
            await conn.request(_metadata())
        # What arrived plus at most 1 MiB, and what the relay (this process) buffered.
        assert mem.peak < 2 * sent + 4 * MB, f"peak {mem.peak / MB:.1f} MiB"
        assert f"closed the connection after {sent + 4} of {size} bytes of a response" in str(
            info.value
        )
    finally:
        conn.close()


async def test_wrong_correlation_id_is_named(kafka, relay_to):
    broker = _first(kafka.bootstrap)
    seen: list[int] = []
    relay = await relay_to(_on(_METADATA, relay_response_with_correlation_id(1000, broker, seen)))
    conn = await BrokerConnection.open("127.0.0.1", relay.port, ConnectionOptions())
    try:
        version = conn.pick_version(MetadataRequest)
        with pytest.raises(ProtocolError) as info:
            await conn.request(_metadata())
        (cid,) = seen
        assert str(info.value).startswith(
            f"protocol error on broker 127.0.0.1:{relay.port}: response correlation id "
            f"{cid + 1000} does not match the oldest request in flight "
            f"(Metadata v{version}, correlation id {cid})"
        )
        with pytest.raises(KafkaConnectionError, match="does not match"):
            await conn.request(_metadata())
    finally:
        conn.close()


async def test_wrong_correlation_id_on_a_large_frame_fails_before_allocating(relay_to):
    relay = await relay_to(
        _on(_METADATA, send(lambda cid: struct.pack(">ii", 400 * MB, cid + 7) + bytes(1024)))
    )
    conn = await BrokerConnection.open("127.0.0.1", relay.port, ConnectionOptions())
    try:
        with _Peak() as mem:
            started = time.monotonic()
            with pytest.raises(ProtocolError, match="does not match the oldest request") as info:
                await conn.request(_metadata())
            assert time.monotonic() - started < 2
        assert mem.peak < 4 * MB
        assert "Metadata v" in str(info.value)
    finally:
        conn.close()


def test_large_responses_still_arrive_whole(kafka, topic):
    """A Fetch response above the scratch buffer and above one growth step
    arrives whole through the growing buffer (records are views of it)."""
    topic = topic()
    value = os.urandom(700 * 1024)
    with kpax.Producer(kafka.bootstrap) as producer:
        for _ in range(5):
            producer.send(topic, value, partition=0)
        producer.flush()
    consumer = kpax.Consumer(
        kafka.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=16 * MB,
        fetch_max_bytes=16 * MB,
    )
    try:
        consumer.assign([kpax.TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(bytes(r.value) for r in consumer.poll(timeout=1.0))
        assert got == [value] * 5
    finally:
        consumer.close()
