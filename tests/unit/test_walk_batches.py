"""The C walk over fetched batches (``_speedups.walk_batches``, used by
``decode_batches``) against the pure-Python walk.

With the accelerator, ``decode_batches`` frames and CRC-checks the good v2 batches
from the start in one C call (and, ``check_records``, scans the
records of the uncompressed ones), then walks the rest in Python. On any input --
valid, corrupted, truncated, legacy -- it must yield the very batches the Python
walk yields and raise the very error, at the same point; and a batch marked as
scanned must be one ``scan_records`` accepts, with the same count.
"""

from __future__ import annotations

import contextlib
import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.proto import crc
from kpax.proto import records as R
from kpax.proto.errors import CorruptRecordError, KafkaError
from kpax.proto.records import Record, RecordBatchV2, decode_batches, encode_batch, v2

needs_c = pytest.mark.skipif(R._walk_batches is None, reason="runs only with the accelerator built")

TEMPLATE = ("t", 0, 0, 0, 0, None, None, (), -1)
SLOTS = (2, 3, 5, 6, 7)

header_lists = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
    ),
)
records = st.lists(
    st.builds(
        Record,
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=10)),
        header_lists,
        st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=8,
)


@st.composite
def fetched(draw: Any) -> bytes:
    """Batches as a Fetch response holds them, then maybe corrupted."""
    out = b""
    base = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(0, 5))):
        recs = draw(records)
        magic = draw(st.sampled_from([2, 2, 2, 2, 2, 2, 1]))
        if magic < 2:  # no headers before v2
            recs = [Record(r.value, r.key, None, r.timestamp) for r in recs]
        out += encode_batch(
            recs,
            base_offset=base,
            compression=draw(st.sampled_from([None, None, None, "gzip", "lz4"])),
            magic=magic,
        )
        base += len(recs)
    raw = bytearray(out)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "garbage", "magic", "count"]))
        if kind == "flip" and raw:
            at = draw(st.integers(0, len(raw) - 1))
            raw[at] ^= draw(st.integers(1, 255))
        elif kind == "truncate" and raw:
            del raw[draw(st.integers(0, len(raw) - 1)) :]
        elif kind == "garbage":
            raw += draw(st.binary(max_size=80))
        elif kind == "magic" and len(raw) > 16:
            raw[16] = draw(st.sampled_from([0, 1, 3, 0xFF]))
        elif kind == "count" and len(raw) >= 61:
            (count,) = struct.unpack_from(">i", raw, 57)
            struct.pack_into(">i", raw, 57, draw(st.integers(-1, max(count, 0) + 1)))
    if draw(st.booleans()) and len(raw) >= 61 and raw[16] == 2:
        # the first batch's CRC made good again: the header and record checks alone
        # must find what was changed in it
        (length,) = struct.unpack_from(">i", raw, 8)
        end = 12 + length
        if 21 <= end <= len(raw):
            struct.pack_into(">I", raw, 17, crc.crc32c(bytes(raw[21:end])))
    return bytes(raw)


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except KafkaError as exc:  # the class and the message the consumer shows
        return ("error", type(exc).__name__, str(exc))


def _summary(batch: Any, min_offset: int | None) -> tuple[Any, ...]:
    if not isinstance(batch, RecordBatchV2):
        return ("legacy", _outcome(lambda: (batch.base_offset, batch.next_offset, list(batch))))
    fields = [f for f in RecordBatchV2.__slots__ if not f.startswith("_") and f != "checked"]
    head = tuple(getattr(batch, f) for f in fields)
    rows = _outcome(lambda: batch.checked_rows(TEMPLATE, SLOTS, min_offset))
    if rows[0] == "ok":  # the arguments that build the records later, then the records
        n, args = rows[1]
        built = _outcome(lambda: v2.parse_rows(*args))
        rows = ("ok", n, bytes(args[0][args[1] : args[2]]), args[3:], built)
    return ("v2", batch._start, batch._end, head, rows)


def _walk(data: Any, walker: Any, **kw: Any) -> tuple[list[Any], Any]:
    """What a consumer gets: the batches up to the first error, then the error."""
    saved = R._walk_batches
    R._walk_batches = walker
    got: list[Any] = []
    try:
        for b in decode_batches(data, **kw):
            got.append(b)
        err = None
    except KafkaError as exc:
        err = (type(exc).__name__, str(exc))
    finally:
        R._walk_batches = saved
    return [_summary(b, kw.get("min_offset")) for b in got], err


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fetched(),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 2**40 + 40)),
    st.booleans(),
    st.booleans(),
)
def test_the_c_walk_gives_what_the_python_walk_gives(
    data: bytes,
    validate_crc: bool,
    check_records: bool,
    min_offset: int | None,
    view: bool,
    borrow: bool,
) -> None:
    kw = {"validate_crc": validate_crc, "check_records": check_records, "min_offset": min_offset}
    want = _walk(data, None, **kw)
    # a memoryview of a bytearray (a Fetch response's records) is copied to bytes,
    # or read where it is when borrowed
    arg: Any = memoryview(bytearray(data)) if view else data
    assert _walk(arg, R._walk_batches, borrow=borrow, **kw) == want
    # batches the C walk scanned: scan_records accepts them, with the same count
    with contextlib.suppress(KafkaError):
        for b in decode_batches(data, **kw):
            if isinstance(b, RecordBatchV2) and b.checked is not None:
                assert check_records and not b.attributes & 7
                args = (b._buf, b._start, b._end, b.count, b.base_offset, min_offset)
                assert b.checked == (min_offset, v2._py_scan_records(*args))


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(fetched(), st.one_of(st.none(), st.integers(0, 2**40 + 40)), st.booleans()),
        max_size=4,
    ),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_walk_many_walks_each_partition_as_walk_batches_does(
    parts: list[tuple[bytes, int | None, bool]],
    validate_crc: bool,
    check_records: bool,
    borrow: bool,
) -> None:
    """A Fetch response's partitions walked in one call: each walk is what
    walk_batches gives for it, and decode_batches given it yields the same."""
    datas: list[Any] = [memoryview(bytearray(d)) if view else d for d, _, view in parts]
    mins = [mo for _, mo, _ in parts]
    walks = R.walk_many(
        datas, mins, validate_crc=validate_crc, check_records=check_records, borrow=borrow
    )
    assert walks is not None
    for data, mo, walk in zip(datas, mins, walks, strict=True):
        assert walk == R._walk_batches(data, validate_crc, check_records, mo, borrow)
        kw = {"validate_crc": validate_crc, "check_records": check_records, "min_offset": mo}
        want = _walk(data, R._walk_batches, borrow=borrow, **kw)
        assert _walk(data, R._walk_batches, borrow=borrow, walked=walk, **kw) == want


@needs_c
def test_walk_many_on_a_large_response_and_bad_arguments() -> None:
    """Above 256 KiB the walks run with the GIL released: the same results; and
    arguments that do not fit are refused, not walked."""
    batch = encode_batch([Record(b"x" * 100, timestamp=1)] * 100, base_offset=0)
    big = memoryview(bytearray(batch * 40))  # ~440 KiB
    walks = R.walk_many([big, batch], [0, None], check_records=True, borrow=True)
    assert walks is not None
    assert walks[0][0] is big and len(walks[0][1]) == 80 and walks[0][2] == len(big)
    assert walks[1][1] == [0, 100]
    with pytest.raises(ValueError, match="differ in length"):
        R._walk_many([batch], [], True, True, False)
    with pytest.raises(TypeError):
        R._walk_many([batch], ["0"], True, True, False)
    with pytest.raises(TypeError):
        R._walk_many(["not bytes"], [None], True, True, False)


@needs_c
def test_a_borrowed_view_is_read_where_it_is_and_anything_else_is_copied() -> None:
    data = b"".join(
        encode_batch([Record(b"v%d" % i, timestamp=i)] * 3, base_offset=3 * i) for i in range(4)
    )
    frame = bytearray(b"head" + data)
    view = memoryview(frame)[4:]
    borrowed = list(decode_batches(view, check_records=True, min_offset=0, borrow=True))
    assert all(b._buf is view for b in borrowed)  # no copy
    # A fetch's partial batch at the end (the broker cuts at a size): still no copy.
    big = b"".join(
        encode_batch([Record(b"x" * 100, timestamp=1)] * 100, base_offset=100 * i)
        for i in range(50)
    )
    cut = memoryview(bytearray(big + big[:40]))
    tracemalloc.start()
    try:
        got = list(decode_batches(cut, borrow=True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(got) == 50 and all(b._buf is cut for b in got)
    assert peak < len(big) // 4, f"{peak} bytes allocated walking {len(big)}: copied"
    assert [r.value for b in borrowed for r in b] == [b"v%d" % (i // 3) for i in range(12)]
    copied = list(decode_batches(view, check_records=True, min_offset=0))
    assert all(type(b._buf) is bytes for b in copied)
    got = list(decode_batches(frame[4:], borrow=True))  # not a view: copied even if borrowed
    assert all(type(b._buf) is bytes for b in got) and len(got) == 4
    # A legacy message after the v2 batches: the walk goes on in Python, on bytes.
    legacy = encode_batch([Record(b"old", timestamp=1)], base_offset=12, magic=1)
    tail = memoryview(bytearray(data + legacy))
    got = list(decode_batches(tail, borrow=True))
    assert [b.base_offset for b in got] == [0, 3, 6, 9, 12]
    assert [r.value for r in got[-1]] == [b"old"]


def _with_header_key(key: bytes) -> bytes:
    """One batch whose record has a header key of these raw bytes (CRC made good)."""
    placeholder = "Q" * len(key)
    raw = bytearray(encode_batch([Record(b"v", headers=[(placeholder, b"h")], timestamp=5)]))
    # header(61) length attributes ts-delta offset-delta key(null) value-length "v"
    # header-count key-length: one byte each here
    at = 61 + 9
    assert raw[at : at + len(key)] == placeholder.encode()
    raw[at : at + len(key)] = key
    struct.pack_into(">I", raw, 17, crc.crc32c(bytes(raw[21:])))
    return bytes(raw)


@needs_c
@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.binary(min_size=1, max_size=8),
        st.text(min_size=1, max_size=4).map(lambda s: s.encode("utf-8", "surrogatepass")),
    )
)
def test_header_keys_are_utf8_checked_as_python_checks_them(key: bytes) -> None:
    """The C scan checks header keys without Python's decoder:
    it must accept exactly what ``bytes.decode("utf-8")`` accepts."""
    data = _with_header_key(key)
    try:
        key.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    (batch,) = decode_batches(data, check_records=True, min_offset=0)
    assert (batch.checked == (0, 1)) is valid
    if not valid:
        with pytest.raises(CorruptRecordError, match="not UTF-8"):
            batch.checked_rows(TEMPLATE, SLOTS, 0)
    assert _walk(data, None, check_records=True, min_offset=0) == _walk(
        data, R._walk_batches, check_records=True, min_offset=0
    )


@needs_c
def test_a_large_response_of_many_batches_gives_the_same_batches() -> None:
    """A response of many batches (a fetch's size): the same results."""
    data = b"".join(
        encode_batch(
            [
                Record(
                    bytes([i % 251]) * 100, headers=[("k", b"v")] if i % 7 else None, timestamp=i
                )
                for i in range(b * 50, b * 50 + 50)
            ],
            base_offset=b * 50,
        )
        for b in range(40)
    )
    assert len(data) > 64 * 1024
    bad = bytearray(data)
    bad[len(data) // 2] ^= 0x40  # a batch in the middle fails its CRC
    for d in (data, bytes(bad), data + data[:100]):
        for mo in (None, 0, 1000):
            kw = {"check_records": True, "min_offset": mo}
            want = _walk(memoryview(bytearray(d)), None, **kw)
            assert _walk(memoryview(bytearray(d)), R._walk_batches, **kw) == want
    many = b"".join(encode_batch([Record(b"x", timestamp=1)], base_offset=i) for i in range(600))
    kw = {"check_records": True, "min_offset": 0}  # more batches than one pass of the walk
    assert _walk(many, R._walk_batches, **kw) == _walk(many, None, **kw)
    assert len(R._walk_batches(many, True, True, 0)[1]) == 1200
    buf, found, stop = R._walk_batches(memoryview(bytearray(data)), True, True, 25)
    assert buf == data and stop == len(data) and len(found) == 80
    assert found[1] == 25 and found[3::2] == [50] * 39  # records at or after offset 25


@needs_c
def test_a_crc_failure_names_the_batch_and_the_good_batches_before_it_are_kept() -> None:
    good = encode_batch([Record(b"a", timestamp=1)] * 3, base_offset=0)
    bad = bytearray(encode_batch([Record(b"b", timestamp=1)] * 3, base_offset=3))
    bad[-2] ^= 1
    got = []
    with pytest.raises(CorruptRecordError, match="batch at offset 3 fails its CRC-32C check"):
        for b in decode_batches(good + bytes(bad) + good, check_records=True, min_offset=0):
            got.append(b)
    assert [b.base_offset for b in got] == [0] and got[0].checked == (0, 3)


_LIST_CHANGER = """
from kpax.proto import records as R
from kpax.proto.records import Record, encode_batch

class ClearsTheList:
    def __index__(self) -> int:
        datas.clear()  # frees the bytes below: the list held their only reference
        return 0

datas = [bytearray(encode_batch([Record(b"v" * 50, timestamp=1)] * 3)) for _ in range(2)]
walks = R._walk_many(datas, [ClearsTheList(), None], True, True, False)
assert [len(w[1]) for w in walks] == [2, 2], walks
print("ok")
"""


@needs_c
def test_walk_many_is_safe_when_reading_an_argument_changes_its_list() -> None:
    """A min_offset's __index__ that empties the data list while walk_many reads
    it: the walk reads what it was given, not freed memory (a child process, so a
    crash fails the test rather than the run)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _LIST_CHANGER],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
