"""One TCP (or TLS) connection to one broker, pipelined and non-blocking.

Role: the kpax broker interface in Python terms, ``await conn.request(req)``,
or ``conn.submit(req)`` for a future without a coroutine (the producer's hot
path, which also passes its own frame encoder and response decoder). Any
number of concurrent callers share the connection. Requests wait in one FIFO
queue and are written, each with the next correlation id, as soon as nothing
holds them back -- ``max_in_flight`` unanswered requests, a full write buffer
(``pause_writing``), re-authentication (only SASL requests pass then) -- so
they reach the wire in call order; responses come back in the same order and
are matched against the oldest request in flight (a mismatch is a
:class:`ProtocolError` that closes the connection). Requests that expect no
response (Produce with acks=0) are written and forgotten. One timer per
connection watches the request timeouts (armed for the earliest deadline),
not one per request.

On open: TCP (+TLS), ApiVersions (the highest version first, with client
software name and version; falling back when the broker answers
UNSUPPORTED_VERSION), then SASL if configured (both in
:mod:`kpax.broker.handshake`). Each request then uses the
highest version both sides support, or fails with :class:`UnsupportedApiError`
naming the API and both ranges.

Failure semantics: a request that times out fails with
:class:`KafkaTimeoutError` and closes the connection (as the Java client
does, since the broker may still answer it later); when the connection
breaks, every request in flight fails at once with a retriable
:class:`KafkaConnectionError` naming the broker. Reconnecting is the job of
:class:`kpax.broker.broker.Broker`.

Receiving uses ``asyncio.BufferedProtocol`` over the sans-I/O
:class:`kpax.proto.framing.ResponseReader`, which cuts the frames, gives a
large one (a Fetch response) a buffer of its own that the socket fills
directly (never more than what has arrived plus 1 MiB), and matches each
frame to the oldest request in flight; this class only decodes and delivers.
On the loop of a sync face (:func:`kpax.loop_thread.runs_background_loop`), a
plaintext connection reads the rest of a large frame itself, in C with the GIL
released (``_speedups.recv_rest``), while the bytes keep coming (for at most
:data:`READ_REST_BUDGET_US`): there the application thread holds the GIL, and
the loop's thread would wait for it after every readable event (up to the 5 ms
switch interval each time; a 6 MiB Fetch response arrives in some 35 reads).

Wrong listener: the first bytes a PLAINTEXT or SASL_PLAINTEXT connection reads
are checked for a TLS record header (``0x14``-``0x17``, ``0x03``, ``0x00``-``0x04``),
which a TLS listener sends back (an alert) to a Kafka request; that fails the
connection at once with an :class:`AuthenticationError` saying it looks like
a TLS listener and which ``security_protocol`` to use. A TLS handshake cut off
by the peer, a SaslHandshake refused with ILLEGAL_SASL_STATE, and a connection
closed right after ApiVersions while SASL is off (what a SASL listener does to
a client that does not authenticate) name the likely mismatch too. A bad size,
a wrong correlation id or a connection cut in the middle of a response is
named in the error that every request in flight fails with, and in the error
of any later request on the closed connection.

Imports: kpax.proto, kpax.broker.{handshake,options}, kpax.loop_thread, the
standard library.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import random
import ssl
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from kpax.broker.handshake import authenticate, negotiate_versions, sasl_step
from kpax.broker.options import ConnectionOptions
from kpax.loop_thread import runs_background_loop
from kpax.proto.accel import speedups
from kpax.proto.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedApiError,
)
from kpax.proto.framing import ResponseReader, TlsRecordSeen
from kpax.proto.header import decode_response, encode_request
from kpax.proto.messages import (
    ApiVersionsRequest,
)

log = logging.getLogger("kpax.broker")

_NEVER = float("inf")

#: The longest a connection reads the rest of a large frame by itself (the loop's
#: other work waits meanwhile), and the longest it waits for more bytes.
READ_REST_BUDGET_US = 20_000
READ_REST_IDLE_US = 1_000
_RECV_REST: Callable[[int, bytearray, int, int, int, int], tuple[int, int]] | None = getattr(
    speedups, "recv_rest", None
)

R = TypeVar("R")


class _InFlight:
    """One request: queued until it may be written, then in flight until answered."""

    __slots__ = (
        "api_key",
        "bypass_gate",
        "correlation_id",
        "deadline",
        "decode",
        "encode",
        "expect_response",
        "future",
        "request",
        "request_name",
        "sent",
        "timeout",
        "version",
    )

    def __init__(  # noqa: PLR0917  (positional: one per request)
        self,
        api_key: int,
        version: int,
        request_name: str,
        future: asyncio.Future[Any],
        request: Any,
        encode: Callable[[int], bytes] | None,
        decode: Callable[[bytes | bytearray], Any] | None,
        timeout: float,
        expect_response: bool,
        bypass_gate: bool,
    ) -> None:
        self.correlation_id = -1
        self.api_key = api_key
        self.version = version
        self.request_name = request_name
        self.future = future
        self.request = request  # dropped once encoded
        self.encode = encode
        self.decode = decode
        self.timeout = timeout
        self.expect_response = expect_response
        self.bypass_gate = bypass_gate
        self.deadline = _NEVER  # loop time by which the answer is due (while in flight)
        self.sent = 0.0  # time.monotonic() when written (request-latency)


class BrokerConnection(asyncio.BufferedProtocol):
    """A single connection. Create with :meth:`open`; never reused after close."""

    def __init__(
        self,
        host: str,
        port: int,
        options: ConnectionOptions,
        *,
        node_id: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.options = options
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: The cluster's finalized feature levels the broker reported in ApiVersions
        #: (v3+), e.g. ``{"transaction.version": 2}``; empty before, or from older brokers.
        self.finalized_features: dict[str, int] = {}
        #: Completed SASL authentications on this connection (1 + re-authentications).
        self.authentications = 0
        self.last_activity = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._next_id = random.randint(0, 1 << 20)
        self._max_in_flight = options.max_in_flight
        # Requests not written yet, in call order; ``_urgent`` holds those that
        # pass the authentication gate (SASL during re-authentication).
        self._queue: collections.deque[_InFlight] = collections.deque()
        self._urgent: collections.deque[_InFlight] = collections.deque()
        self._closed: BaseException | None = None
        self._closed_event = asyncio.Event()
        self._write_ready = asyncio.Event()
        self._write_ready.set()
        self._gate = asyncio.Event()  # closed while (re-)authenticating
        self._gate.set()
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._timeout_at = _NEVER
        self._reauth_task: asyncio.Task[None] | None = None
        self._drained = asyncio.Event()  # set whenever nothing is in flight
        self._drained.set()
        # receive state: the sans-I/O reader cuts frames and matches them to requests
        self._reader: ResponseReader[_InFlight] = ResponseReader(
            options.max_response_size, detect_tls=not options.uses_tls
        )
        self._in_flight = self._reader.in_flight
        #: The socket a large frame's rest is read from directly (None: the transport's reads).
        self._direct_fd: int | None = None
        self._past_api_versions = False  # answered anything but ApiVersions
        #: The client's connection metrics (None: not counted); counted once opened.
        self._metrics = options.metrics
        self._counted = False

    # ------------------------------------------------------------ naming

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        return describe_broker(self.node_id, self.address)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # ------------------------------------------------------------ opening

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        options: ConnectionOptions,
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
    ) -> BrokerConnection:
        """Connect, negotiate API versions and authenticate; fail within
        ``socket_connection_setup_timeout_ms`` (+ request timeout for the handshake).

        With both ``node_id`` and ``cluster_id`` (what the metadata says of the
        broker at this address), a broker that speaks ApiVersions v5 (Kafka 4.4+,
        KIP-1242) checks them and answers REBOOTSTRAP_REQUIRED when it is another
        node or cluster: :class:`~kpax.errors.BrokerIdentityError`."""
        conn = cls(host, port, options, node_id=node_id)
        loop = asyncio.get_running_loop()
        timeout = options.socket_connection_setup_timeout_ms / 1000
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: conn,
                    host,
                    port,
                    ssl=options.ssl_context if options.uses_tls else None,
                    server_hostname=host if options.uses_tls else None,
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise KafkaConnectionError(
                f"connecting to {conn.describe()} timed out after {timeout:g}s"
            ) from None
        except ssl.SSLError as exc:
            raise AuthenticationError(
                f"TLS handshake with {conn.describe()} failed: {exc.reason or exc}"
            ) from None
        except OSError as exc:
            reason = _os_reason(exc)
            if options.uses_tls and isinstance(
                exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
            ):
                # A Kafka plaintext listener reads the ClientHello as a huge
                # size prefix and drops the connection.
                plain = "SASL_PLAINTEXT" if options.uses_sasl else "PLAINTEXT"
                reason = (
                    f"the connection was cut during the TLS handshake ({reason}), as a "
                    f"plaintext listener does: if this is one, use security_protocol={plain}"
                )
            raise KafkaConnectionError(f"cannot connect to {conn.describe()}: {reason}") from None
        try:
            await conn._negotiate_versions(cluster_id)
            if options.uses_sasl:
                await conn._authenticate()
        except BaseException:
            conn.close(abort=True)
            raise
        return conn

    async def _negotiate_versions(self, cluster_id: str | None = None) -> None:
        await negotiate_versions(self, cluster_id)

    #: (kept here for tests and callers: one SASL step, maybe in a worker thread)
    _sasl_step = staticmethod(sasl_step)

    async def _authenticate(self) -> None:
        lifetime_ms = await authenticate(self)
        self.authentications += 1
        if lifetime_ms > 0:
            # KIP-368: re-authenticate before the broker's session expires.
            delay = lifetime_ms / 1000 * random.uniform(0.85, 0.95)
            self._reauth_timer = self._loop.call_later(delay, self._start_reauth)

    def _start_reauth(self) -> None:
        if self._closed is None:
            self._reauth_task = self._loop.create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        self._gate.clear()
        try:
            await self._drained.wait()
            if self._closed is None:
                await self._authenticate()
        except KafkaError as exc:
            log.warning("re-authentication on %s failed: %s", self.describe(), exc)
            self.close(exc)
        finally:
            self._gate.set()
            self._pump()

    # ------------------------------------------------------------ requests

    def pick_version(self, request_cls: Any, max_version: int | None = None) -> int:
        """The highest version of ``request_cls`` that both kpax and the broker support."""
        key = request_cls.API_KEY
        ours_lo, ours_hi = request_cls.MIN_VERSION, request_cls.MAX_VERSION
        if max_version is not None:
            ours_hi = min(ours_hi, max_version)
        theirs = self.api_versions.get(key)
        if theirs is None:
            raise UnsupportedApiError(
                f"{self.describe()} does not support the {request_cls.API_NAME} API "
                f"(kpax speaks v{ours_lo}-v{ours_hi})"
            )
        hi = min(ours_hi, theirs[1])
        if hi < max(ours_lo, theirs[0]):
            raise UnsupportedApiError(
                f"{self.describe()} supports {request_cls.API_NAME} v{theirs[0]}-v{theirs[1]}, "
                f"kpax speaks v{ours_lo}-v{ours_hi}: no common version"
            )
        return int(hi)

    async def request(
        self,
        request: Any,
        *,
        version: int | None = None,
        max_version: int | None = None,
        timeout: float | None = None,
        expect_response: bool = True,
        bypass_gate: bool = False,
    ) -> Any:
        """Send ``request`` and wait for its response (or only send, when
        ``expect_response`` is false). ``timeout`` in seconds defaults to the
        configured request timeout."""
        return await self.submit(
            request,
            version=version,
            max_version=max_version,
            timeout=timeout,
            expect_response=expect_response,
            bypass_gate=bypass_gate,
        )

    def submit(
        self,
        request: Any,
        *,
        version: int | None = None,
        max_version: int | None = None,
        timeout: float | None = None,
        expect_response: bool = True,
        bypass_gate: bool = False,
        request_cls: Any = None,
        encode: Callable[[int], bytes] | None = None,
        decode: Callable[[bytes | bytearray], Any] | None = None,
    ) -> asyncio.Future[Any]:
        """Queue ``request`` and return the future of its response, without
        waiting: it is written at once unless an earlier request still waits,
        the write buffer is full, ``max_in_flight`` requests are unanswered or
        the connection is (re-)authenticating; then it is written, in call
        order, as soon as that ends. Cancelling the future before the request
        is written withdraws it; after, its answer is dropped.

        The hot path (the producer) may pass ``encode(correlation_id) -> frame``
        and ``decode(frame) -> response`` (frame without the size prefix) with
        ``request_cls`` instead of a request object. Raises at once when the
        connection is closed or no version of the API is common."""
        if self._closed is not None:
            raise self._closed_error()
        cls = type(request) if request_cls is None else request_cls
        if version is None:
            version = self.pick_version(cls, max_version)
        if timeout is None:
            timeout = self.options.request_timeout_ms / 1000
        entry = _InFlight(
            cls.API_KEY,
            version,
            cls.API_NAME,
            self._loop.create_future(),
            request,
            encode,
            decode,
            timeout,
            expect_response,
            bypass_gate,
        )
        queue = self._urgent if bypass_gate else self._queue
        queue.append(entry)
        if len(queue) == 1:
            self._pump()
        return entry.future

    def _pump(self) -> None:
        """Write queued requests, oldest first, while nothing holds them back."""
        urgent, queue = self._urgent, self._queue
        while urgent or queue:
            if (
                self._closed is not None
                or not self._write_ready.is_set()
                or len(self._in_flight) >= self._max_in_flight
            ):
                return
            if urgent:
                entry = urgent.popleft()
            elif self._gate.is_set():
                entry = queue.popleft()
            else:
                return
            if not entry.future.done():  # else withdrawn (cancelled) while waiting
                self._write(entry)

    def _write(self, entry: _InFlight) -> None:
        correlation_id = self._next_id
        self._next_id = (correlation_id + 1) & 0x7FFFFFFF
        entry.correlation_id = correlation_id
        try:
            if entry.encode is not None:
                data = entry.encode(correlation_id)
            else:
                data = encode_request(
                    entry.request, entry.version, correlation_id, self.options.client_id
                )
        except Exception as exc:  # a request that cannot be encoded fails alone
            entry.future.set_exception(exc)
            return
        entry.request = entry.encode = None
        transport = self._transport
        assert transport is not None
        metrics = self._metrics
        if metrics is not None:
            metrics.request_sent(len(data))
        if not entry.expect_response:
            transport.write(data)
            self.last_activity = time.monotonic()
            entry.future.set_result(None)
            return
        if entry.timeout > 0:
            # One timer per connection, not per request: armed for the earliest
            # deadline, and on firing re-armed for the next one still in flight.
            entry.deadline = deadline = self._loop.time() + entry.timeout
            if self._timeout_timer is None or deadline < self._timeout_at:
                self._arm_timeout(deadline)
        self._in_flight.append(entry)
        self._drained.clear()
        transport.write(data)
        self.last_activity = entry.sent = time.monotonic()

    def _arm_timeout(self, deadline: float) -> None:
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
        self._timeout_at = deadline
        self._timeout_timer = self._loop.call_at(deadline, self._check_timeouts)

    def _check_timeouts(self) -> None:
        self._timeout_timer = None
        if self._closed is not None:
            return
        now = self._loop.time()
        earliest = _NEVER
        for entry in self._in_flight:
            if entry.deadline <= now:
                entry.deadline = _NEVER
                if not entry.future.done():  # (a cancelled request's answer is just dropped)
                    self._timed_out(entry, entry.timeout)
                    return
            elif entry.deadline < earliest:
                earliest = entry.deadline
        if earliest != _NEVER:
            self._arm_timeout(earliest)

    def _timed_out(self, entry: _InFlight, timeout: float) -> None:
        if entry.future.done():
            return
        progress = ""
        if self._in_flight and self._in_flight[0] is entry:
            progress = self._partial_response()
        entry.future.set_exception(
            KafkaTimeoutError(
                f"{entry.request_name} request to {self.describe()} timed out after "
                f"{round(timeout, 2):g}s{progress}"  # (a producer's is what its batch had left)
            )
        )
        # The broker may still answer later; the Java client drops the connection.
        self.close(
            KafkaConnectionError(
                f"connection to {self.describe()} closed after a {entry.request_name} "
                f"request timed out"
            ),
            abort=True,
        )

    # ------------------------------------------------------------ receiving

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_activity = time.monotonic()
        reader = self._reader
        if self._closed is not None:  # bytes after close (a TLS shutdown) are dropped
            reader.reset()
            return
        for entry, frame in reader.buffer_updated(nbytes):
            self._deliver(entry, frame)
        error = reader.error
        if error is not None and self._closed is None:
            if isinstance(error, TlsRecordSeen):
                self._tls_listener(error.record)
            else:
                self._protocol_error(error.message)
            return
        fd = self._direct_fd
        if fd is not None and self._closed is None:
            room = reader.frame_room()
            if room is not None and _RECV_REST is not None:
                frame, pos, end = room
                got, err = _RECV_REST(fd, frame, pos, end, READ_REST_BUDGET_US, READ_REST_IDLE_US)
                if got:
                    for entry, frame_ in reader.buffer_updated(got):
                        self._deliver(entry, frame_)
                if err and self._closed is None:  # (an end of stream stays for the transport)
                    self.close(
                        KafkaConnectionError(
                            f"connection to {self.describe()} lost{self._partial_response()}: "
                            f"{os.strerror(err)}"
                        ),
                        abort=True,
                    )

    def _tls_listener(self, record: str) -> None:
        tls = "SASL_SSL" if self.options.uses_sasl else "SSL"
        self.close(
            AuthenticationError(
                f"{self.describe()} answered with a TLS {record} record, not a Kafka "
                f"response: this looks like a TLS listener: use security_protocol={tls}"
            ),
            abort=True,
        )

    def _partial_response(self) -> str:
        """`` after 1024 of 419430400 bytes of a response`` while one is being read."""
        return self._reader.partial_response()

    def _deliver(self, entry: _InFlight, frame: bytes | bytearray) -> None:
        if self._metrics is not None:
            self._metrics.response_received(time.monotonic() - entry.sent, len(frame) + 4)
        if entry.api_key != ApiVersionsRequest.API_KEY:
            self._past_api_versions = True
        if not self._in_flight:
            self._drained.set()
        if self._queue or self._urgent:
            self._pump()  # a slot is free
        if entry.future.done():
            return  # the caller gave up (cancelled); drop the answer
        try:
            if entry.decode is not None:
                response = entry.decode(frame)
            else:
                _, response = decode_response(frame, entry.api_key, entry.version)
        except KafkaError as exc:
            entry.future.set_exception(
                ProtocolError(
                    f"bad {entry.request_name} v{entry.version} response from "
                    f"{self.describe()}: {exc.message}"
                )
            )
            return
        except Exception as exc:  # a decoder bug must not kill the reader
            entry.future.set_exception(
                ProtocolError(
                    f"bad {entry.request_name} v{entry.version} response from "
                    f"{self.describe()}: {exc!r}"
                )
            )
            return
        entry.future.set_result(response)

    def _protocol_error(self, why: str) -> None:
        self.close(ProtocolError(f"protocol error on {self.describe()}: {why}"), abort=True)

    # ------------------------------------------------------------ transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, of whatever loop: uvloop's (and other loops')
        # transports are not subclasses of asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        if _RECV_REST is not None and not self.options.uses_tls and runs_background_loop():
            sock = transport.get_extra_info("socket")
            if sock is not None:
                self._direct_fd = sock.fileno()
        if self._metrics is not None:
            self._counted = True
            self._metrics.created.record()

    def connection_lost(self, exc: Exception | None) -> None:
        self._direct_fd = None
        if self._closed is None:
            reason = f": {_os_reason(exc)}" if isinstance(exc, OSError) else ""
            self.close(
                KafkaConnectionError(
                    f"connection to {self.describe()} lost{self._partial_response()}"
                    f"{reason}{self._sasl_hint()}"
                )
            )
        self._transport = None
        self._closed_event.set()

    def eof_received(self) -> bool | None:
        self.close(
            KafkaConnectionError(
                f"{self.describe()} closed the connection{self._partial_response()}"
                f"{self._sasl_hint()}"
            )
        )
        return None

    def _sasl_hint(self) -> str:
        """A SASL listener answers ApiVersions, then drops a client that sends
        anything but SaslHandshake: say so when that is what happened."""
        if (
            self.options.uses_sasl
            or self._past_api_versions
            or not self.api_versions
            or not self._in_flight
            or self._in_flight[0].api_key == ApiVersionsRequest.API_KEY
        ):
            return ""
        sasl = "SASL_SSL" if self.options.uses_tls else "SASL_PLAINTEXT"
        return (
            f" after answering only ApiVersions, as a SASL listener does with a client "
            f"that does not authenticate: if this is one, use security_protocol={sasl} "
            f"and a sasl_mechanism"
        )

    def pause_writing(self) -> None:
        self._write_ready.clear()

    def resume_writing(self) -> None:
        self._write_ready.set()
        self._pump()

    # ------------------------------------------------------------ closing

    def _closed_error(self) -> KafkaError:
        exc = self._closed
        if isinstance(exc, KafkaConnectionError):
            return KafkaConnectionError(exc.message)
        # Closed by a protocol or authentication error: keep that reason.
        reason = exc.message if isinstance(exc, KafkaError) else repr(exc)
        return KafkaConnectionError(f"connection to {self.describe()} is closed: {reason}")

    def close(self, exc: BaseException | None = None, *, abort: bool = False) -> None:
        """Close now; every request in flight fails with ``exc`` (a retriable
        connection error by default). ``abort`` drops unsent bytes and closes the
        socket at once (a connection given up on: a stopped broker may never read
        what is buffered, and a graceful close would wait for it)."""
        if self._closed is not None:
            return
        self._closed = exc or KafkaConnectionError(f"connection to {self.describe()} closed")
        if self._counted and self._metrics is not None:
            self._metrics.closed.record()
        self._reader.reset()  # a half-read response is dropped
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
            self._timeout_timer = None
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()
        failure = self._closed
        while self._in_flight:
            entry = self._in_flight.popleft()
            if not entry.future.done():
                if isinstance(failure, KafkaConnectionError):
                    entry.future.set_exception(
                        KafkaConnectionError(
                            f"{entry.request_name} request to {self.describe()} failed: "
                            f"{failure.message}"
                        )
                    )
                else:
                    entry.future.set_exception(failure)
        for queue in (self._urgent, self._queue):
            while queue:
                entry = queue.popleft()
                if not entry.future.done():
                    entry.future.set_exception(self._closed_error())
        self._write_ready.set()
        self._gate.set()
        self._drained.set()
        if self._transport is None:
            self._closed_event.set()  # else connection_lost sets it once the socket is gone

    async def wait_closed(self) -> None:
        """Wait until the socket is really closed (after :meth:`close`)."""
        await self._closed_event.wait()


def describe_broker(node_id: int | None, address: str) -> str:
    """``broker 1 (127.0.0.1:9092)``, or ``broker 127.0.0.1:9092`` for a bootstrap address."""
    if node_id is None or node_id < 0:
        return f"broker {address}"
    return f"broker {node_id} ({address})"


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
