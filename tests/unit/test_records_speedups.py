"""The C accelerator (kpax.proto._speedups) against the pure-Python loops.

Both implementations must agree byte for byte on encoding, row for row on
decoding, and on *whether* any input is corrupt (messages may word the same
fault differently). The pure-Python loops stay the reference: they are what
kpax runs where no C compiler was available at install time
(``KPAX_PURE_PYTHON=1`` forces them).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpax.proto.errors import CorruptRecordError
from kpax.proto.records import v2

speedups = pytest.importorskip("kpax.proto._speedups") if v2.SPEEDUPS else None

I64 = st.integers(-(2**63), 2**63 - 1)
blobs = st.one_of(st.none(), st.binary(max_size=300))
header_lists = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40))), max_size=4
    ),
)


def test_the_accelerator_is_built_here() -> None:
    """make test installs with a compiler: the suite must exercise the C loops."""
    if os.environ.get("KPAX_PURE_PYTHON", "") not in ("", "0"):
        assert not v2.SPEEDUPS
    else:
        assert v2.SPEEDUPS, "kpax.proto._speedups did not build (see pip's output)"
        assert v2.parse_records is not v2._py_parse_records


needs_c = pytest.mark.skipif(speedups is None, reason="runs only with the accelerator built")


@st.composite
def columns(draw: Any) -> tuple[list[int], list[Any], list[Any], list[Any] | None, int]:
    n = draw(st.integers(0, 40))
    base = draw(st.integers(-(2**40), 2**40))
    spread = draw(st.sampled_from([0, 1000, 2**20, 2**40]))
    ts = [base + draw(st.integers(-spread, spread)) for _ in range(n)]
    keys = [draw(blobs) for _ in range(n)]
    values = [draw(blobs) for _ in range(n)]
    headers = [draw(header_lists) for _ in range(n)] if draw(st.booleans()) else None
    return ts, keys, values, headers, base


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns())
def test_encode_agrees_with_python(cols: Any) -> None:
    ts, keys, values, headers, base = cols
    expected = v2._py_encode_records(ts, keys, values, headers, base)
    assert speedups.encode_records(ts, keys, values, headers, base) == expected
    # tuples, bytearrays and memoryviews are accepted like bytes
    wrapped = [bytearray(v) if v is not None else None for v in values]
    got = speedups.encode_records(tuple(ts), tuple(keys), wrapped, headers, base)
    assert got == expected
    if values:
        rows = v2._py_parse_records(expected, 0, len(expected), len(values), 7, base)
        assert speedups.parse_records(expected, 0, len(expected), len(values), 7, base) == rows


@needs_c
@given(
    columns(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 0x7F),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**15 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**31 - 1),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_encode_batch_is_encode_records_plus_assemble_batch(
    cols: Any, base_offset: int, attributes: int, pid: int, epoch: int, seq: int, ple: int
) -> None:
    """The fused C batch encoder (records, header and CRC in one buffer, the copy
    and the CRC without the GIL) gives the very bytes of the two-step path."""
    ts, keys, values, headers, base = cols
    if not ts:
        return
    attributes &= ~0x07  # uncompressed
    try:
        records = v2._py_encode_records(ts, keys, values, headers, base)
    except (ValueError, OverflowError):
        return  # out of range for the format: test_encode_rejects_what_python_rejects
    want = v2.assemble_batch(
        records,
        count=len(ts),
        base_offset=base_offset,
        attributes=attributes,
        last_offset_delta=len(ts) - 1,
        base_timestamp=base,
        max_timestamp=max(ts),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        partition_leader_epoch=ple,
    )
    assert speedups is not None
    got = speedups.encode_batch(
        ts, keys, values, headers, base, base_offset, attributes, pid, epoch, seq, ple
    )
    assert got == want
    # bytearray and memoryview values take the copying path: same bytes
    mixed = [bytearray(v) if isinstance(v, bytes) and i % 2 else v for i, v in enumerate(values)]
    assert (
        speedups.encode_batch(
            ts, keys, mixed, headers, base, base_offset, attributes, pid, epoch, seq, ple
        )
        == want
    )


@needs_c
@given(
    columns(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 0x7F),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**31 - 1),
    st.sampled_from([b"", b"\x01", b"\xab" * 600]),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_encode_batch_lz4_is_records_plus_lz4_frame_plus_assemble_batch(
    cols: Any, base_offset: int, attributes: int, pid: int, seq: int, filler: bytes
) -> None:
    """The fused C lz4 batch encoder (records, their LZ4 frame, header and CRC)
    gives the very bytes of the three-step path, compressible values or not."""
    from kpax.proto.compression import LZ4_FRAME_HEADER
    from kpax.proto.records import decode_batches

    ts, keys, values, headers, base = cols
    if not ts:
        return
    values = [v + filler if v is not None else None for v in values]
    attributes = (attributes & ~0x07) | 3  # lz4
    try:
        records = v2._py_encode_records(ts, keys, values, headers, base)
    except (ValueError, OverflowError):
        return
    assert speedups is not None
    want = v2.assemble_batch(
        speedups.lz4_frame(records, LZ4_FRAME_HEADER),
        count=len(ts),
        base_offset=base_offset,
        attributes=attributes,
        last_offset_delta=len(ts) - 1,
        base_timestamp=base,
        max_timestamp=max(ts),
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        partition_leader_epoch=-1,
    )
    got = speedups.encode_batch_lz4(
        ts, keys, values, headers, base, base_offset, attributes, pid, 0, seq, -1,
        LZ4_FRAME_HEADER,
    )  # fmt: skip
    assert got == want
    if not attributes & 0x20:  # (a control batch's records are not plain records)
        [batch] = decode_batches(got)
        assert [r.value for r in batch] == values
    with pytest.raises(ValueError, match="lz4"):
        speedups.encode_batch_lz4(
            ts, keys, values, headers, base, 0, attributes & ~0x07, pid, 0, seq, -1,
            LZ4_FRAME_HEADER,
        )  # fmt: skip


@needs_c
def test_encode_rejects_what_python_rejects() -> None:
    with pytest.raises(TypeError, match="bytes-like or None"):
        speedups.encode_records([0], [None], ["text"], None, 0)
    with pytest.raises(TypeError, match="header key must be str"):
        speedups.encode_records([0], [None], [b"v"], [[(b"k", b"v")]], 0)
    with pytest.raises(ValueError, match="same length"):
        speedups.encode_records([0, 1], [None], [b"v"], None, 0)
    with pytest.raises(ValueError, match="too far"):
        speedups.encode_records([2**63 - 1], [None], [b"v"], None, -(2**63))


def _outcome(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except CorruptRecordError:
        return CorruptRecordError


def _mutants(rng: random.Random, data: bytes, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        b = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            if not b:
                break
            pos = rng.randrange(len(b))
            op = rng.randrange(5)
            if op == 0:
                b[pos] ^= 1 << rng.randrange(8)
            elif op == 1:
                b[pos] = rng.choice([0, 1, 0x7F, 0x80, 0xFE, 0xFF])
            elif op == 2:
                del b[pos:]
            elif op == 3:
                b[pos:pos] = rng.randbytes(rng.randint(1, 6))
            else:
                b[pos : pos + 11] = b"\xff" * rng.randint(1, 11)
        out.append(bytes(b))
    return out


@needs_c
def test_differential_fuzz_of_the_record_parser() -> None:
    """30,000 mutated records sections: both parsers return the same rows or both
    raise CorruptRecordError (never another exception, never a crash)."""
    rng = random.Random(7)
    seeds = []
    for n in (1, 2, 5):
        ts = [1_700_000_000_000 + rng.randint(-5, 10**6) for _ in range(n)]
        keys = [rng.randbytes(rng.randint(0, 5)) if i % 2 else None for i in range(n)]
        values = [rng.randbytes(rng.randint(0, 150)) if i % 3 else None for i in range(n)]
        headers = [[("k", b"v"), ("\u00e9", None)] if i % 2 else None for i in range(n)]
        seeds.append((v2._py_encode_records(ts, keys, values, headers, ts[0]), n, ts[0]))
    outcomes = {"ok": 0, "corrupt": 0}
    for data, n, base in seeds:
        for m in _mutants(rng, data, 10_000):
            count = n if rng.random() < 0.9 else rng.choice([0, n - 1, n + 1, 2**31 - 1])
            py = _outcome(v2._py_parse_records, m, 0, len(m), count, 100, base)
            c = _outcome(speedups.parse_records, m, 0, len(m), count, 100, base)
            assert c == py, m.hex()
            outcomes["corrupt" if py is CorruptRecordError else "ok"] += 1
    assert outcomes["ok"] > 1000 and outcomes["corrupt"] > 10_000, outcomes


def _message(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except CorruptRecordError as e:
        return str(e)


@needs_c
def test_scan_records_checks_what_parse_records_checks() -> None:
    """scan_records (no record built) raises the same CorruptRecordError as
    parse_records on 20,000 mutated sections, and otherwise counts the rows at or
    after min_offset; the pure-Python version agrees."""
    rng = random.Random(11)
    ts = [1_700_000_000_000 + i // 2 for i in range(6)]
    keys = [b"k%d" % i if i % 2 else None for i in range(6)]
    values = [rng.randbytes(rng.randint(0, 80)) for _ in range(6)]
    headers = [[("h", b"v")] if i == 3 else None for i in range(6)]
    data = v2._py_encode_records(ts, keys, values, headers, ts[0])
    corrupt = 0
    for m in [data, *_mutants(rng, data, 20_000)]:
        min_offset = rng.choice([None, 100, 102, 106])
        rows = _message(
            speedups.parse_records, m, 0, len(m), 6, 100, 0, None, None, None, min_offset
        )
        scanned = _message(speedups.scan_records, m, 0, len(m), 6, 100, min_offset)
        if isinstance(rows, str):
            corrupt += 1
            assert scanned == rows, m.hex()
            py = _outcome(v2._py_scan_records, m, 0, len(m), 6, 100, min_offset)
            assert py is CorruptRecordError, m.hex()
        else:
            assert scanned == len(rows) == v2._py_scan_records(m, 0, len(m), 6, 100, min_offset)
    assert corrupt > 5_000
    assert v2._py_scan_records(data, 0, len(data), 6, 100, 102) == 4


class Row(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: Any
    epoch: int


def test_rows_from_a_template() -> None:
    """parse_rows (C or Python): NamedTuple rows, min_offset, a fixed timestamp."""
    ts = [1000, 1001, 1005]
    data = v2.encode_records(
        ts, [None, b"k", b""], [b"a", None, b"c"], [None, [("h", b"1")], None], 1000
    )
    template = Row("t", 3, 0, 0, 1, None, None, (), 9)
    slots = (2, 3, 5, 6, 7)
    for parse in (v2._py_parse_rows, v2.parse_rows):
        rows = parse(data, 0, len(data), 3, 50, 1000, template, slots, None, 51)
        assert rows == [
            Row("t", 3, 51, 1001, 1, b"k", None, (("h", b"1"),), 9),
            Row("t", 3, 52, 1005, 1, b"", b"c", (), 9),
        ]
        assert all(type(r) is Row for r in rows)
        fixed = parse(data, 0, len(data), 3, 50, 1000, timestamp=77)
        assert [r[1] for r in fixed] == [77, 77, 77]


@needs_c
def test_bad_arguments_are_errors_not_crashes() -> None:
    data = v2.encode_records([0], [None], [b"v"], None, 0)
    with pytest.raises(ValueError, match="bad bounds"):
        speedups.parse_records(data, 0, len(data) + 1, 1, 0, 0)
    with pytest.raises(ValueError, match="bad bounds"):
        speedups.parse_records(data, -1, len(data), 1, 0, 0)
    with pytest.raises(ValueError, match="outside the template"):
        speedups.parse_records(data, 0, len(data), 1, 0, 0, (1, 2), (0, 1, 2, 3, 4))
    with pytest.raises(ValueError, match="must differ"):
        speedups.parse_records(data, 0, len(data), 1, 0, 0, (1,) * 6, (0, 0, 1, 2, 3))
    with pytest.raises(CorruptRecordError, match="declares 1000000 records"):
        speedups.parse_records(data, 0, len(data), 1_000_000, 0, 0)


@needs_c
def test_no_memory_leak_on_success_and_error_paths() -> None:
    rng = random.Random(3)
    ts = list(range(200))
    values = [rng.randbytes(50) for _ in ts]
    hdrs = [[("a", b"b")] for _ in ts]
    data = speedups.encode_records(ts, values, values, hdrs, 0)
    bad = data[:-3] + b"\xff\xff\xff"

    def cycle() -> None:
        speedups.encode_records(ts, values, values, hdrs, 0)
        speedups.encode_batch(ts, values, values, None, 0, 0, 0, 1, 0, 0, -1)  # plain: no GIL
        speedups.encode_batch(ts, values, values, hdrs, 0, 0, 0, 1, 0, 0, -1)
        with pytest.raises(ValueError):
            speedups.encode_batch([], [], [], None, 0, 0, 0, 1, 0, 0, -1)
        speedups.encode_batch_lz4(ts, values, values, hdrs, 0, 0, 3, 1, 0, 0, -1, b"hdr")
        with pytest.raises(ValueError):
            speedups.encode_batch_lz4([], [], [], None, 0, 0, 3, 1, 0, 0, -1, b"hdr")
        with pytest.raises(TypeError):
            speedups.encode_batch_lz4(["x"], [None], [b"v"], None, 0, 0, 3, 1, 0, 0, -1, b"hdr")
        speedups.parse_records(data, 0, len(data), 200, 0, 0)
        speedups.parse_records(data, 0, len(data), 200, 0, 0, (0,) * 5, (4, 3, 2, 1, 0), 5, 10)
        with pytest.raises(CorruptRecordError):
            speedups.parse_records(bad, 0, len(bad), 200, 0, 0)

    for _ in range(50):
        cycle()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            cycle()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 200_000, f"{grown} bytes not freed after 300 encode/parse cycles"


@needs_c
def test_the_pure_python_fallback_passes_the_records_suite() -> None:
    """What a machine without a C compiler runs: the records tests and their
    100,000-case fuzz, in a subprocess that never loads the accelerator."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/unit/test_records.py",
            "tests/unit/test_records_fuzz.py",
            "tests/unit/test_compression.py",
        ],
        cwd=root,
        env={**os.environ, "KPAX_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-500:]


@needs_c
def test_python_code_running_mid_encode_cannot_corrupt_memory() -> None:
    """A timestamp's __index__ or a headers iterable may run Python code while the
    encoder works: it must see a consistent snapshot (or fail cleanly), never write
    past its buffer. (Found by review; these crashed an earlier build.)"""
    keys: list[Any] = [bytearray(b"k"), b"x"]

    class Grows:
        def __index__(self) -> int:
            keys[0].extend(b"A" * 100_000)
            return 5

    data = speedups.encode_records([1, Grows()], keys, [b"v", b"w"], None, 0)
    rows = v2._py_parse_records(data, 0, len(data), 2, 0, 0)
    assert [r[2] for r in rows] == [b"k" + b"A" * 100_000, b"x"]

    class MoreEachTime:
        n = 0

        def __iter__(self) -> Any:
            MoreEachTime.n += 1
            return iter([("k", b"x" * 1000)] * MoreEachTime.n)

    data = speedups.encode_records([1], [b"a"], [b"b"], [MoreEachTime()], 0)
    assert v2._py_parse_records(data, 0, len(data), 1, 0, 0)[0][4] == (("k", b"x" * 1000),)

    class NotPairsLater:
        n = 0

        def __iter__(self) -> Any:
            NotPairsLater.n += 1
            return iter([("k", b"v")] if NotPairsLater.n == 1 else [12345])

    data = speedups.encode_records([1], [b"a"], [b"b"], [NotPairsLater()], 0)
    assert v2._py_parse_records(data, 0, len(data), 1, 0, 0)[0][4] == (("k", b"v"),)


def test_row_templates_refuse_what_tuple_new_refuses() -> None:
    """os.stat_result is a tuple subclass whose instances have hidden fields: rows
    cannot be made of it (the C loop used to crash on it)."""
    data = v2.encode_records([1], [b"k"], [b"v"], None, 0)
    with pytest.raises(TypeError):
        v2.parse_rows(data, 0, len(data), 1, 0, 0, os.stat("/"), (0, 1, 2, 3, 4))


def test_min_offset_and_overlong_varints_agree() -> None:
    """Out-of-order offset deltas are filtered the same way by both loops, and a 10-byte
    varint above 64 bits is corrupt for both."""
    from kpax.proto.varint import encode_varint

    body = b"\x00" + encode_varint(0) + encode_varint(5) + b"\x01" + b"\x02v" + b"\x00"
    body2 = b"\x00" + encode_varint(0) + encode_varint(0) + b"\x01" + b"\x02w" + b"\x00"
    data = encode_varint(len(body)) + body + encode_varint(len(body2)) + body2
    for parse in (v2._py_parse_rows, v2.parse_rows):
        rows = parse(data, 0, len(data), 2, 0, 0, (0,) * 5, (0, 1, 2, 3, 4), None, 3)
        assert [r[0] for r in rows] == [5]
    bad = b"\x00" + encode_varint(0) + b"\x80" * 9 + b"\x02" + b"\x01\x02v\x00"
    bad = encode_varint(len(bad)) + bad
    for parse in (v2._py_parse_records, v2.parse_records):
        with pytest.raises(CorruptRecordError):
            parse(bad, 0, len(bad), 1, 0, 0)


def test_a_batchs_build_arguments_are_not_tracked_by_the_cyclic_gc() -> None:
    """A consumer keeps each batch's build arguments until its records are read;
    tracked, they were most of what the GC's older generations walked (4 full
    collections per 3M records read, 38 ms). They hold bytes, ints and the
    template only: untracked, they cost the GC nothing, and the records are the
    same."""
    import gc

    from kpax.consumer.record import ConsumerRecord
    from kpax.proto.records import Record, decode_batches, encode_batch

    data = encode_batch(
        [Record(b"v%d" % i, key=b"k%d" % i, timestamp=1_000 + i) for i in range(5)],
        base_offset=0,
    )
    (batch,) = decode_batches(memoryview(data))
    template = ConsumerRecord("t", 0, 0, 0, 0, None, None, (), 3)
    n, args = batch.checked_rows(template, (2, 3, 5, 6, 7), 2)
    assert n == 3
    if v2.SPEEDUPS:
        assert not gc.is_tracked(args)
    rows = v2.parse_rows(*args)
    assert [(r.offset, r.key, r.value, r.leader_epoch) for r in rows] == [
        (2, b"k2", b"v2", 3),
        (3, b"k3", b"v3", 3),
        (4, b"k4", b"v4", 3),
    ]


@pytest.mark.skipif(not v2.SPEEDUPS, reason="runs only with the accelerator built")
def test_untrack_takes_tuples_only_and_returns_them() -> None:
    import gc

    t = (memoryview(b"x"), 1)
    assert gc.is_tracked(t)
    assert v2.untrack(t) is t
    assert not gc.is_tracked(t)
    assert v2.untrack(t) is t  # (again: nothing to do)
    with pytest.raises(TypeError, match="tuple"):
        v2.untrack([1])  # type: ignore[type-var]
