"""The client side of a Kafka connection's byte stream, sans I/O: bytes in, frames out.

Role: :class:`ResponseReader` cuts the size-prefixed response frames out of
whatever the socket delivers and pairs each with the oldest request in flight
(Kafka answers in request order; a frame whose correlation id is not the
oldest request's is a protocol violation). It owns no socket and no event
loop: a transport fills the buffer it hands out (:meth:`~ResponseReader.get_buffer`),
reports how many bytes arrived (:meth:`~ResponseReader.buffer_updated`) and gets
back ``(request, frame)`` pairs; tests do the same with plain bytes.

Buffers: small frames are cut from a fixed scratch buffer (one copy each); a
frame larger than the scratch buffer (a Fetch response) gets a buffer of its
own that the socket fills directly, so its bytes are never copied again.
With the C accelerator, a frame up to :data:`WHOLE_FRAME_MAX` gets it whole at
once, not initialised (``_speedups.frame_buffer``): the kernel commits a large
allocation's pages only as the socket writes into them, so memory in use
follows the bytes that have arrived, no byte is written twice, and the socket
may fill all that is left in one read. Otherwise the buffer never holds more
than what has arrived plus ``grow`` zeroed bytes: it starts at
``min(size, grow)`` and grows by ``grow`` as bytes come in (a ``bytearray``
resize, which for large buffers the C library does by remapping pages). A
4-byte size prefix is untrusted: a bogus one (a TLS alert read as a size is
350 MB) costs at most ``grow`` bytes of memory in use, and a large frame gets
its buffer only after its correlation id has been checked against the oldest
request.

Errors: bytes that break the protocol -- a size below 4 or above
``max_response_size``, a correlation id out of order, a TLS record where a
Kafka response was expected -- stop the reader: :attr:`~ResponseReader.error`
is set (a :class:`FrameError`) and every later call returns nothing. The
frames cut before the error are still returned.

Imports: the standard library, kpax.proto.errors and kpax.proto.accel only.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from kpax.proto.accel import speedups
from kpax.proto.errors import ProtocolError

__all__ = [
    "BadFrameSize",
    "CorrelationMismatch",
    "FrameError",
    "InFlight",
    "ResponseReader",
    "TlsRecordSeen",
    "WHOLE_FRAME_MAX",
]

#: The largest frame given its whole buffer at once (with the C accelerator): a
#: default Fetch response (``fetch_max_bytes`` 50 MiB) and anything smaller.
WHOLE_FRAME_MAX = 64 * 1024 * 1024
#: An uninitialised bytearray of a given size, or None without the accelerator.
_FRAME_BUFFER: Callable[[int], bytearray] | None = (
    None if speedups is None else speedups.frame_buffer
)

_SIZE = struct.Struct(">i")
#: TLS record content types: change_cipher_spec, alert, handshake, application_data.
_TLS_RECORDS = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}


class InFlight(Protocol):
    """What the reader needs to know of a request it waits an answer for."""

    correlation_id: int
    request_name: str
    version: int


R = TypeVar("R", bound=InFlight)


class FrameError(ProtocolError):
    """The byte stream broke the protocol; the connection cannot go on."""


class BadFrameSize(FrameError):
    """A size prefix below 4 (no room for a correlation id) or above the limit."""


class CorrelationMismatch(FrameError):
    """A response that does not answer the oldest request in flight."""


class TlsRecordSeen(FrameError):
    """The first bytes look like a TLS record: the peer is a TLS listener."""

    def __init__(self, record: str) -> None:
        super().__init__(f"a TLS {record} record where a Kafka response was expected")
        #: The TLS record type seen: alert, handshake...
        self.record = record


def tls_record(buf: bytes | bytearray | memoryview, offset: int) -> str | None:
    """The TLS record type when ``buf[offset:]`` starts like a TLS record header
    (content type, version 3.0-3.4), else None."""
    record = _TLS_RECORDS.get(buf[offset])
    if record is not None and buf[offset + 1] == 3 and buf[offset + 2] <= 4:
        return record
    return None


class ResponseReader(Generic[R]):
    """See the module docstring. ``in_flight`` holds the requests written and
    not answered yet, oldest first: append each one as it is written."""

    def __init__(
        self,
        max_response_size: int,
        *,
        detect_tls: bool = False,
        scratch: int = 256 * 1024,
        grow: int = 1024 * 1024,
        whole_frames: bool | None = None,
    ) -> None:
        self.max_response_size = max_response_size
        #: Check the first bytes for a TLS record (a plaintext client on a TLS listener).
        self.detect_tls = detect_tls
        self.in_flight: collections.deque[R] = collections.deque()
        #: Responses matched so far.
        self.responses = 0
        #: Why the stream stopped (None while it is fine).
        self.error: FrameError | None = None
        self._cap = scratch
        self._grow = grow
        #: An uninitialised buffer maker for whole frames (None: grow by ``grow``);
        #: ``whole_frames`` None means whenever the C accelerator is built.
        self._whole: Callable[[int], bytearray] | None = (
            _FRAME_BUFFER if whole_frames is None or whole_frames else None
        )
        if whole_frames and self._whole is None:
            raise ValueError("whole_frames needs the C accelerator (kpax.proto._speedups)")
        self._zeros = memoryview(bytes(grow))
        self._scratch = bytearray(scratch)
        self._scratch_view = memoryview(self._scratch)
        self._start = 0
        self._end = 0
        self._frame: bytearray | None = None
        self._frame_view: memoryview | None = None
        self._frame_pos = 0
        self._frame_size = 0  # what the size prefix announced (len(_frame) grows to it)

    # ------------------------------------------------------------ the transport's side

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (at least one byte of room)."""
        view = self._frame_view
        if view is not None:
            if self._frame_pos == len(view):
                view = self._grow_frame()
            return view[self._frame_pos :]
        if self._end == self._cap:
            self._compact()
        return self._scratch_view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[tuple[R, bytes | bytearray]]:
        """``nbytes`` arrived in the last :meth:`get_buffer`: the complete frames
        (size prefix excluded, correlation id included) with their requests,
        which leave :attr:`in_flight`."""
        out: list[tuple[R, bytes | bytearray]] = []
        if self.error is not None:
            self._start = self._end = 0
            return out
        if self._frame is not None:
            self._frame_pos += nbytes
            if self._frame_pos == self._frame_size:
                frame = self._frame
                self._frame = self._frame_view = None
                self._take(frame, out)
            return out
        self._end += nbytes
        self._parse_scratch(out)
        return out

    def frame_room(self) -> tuple[bytearray, int, int] | None:
        """While a large frame is being read: its buffer and where its next bytes
        go (``buffer[pos:end]``), for a caller that reads them from the socket
        itself and reports them with :meth:`buffer_updated`, as after
        :meth:`get_buffer`. None otherwise (and when the buffer must grow first)."""
        frame = self._frame
        if frame is None or self.error is not None or self._frame_pos == len(frame):
            return None
        return frame, self._frame_pos, len(frame)

    def reset(self) -> None:
        """Drop a half-read response (the connection is closing)."""
        self._frame = self._frame_view = None
        self._start = self._end = 0

    def partial_response(self) -> str:
        """`` after 1024 of 419430400 bytes of a response`` while one is being read."""
        if self._frame is not None:
            return f" after {self._frame_pos} of {self._frame_size} bytes of a response"
        avail = self._end - self._start
        if avail >= 4:
            (size,) = _SIZE.unpack_from(self._scratch, self._start)
            return f" after {avail - 4} of {size} bytes of a response"
        if avail:
            return f" after {avail} of the 4 bytes of a response size"
        return ""

    # ------------------------------------------------------------ internals

    def _grow_frame(self) -> memoryview:
        """Room for the next bytes of a large frame: at most ``grow`` beyond what
        has arrived. Called from :meth:`get_buffer`, when the transport holds no
        view of the buffer any more, so the bytearray can be resized in place."""
        frame, view = self._frame, self._frame_view
        assert frame is not None and view is not None
        more = min(self._grow, self._frame_size - len(frame))
        view.release()
        try:
            frame += self._zeros[:more]
        except BufferError:  # a view is still held somewhere: grow by copying
            grown = bytearray(len(frame) + more)
            grown[: len(frame)] = frame
            frame = self._frame = grown
        view = self._frame_view = memoryview(frame)
        return view

    def _compact(self) -> None:
        n = self._end - self._start
        if self._start:
            self._scratch[0:n] = self._scratch[self._start : self._end]
        self._start, self._end = 0, n

    def _parse_scratch(self, out: list[tuple[R, bytes | bytearray]]) -> None:
        buf = self._scratch
        while self.error is None:
            start = self._start
            avail = self._end - start
            if avail < 4:
                break
            if self.responses == 0 and self.detect_tls:
                record = tls_record(buf, start)
                if record is not None:
                    self._fail(TlsRecordSeen(record))
                    return
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 4 or size > self.max_response_size:
                self._bad_size(size, bytes(buf[start : start + 4]))
                return
            if avail - 4 >= size:
                begin = start + 4
                self._start = begin + size
                self._take(bytes(buf[begin : self._start]), out)
                continue
            if size + 4 > self._cap:
                # A large frame gets its own buffer, filled directly by the socket --
                # once its correlation id shows it answers the oldest request.
                if avail < 8:
                    break
                (correlation_id,) = _SIZE.unpack_from(buf, start + 4)
                if not self._matches_oldest(correlation_id):
                    return
                have = avail - 4
                if self._whole is not None and size <= WHOLE_FRAME_MAX:
                    frame = self._whole(size)  # not initialised: only [:pos] is ever read
                else:
                    frame = bytearray(min(size, self._grow))  # > have: have < scratch and < size
                frame[:have] = buf[start + 4 : self._end]
                self._frame, self._frame_view = frame, memoryview(frame)
                self._frame_pos, self._frame_size = have, size
                self._start = self._end = 0
                return
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start > self._cap // 2:
            self._compact()

    def _take(self, frame: bytes | bytearray, out: list[tuple[R, bytes | bytearray]]) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)  # size >= 4 was checked
        if not self._matches_oldest(correlation_id):
            return
        self.responses += 1
        out.append((self.in_flight.popleft(), frame))

    def _matches_oldest(self, correlation_id: int) -> bool:
        in_flight = self.in_flight
        if in_flight and in_flight[0].correlation_id == correlation_id:
            return True
        if in_flight:
            oldest = in_flight[0]
            expected = (
                f"{oldest.request_name} v{oldest.version}, correlation id {oldest.correlation_id}"
            )
        else:
            expected = "none in flight"
        self._fail(
            CorrelationMismatch(
                f"response correlation id {correlation_id} does not match the oldest "
                f"request in flight ({expected})"
            )
        )
        return False

    def _bad_size(self, size: int, prefix: bytes) -> None:
        if size < 0:
            why = "negative"
        elif size < 4:
            why = "shorter than a correlation id"
        else:
            why = f"above max_response_size ({self.max_response_size})"
        hint = "; is this a Kafka listener?" if self.responses == 0 else ""
        self._fail(
            BadFrameSize(f"bad response size {size} (size prefix {prefix.hex(' ')}): {why}{hint}")
        )

    def _fail(self, error: FrameError) -> None:
        self.error = error
        self._frame = self._frame_view = None
