"""kpax.proto.framing.ResponseReader with plain bytes: frames cut right however
the stream is split, matched to requests in order, large frames in their own
bounded buffer, and every protocol violation stopping the reader with a named error."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.proto.accel import speedups
from kpax.proto.framing import (
    WHOLE_FRAME_MAX,
    BadFrameSize,
    CorrelationMismatch,
    ResponseReader,
    TlsRecordSeen,
)

#: The ways a large frame gets its buffer: grown as bytes arrive, and (with the C
#: accelerator) whole at once, not initialised.
BUFFERINGS = [False] + ([True] if speedups is not None else [])


@dataclass
class Req:
    correlation_id: int
    request_name: str = "Fetch"
    version: int = 17


def frame(correlation_id: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def feed(reader: ResponseReader[Req], data: bytes, cuts: list[int]) -> list[tuple[Req, bytes]]:
    """Deliver ``data`` as a socket would: in pieces ending at ``cuts``, each
    piece copied into whatever buffer the reader hands out."""
    out: list[tuple[Req, bytes]] = []
    pos = 0
    for end in [*sorted(set(cuts)), len(data)]:
        while pos < end:
            buf = reader.get_buffer()
            n = min(len(buf), end - pos)
            buf[:n] = data[pos : pos + n]
            pos += n
            del buf  # a transport drops its view before asking for the next buffer
            out.extend((req, bytes(f)) for req, f in reader.buffer_updated(n))
    return out


@given(
    bodies=st.lists(
        st.one_of(st.binary(max_size=300), st.integers(0, 700_000).map(lambda n: b"x" * n)),
        min_size=1,
        max_size=6,
    ),
    cut_fracs=st.lists(st.floats(0, 1), max_size=12),
    whole=st.sampled_from(BUFFERINGS),
)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_frames_come_out_whole_in_order_however_the_stream_is_cut(
    bodies: list[bytes], cut_fracs: list[float], whole: bool
) -> None:
    reader: ResponseReader[Req] = ResponseReader(
        1 << 30, scratch=64 * 1024, grow=128 * 1024, whole_frames=whole
    )
    reqs = [Req(100 + i) for i in range(len(bodies))]
    reader.in_flight.extend(reqs)
    data = b"".join(frame(r.correlation_id, b) for r, b in zip(reqs, bodies, strict=True))
    cuts = [int(f * len(data)) for f in cut_fracs]
    got = feed(reader, data, cuts)
    assert reader.error is None
    assert [r for r, _ in got] == reqs
    assert [f[4:] for _, f in got] == bodies
    assert [struct.unpack_from(">i", f)[0] for _, f in got] == [r.correlation_id for r in reqs]
    assert not reader.in_flight and reader.responses == len(bodies)
    assert reader.partial_response() == ""


def test_a_large_frame_gets_its_own_buffer_grown_as_bytes_arrive() -> None:
    reader: ResponseReader[Req] = ResponseReader(
        1 << 30, scratch=1024, grow=4096, whole_frames=False
    )
    reader.in_flight.append(Req(7))
    big = frame(7, bytes(range(256)) * 100)  # 25,608 bytes
    first = reader.get_buffer()
    first[:100] = big[:100]
    del first
    assert reader.buffer_updated(100) == []
    assert reader.partial_response() == f" after 96 of {len(big) - 4} bytes of a response"
    pos = 100
    largest = 0
    while pos < len(big):
        buf = reader.get_buffer()
        largest = max(largest, pos + len(buf))
        assert len(buf) <= 4096  # never more room than `grow` past what arrived
        n = min(len(buf), len(big) - pos, 1500)
        buf[:n] = big[pos : pos + n]
        pos += n
        del buf
        done = reader.buffer_updated(n)
    assert [(r.correlation_id, bytes(f)) for r, f in done] == [(7, big[4:])]
    assert largest <= pos + 4096


@pytest.mark.skipif(speedups is None, reason="whole frame buffers come from the C accelerator")
def test_a_large_frame_gets_its_whole_buffer_at_once_and_only_its_bytes_come_out() -> None:
    reader: ResponseReader[Req] = ResponseReader(1 << 30, scratch=1024, grow=4096)
    reader.in_flight.extend([Req(7), Req(8)])
    big = frame(7, bytes(range(256)) * 100)  # 25,608 bytes
    first = reader.get_buffer()
    first[:100] = big[:100]
    del first
    assert reader.buffer_updated(100) == []
    rest = reader.get_buffer()
    assert len(rest) == len(big) - 100  # the socket may fill all that is left at once
    rest[:] = big[100:]
    del rest
    done = reader.buffer_updated(len(big) - 100)
    assert [(r.correlation_id, bytes(f)) for r, f in done] == [(7, big[4:])]
    # Above WHOLE_FRAME_MAX a frame's buffer grows as its bytes arrive again.
    huge = struct.pack(">ii", WHOLE_FRAME_MAX + 5, 8)
    buf = reader.get_buffer()
    buf[: len(huge)] = huge
    del buf
    assert reader.buffer_updated(len(huge)) == []
    assert len(reader.get_buffer()) == 4096 - 4  # `grow` bytes, the correlation id in


def test_a_large_frame_out_of_order_is_refused_before_its_buffer_is_made() -> None:
    reader: ResponseReader[Req] = ResponseReader(1 << 30, scratch=1024)
    reader.in_flight.append(Req(1, "Metadata", 12))
    got = feed(reader, struct.pack(">ii", 500_000_000, 2), [])
    assert got == []
    assert isinstance(reader.error, CorrelationMismatch)
    assert "correlation id 2" in reader.error.message
    assert "Metadata v12, correlation id 1" in reader.error.message


def test_a_response_nobody_asked_for_is_named() -> None:
    reader: ResponseReader[Req] = ResponseReader(1 << 20)
    assert feed(reader, frame(5, b"abc"), []) == []
    assert isinstance(reader.error, CorrelationMismatch)
    assert "none in flight" in reader.error.message


def test_frames_before_an_error_are_still_returned_and_later_bytes_dropped() -> None:
    reader: ResponseReader[Req] = ResponseReader(1 << 20)
    reader.in_flight.extend([Req(1), Req(2)])
    got = feed(reader, frame(1, b"ok") + frame(3, b"bad"), [])
    assert [(r.correlation_id, f[4:]) for r, f in got] == [(1, b"ok")]
    assert isinstance(reader.error, CorrelationMismatch)
    assert feed(reader, frame(2, b"late"), []) == []  # stopped for good


@pytest.mark.parametrize(
    ("size", "why"),
    [
        (-5, "negative"),
        (2, "shorter than a correlation id"),
        (2_000_000, "above max_response_size (1048576)"),
    ],
)
def test_bad_sizes_stop_the_reader(size: int, why: str) -> None:
    reader: ResponseReader[Req] = ResponseReader(1 << 20)
    reader.in_flight.append(Req(1))
    feed(reader, struct.pack(">i", size) + b"\x00" * 8, [])
    assert isinstance(reader.error, BadFrameSize)
    assert why in reader.error.message
    assert "is this a Kafka listener?" in reader.error.message  # nothing answered yet


def test_a_tls_record_is_recognised_only_when_asked_and_only_first() -> None:
    alert = bytes([21, 3, 3, 0, 2, 2, 40])
    reader: ResponseReader[Req] = ResponseReader(1 << 20, detect_tls=True)
    reader.in_flight.append(Req(1))
    feed(reader, alert, [])
    assert isinstance(reader.error, TlsRecordSeen) and reader.error.record == "alert"
    # without detection the same bytes are a bad size
    plain: ResponseReader[Req] = ResponseReader(1 << 20)
    plain.in_flight.append(Req(1))
    feed(plain, alert, [])
    assert isinstance(plain.error, BadFrameSize)
    # after a first response, a frame starting with 0x15 0x03 is just a size
    later: ResponseReader[Req] = ResponseReader(1 << 30, detect_tls=True)
    later.in_flight.extend([Req(1), Req(2)])
    got = feed(later, frame(1, b"") + struct.pack(">ii", 0x15030000 - 4, 2), [])
    assert [r.correlation_id for r, _ in got] == [1]
    assert later.error is None and later.partial_response().startswith(" after 4 of ")


def test_reset_drops_a_half_read_response() -> None:
    reader: ResponseReader[Req] = ResponseReader(1 << 20)
    reader.in_flight.append(Req(1))
    feed(reader, frame(1, b"abcdef")[:7], [])
    assert reader.partial_response() == " after 3 of 10 bytes of a response"
    reader.reset()
    assert reader.partial_response() == ""


@pytest.mark.parametrize("whole", BUFFERINGS)
def test_frame_room_lets_a_caller_fill_a_large_frame_itself(whole: bool) -> None:
    """A connection reading a large frame's rest from the socket itself writes where
    frame_room says and reports the bytes as after get_buffer: the frames come out
    the same, and between large frames there is no room to fill."""
    reader: ResponseReader[Req] = ResponseReader(
        1 << 30, scratch=1024, grow=4096, whole_frames=whole
    )
    reader.in_flight.extend([Req(1), Req(2)])
    big = frame(1, bytes(range(256)) * 100)  # 25.6 KB > the 1 KiB scratch
    small = frame(2, b"after")
    assert reader.frame_room() is None
    first = reader.get_buffer()
    first[:100] = big[:100]
    del first
    assert reader.buffer_updated(100) == []
    out: list[tuple[Req, bytes]] = []
    pos = 100
    while (room := reader.frame_room()) is not None:
        buf, at, end = room
        assert at == pos - 4 and end <= len(big) - 4
        n = min(end - at, 3000)  # a read takes what it finds, never past the frame
        buf[at : at + n] = big[pos : pos + n]
        pos += n
        out.extend((req, bytes(f)) for req, f in reader.buffer_updated(n))
        if not whole and at + n == end and pos < len(big):
            # the grown buffer is full: the transport's get_buffer grows it
            out.extend(feed(reader, big[pos : pos + 1], []))
            pos += 1
    assert pos == len(big)
    assert [(r.correlation_id, f) for r, f in out] == [(1, big[4:])]
    out = feed(reader, small, [])
    assert [(r.correlation_id, f) for r, f in out] == [(2, small[4:])]
    assert reader.frame_room() is None
