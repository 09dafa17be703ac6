"""The completed-offsets map of kpax.parallel.codec: round trips, fits the
broker's ``offset.metadata.max.bytes``, degrades to a prefix (never claims an
offset that is not done), rejects what is not its own."""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.parallel.codec import PREFIX, decode, encode


def _ranges(base: int, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(gap >= 1, length >= 1) pairs to sorted, disjoint, non-adjacent ranges after base."""
    out = []
    cursor = base
    for gap, length in pieces:
        start = cursor + gap
        out.append((start, start + length))
        cursor = start + length
    return out


def _offsets(ranges: list[tuple[int, int]]) -> set[int]:
    return {o for s, e in ranges for o in range(s, e)}


pieces = st.lists(
    st.tuples(st.integers(1, 40), st.integers(1, 40)) | st.tuples(st.just(1), st.just(1)),
    max_size=400,
)


@settings(max_examples=300, deadline=None)
@given(base=st.integers(0, 2**62), parts=pieces, max_bytes=st.integers(0, 5000))
def test_round_trip_within_the_budget_and_never_more_than_done(base, parts, max_bytes):
    ranges = _ranges(base, parts)
    enc = encode(base, ranges, max_bytes)
    assert len(enc.metadata) <= max_bytes
    assert enc.metadata.isascii()
    decoded = decode(enc.metadata, base)
    assert decoded is not None
    done = _offsets(ranges)
    got = _offsets(decoded)
    # only done offsets, all of those below `covered`, none at or above it
    assert got <= done
    assert got == {o for o in done if o < enc.covered}
    assert enc.covered >= base
    if max_bytes >= 4096 and len(parts) <= 200:
        assert got == done  # a default budget holds a few hundred runs whole


def test_picks_runs_for_long_runs_and_a_bitmap_for_alternation():
    runs = encode(100, [(101, 5000), (5001, 9000)], 4096)
    assert runs.metadata.startswith(f"{PREFIX}1:r:")
    assert runs.covered == 9000
    alternating = [(101 + 2 * i, 102 + 2 * i) for i in range(3000)]
    bits = encode(100, alternating, 4096)
    assert bits.metadata.startswith(f"{PREFIX}1:b:")
    assert decode(bits.metadata, 100) == alternating
    assert len(bits.metadata) < 1100  # 6000 offsets in 750 bytes of bitmap


def test_too_small_a_budget_commits_the_point_only():
    assert encode(7, [(9, 10)], 0).metadata == ""
    assert encode(7, [(9, 10)], 12).metadata == ""  # not even the header fits
    assert encode(7, [], 4096).metadata == ""
    assert encode(7, [], 4096).covered == 7


def test_a_prefix_when_the_whole_map_does_not_fit():
    alternating = [(11 + 2 * i, 12 + 2 * i) for i in range(100_000)]
    enc = encode(10, alternating, 4096)
    assert len(enc.metadata) <= 4096
    got = decode(enc.metadata, 10)
    assert got == alternating[: len(got)]
    assert 20_000 < enc.covered < 30_000  # ~3 KB of bitmap: about 24,000 offsets


def test_metadata_of_others_means_nothing_done():
    assert decode("", 5) == []
    assert decode(None, 5) == []
    assert decode("checkpoint at 17", 5) == []


def test_unusable_maps_are_told_apart():
    good = encode(50, [(52, 60)], 4096).metadata
    assert decode(good, 50) == [(52, 60)]
    assert decode(good, 51) is None  # written for another committed offset
    assert decode(good.replace(":1:", ":2:", 1), 50) is None  # a later version
    assert decode(f"{PREFIX}1:r:@@@", 50) is None
    assert decode(f"{PREFIX}1:x:AA", 50) is None
    assert decode(f"{PREFIX}1:r", 50) is None
    # a run of length 0, a truncated varint, bits past the bitmap's length
    for payload in (b"\x32\x01\x00", b"\x32\x81", b"\x32\x01\xff"):
        kind = "b" if payload == b"\x32\x01\xff" else "r"
        text = base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        assert decode(f"{PREFIX}1:{kind}:{text}", 50) is None, payload
