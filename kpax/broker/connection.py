"""One TCP (or TLS) connection to one broker, pipelined and non-blocking.

Role: the kpax broker interface in Python terms, ``await conn.request(req)``.
Any number of concurrent callers share the connection: each request is given
the next correlation id and written at once, so requests go out in call order;
responses come back in the same order and are matched against the oldest
request in flight (a mismatch is a :class:`ProtocolError` that closes the
connection). Requests that expect no response (Produce with acks=0) are
written and forgotten.

On open: TCP (+TLS), ApiVersions (the highest version first, with client
software name and version; falling back when the broker answers
UNSUPPORTED_VERSION), then SASL if configured. Each request then uses the
highest version both sides support, or fails with :class:`UnsupportedApiError`
naming the API and both ranges.

Failure semantics: a request that times out fails with
:class:`KafkaTimeoutError` and closes the connection (as the Java client
does, since the broker may still answer it later); when the connection
breaks, every request in flight fails at once with a retriable
:class:`KafkaConnectionError` naming the broker. Reconnecting is the job of
:class:`kpax.broker.broker.Broker`.

Receiving uses ``asyncio.BufferedProtocol``: small responses are cut from a
fixed scratch buffer; a large one (a Fetch response) is read straight into a
buffer of its exact size, so its record bytes are never copied again.

Imports: kpax.proto, kpax.broker.*, the standard library.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import ssl
import struct
import time
from typing import Any, TypeVar

from kpax._version import __version__
from kpax.broker.options import ConnectionOptions
from kpax.broker.sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslMechanism,
    ScramMechanism,
)
from kpax.proto.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedApiError,
    error_for_code,
)
from kpax.proto.header import decode_response, encode_request
from kpax.proto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

log = logging.getLogger("kpax.broker")

_SIZE = struct.Struct(">i")
_SCRATCH = 256 * 1024
_UNSUPPORTED_VERSION = 35
_SASL_AUTH_FAILED = 58

R = TypeVar("R")


class _InFlight:
    __slots__ = ("api_key", "correlation_id", "future", "request_name", "timer", "version")

    def __init__(
        self,
        correlation_id: int,
        api_key: int,
        version: int,
        request_name: str,
        future: asyncio.Future[Any],
    ) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.request_name = request_name
        self.future = future
        self.timer: asyncio.TimerHandle | None = None


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
        #: Completed SASL authentications on this connection (1 + re-authentications).
        self.authentications = 0
        self.last_activity = time.monotonic()
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._next_id = random.randint(0, 1 << 20)
        self._slots = asyncio.Semaphore(options.max_in_flight)
        self._order = asyncio.Lock()
        self._closed: BaseException | None = None
        self._closed_event = asyncio.Event()
        self._write_ready = asyncio.Event()
        self._write_ready.set()
        self._gate = asyncio.Event()  # closed while (re-)authenticating
        self._gate.set()
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._drained = asyncio.Event()  # set whenever nothing is in flight
        self._drained.set()
        # receive state
        self._scratch = bytearray(_SCRATCH)
        self._scratch_view = memoryview(self._scratch)
        self._start = 0
        self._end = 0
        self._frame: bytearray | None = None
        self._frame_view: memoryview | None = None
        self._frame_pos = 0

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
    ) -> BrokerConnection:
        """Connect, negotiate API versions and authenticate; fail within
        ``socket_connection_setup_timeout_ms`` (+ request timeout for the handshake)."""
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
            raise KafkaConnectionError(
                f"cannot connect to {conn.describe()}: {_os_reason(exc)}"
            ) from None
        try:
            await conn._negotiate_versions()
            if options.uses_sasl:
                await conn._authenticate()
        except BaseException:
            conn.close(abort=True)
            raise
        return conn

    async def _negotiate_versions(self) -> None:
        version = ApiVersionsRequest.MAX_VERSION
        for _ in range(3):
            request = ApiVersionsRequest(
                client_software_name="kpax", client_software_version=__version__
            )
            try:
                resp: ApiVersionsResponse = await self.request(request, version=version)
            except ProtocolError:
                if version == 0:
                    raise
                # A broker that does not know our version answers in v0 format.
                version = 0
                continue
            if resp.error_code == _UNSUPPORTED_VERSION:
                ranges = {k.api_key: k.max_version for k in resp.api_keys}
                broker_max = ranges.get(ApiVersionsRequest.API_KEY, 0)
                version = min(broker_max, ApiVersionsRequest.MAX_VERSION)
                continue
            if resp.error_code:
                err = error_for_code(resp.error_code)
                raise err(f"ApiVersions on {self.describe()}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise ProtocolError(f"{self.describe()} did not complete ApiVersions negotiation")

    def _mechanism(self) -> SaslMechanism:
        opts = self.options
        name = opts.sasl_mechanism
        if name == "PLAIN":
            return PlainMechanism(opts.sasl_username or "", opts.sasl_password or "")
        if name.startswith("SCRAM-"):
            return ScramMechanism(name, opts.sasl_username or "", opts.sasl_password or "")
        raise AuthenticationError(f"SASL mechanism {name} needs a token (OAUTHBEARER)")

    async def _make_mechanism(self) -> SaslMechanism:
        provider = self.options.sasl_token_provider
        if self.options.sasl_mechanism == "OAUTHBEARER" and provider is not None:
            token = provider()
            if not isinstance(token, str):
                token = await token
            return OAuthBearerMechanism(token)
        return self._mechanism()

    async def _authenticate(self) -> None:
        mechanism = await self._make_mechanism()
        who = self.options.sasl_username or "(token)"
        hs = await self.request(SaslHandshakeRequest(mechanism=mechanism.name), bypass_gate=True)
        if hs.error_code:
            enabled = ", ".join(hs.mechanisms) or "none"
            raise AuthenticationError(
                f"SASL mechanism {mechanism.name} is not enabled on {self.describe()} "
                f"(enabled: {enabled})"
            )
        token: bytes | None = mechanism.first()
        lifetime_ms = 0
        while token is not None:
            resp = await self.request(SaslAuthenticateRequest(auth_bytes=token), bypass_gate=True)
            if resp.error_code:
                detail = resp.error_message or error_for_code(resp.error_code).name
                raise AuthenticationError(
                    f"SASL {mechanism.name} authentication as {who!r} failed on "
                    f"{self.describe()}: {detail}"
                )
            lifetime_ms = getattr(resp, "session_lifetime_ms", 0) or 0
            token = mechanism.respond(bytes(resp.auth_bytes or b""))
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
        if self._closed is not None:
            raise self._closed_error()
        if bypass_gate:
            if not self._write_ready.is_set():
                await self._write_ready.wait()
            await self._slots.acquire()
        else:
            # One queue (asyncio.Lock is FIFO): requests reach the wire in call
            # order even after waiting for the gate, write buffer or a slot --
            # producers rely on it (a partition's batches must not be reordered).
            async with self._order:
                if not self._gate.is_set():
                    await self._gate.wait()
                if not self._write_ready.is_set():
                    await self._write_ready.wait()
                await self._slots.acquire()
        try:
            if self._closed is not None:
                raise self._closed_error()
            cls = type(request)
            if version is None:
                version = self.pick_version(cls, max_version)
            correlation_id = self._next_id
            self._next_id = (correlation_id + 1) & 0x7FFFFFFF
            data = encode_request(request, version, correlation_id, self.options.client_id)
            transport = self._transport
            assert transport is not None
            if not expect_response:
                transport.write(data)
                self.last_activity = time.monotonic()
                return None
            future: asyncio.Future[Any] = self._loop.create_future()
            entry = _InFlight(correlation_id, cls.API_KEY, version, cls.API_NAME, future)
            if timeout is None:
                timeout = self.options.request_timeout_ms / 1000
            if timeout > 0:
                entry.timer = self._loop.call_later(timeout, self._timed_out, entry, timeout)
            self._in_flight.append(entry)
            self._drained.clear()
            transport.write(data)
            self.last_activity = time.monotonic()
            return await future
        finally:
            self._slots.release()

    def _timed_out(self, entry: _InFlight, timeout: float) -> None:
        if entry.future.done():
            return
        entry.future.set_exception(
            KafkaTimeoutError(
                f"{entry.request_name} request to {self.describe()} timed out after {timeout:g}s"
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
        if self._frame_view is not None:
            return self._frame_view[self._frame_pos :]
        if self._end == _SCRATCH:
            self._compact()
        return self._scratch_view[self._end :]

    def _compact(self) -> None:
        n = self._end - self._start
        if self._start:
            self._scratch[0:n] = self._scratch[self._start : self._end]
        self._start, self._end = 0, n

    def buffer_updated(self, nbytes: int) -> None:
        self.last_activity = time.monotonic()
        if self._frame is not None:
            self._frame_pos += nbytes
            if self._frame_pos == len(self._frame):
                frame = self._frame
                self._frame = self._frame_view = None
                self._deliver(frame)
            return
        self._end += nbytes
        self._parse_scratch()

    def _parse_scratch(self) -> None:
        buf = self._scratch
        while self._closed is None:
            avail = self._end - self._start
            if avail < 4:
                break
            (size,) = _SIZE.unpack_from(buf, self._start)
            if size < 4 or size > self.options.max_response_size:
                self._protocol_error(f"bad response size {size}")
                return
            if avail - 4 >= size:
                begin = self._start + 4
                self._start = begin + size
                self._deliver(bytes(buf[begin : self._start]))
                continue
            if size + 4 > _SCRATCH:
                # A large frame: give it its own buffer, filled directly by the socket.
                frame = bytearray(size)
                have = avail - 4
                frame[:have] = buf[self._start + 4 : self._end]
                self._frame, self._frame_view, self._frame_pos = frame, memoryview(frame), have
                self._start = self._end = 0
                return
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start > _SCRATCH // 2:
            self._compact()

    def _deliver(self, frame: bytes | bytearray) -> None:
        if len(frame) < 4:
            self._protocol_error("response shorter than its correlation id")
            return
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if not self._in_flight or self._in_flight[0].correlation_id != correlation_id:
            expected = self._in_flight[0].correlation_id if self._in_flight else None
            self._protocol_error(
                f"response correlation id {correlation_id} does not match the oldest "
                f"request in flight ({expected})"
            )
            return
        entry = self._in_flight.popleft()
        if not self._in_flight:
            self._drained.set()
        if entry.timer is not None:
            entry.timer.cancel()
        if entry.future.done():
            return  # the caller gave up (cancelled); drop the answer
        try:
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
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {_os_reason(exc)}" if isinstance(exc, OSError) else ""
        self.close(KafkaConnectionError(f"connection to {self.describe()} lost{reason}"))
        self._transport = None
        self._closed_event.set()

    def eof_received(self) -> bool | None:
        self.close(KafkaConnectionError(f"{self.describe()} closed the connection"))
        return None

    def pause_writing(self) -> None:
        self._write_ready.clear()

    def resume_writing(self) -> None:
        self._write_ready.set()

    # ------------------------------------------------------------ closing

    def _closed_error(self) -> KafkaError:
        exc = self._closed
        if isinstance(exc, KafkaConnectionError):
            return KafkaConnectionError(exc.message)
        return KafkaConnectionError(f"connection to {self.describe()} is closed")

    def close(self, exc: BaseException | None = None, *, abort: bool = False) -> None:
        """Close now; every request in flight fails with ``exc`` (a retriable
        connection error by default). ``abort`` drops unsent bytes and closes the
        socket at once (a connection given up on: a stopped broker may never read
        what is buffered, and a graceful close would wait for it)."""
        if self._closed is not None:
            return
        self._closed = exc or KafkaConnectionError(f"connection to {self.describe()} closed")
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()
        failure = self._closed
        while self._in_flight:
            entry = self._in_flight.popleft()
            if entry.timer is not None:
                entry.timer.cancel()
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
