"""Record encode/decode throughput: kpax vs kafka-python vs aiokafka (C extension).

100,000 records, 100-byte values and 10-byte keys, no headers, 1,000 records a
batch (100 RecordBatch v2 batches), no compression, all three libraries in the
same run. Each measurement is repeated (interleaved between libraries) and the
best and median rounds are printed; the ratios use the best rounds.

"decode" means every record's offset, timestamp, key, value and headers are in
the user's hands: for kafka-python and aiokafka by iterating MemoryRecords
batches and reading those attributes; for kpax with ``batch.tuples()`` (the
bulk API) and, separately, with the friendly ``for rec in batch`` iterator.

kpax runs with its C accelerator (kpax.proto._speedups) when it is
built, and the same kpax cases run again in a subprocess with
KPAX_PURE_PYTHON=1, the pure-Python loops a machine without a C compiler gets;
those rows are marked "(pure Python)".

Usage: .venv/bin/python bench/proto.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from kpax.proto import crc
from kpax.proto.records import BatchBuilder, Record, decode_batches, encode_batch, encode_columns
from kpax.proto.records import v2 as _v2

N_RECORDS = 100_000
PER_BATCH = 1_000
TS0 = 1_700_000_000_000

VALUES = [os.urandom(100) for _ in range(N_RECORDS)]
KEYS = [b"key-%06d" % i for i in range(N_RECORDS)]
TIMESTAMPS = [TS0 + i for i in range(N_RECORDS)]
SLICES = [slice(s, s + PER_BATCH) for s in range(0, N_RECORDS, PER_BATCH)]
RECORDS = [Record(v, key=k, timestamp=t) for k, v, t in zip(KEYS, VALUES, TIMESTAMPS, strict=True)]


# ------------------------------------------------------------------ encoders


def kpax_encode_columns() -> bytes:
    return b"".join(
        encode_columns(TIMESTAMPS[s], KEYS[s], VALUES[s], base_offset=s.start) for s in SLICES
    )


def kpax_encode_builder() -> bytes:
    out = []
    for s in SLICES:
        b = BatchBuilder(batch_size=1 << 30)
        append = b.append
        for t, k, v in zip(TIMESTAMPS[s], KEYS[s], VALUES[s], strict=True):
            append(t, k, v, None)
        out.append(b.build(base_offset=s.start))
    return b"".join(out)


def kpax_encode_records() -> bytes:
    return b"".join(encode_batch(RECORDS[s], base_offset=s.start) for s in SLICES)


def _their_encode(builder_cls: type) -> bytes:
    out = []
    for s in SLICES:
        b = builder_cls(
            magic=2,
            compression_type=0,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 30,
        )
        append = b.append
        for i, (t, k, v) in enumerate(zip(TIMESTAMPS[s], KEYS[s], VALUES[s], strict=True)):
            append(i, timestamp=t, key=k, value=v, headers=[])
        data = bytearray(b.build())
        data[0:8] = s.start.to_bytes(8, "big")
        out.append(bytes(data))
    return b"".join(out)


def kafka_python_encode() -> bytes:
    return _their_encode(KpBuilder)


def aiokafka_encode() -> bytes:
    return _their_encode(AioBuilder)


# ------------------------------------------------------------------ decoders


def kpax_decode_tuples(data: bytes) -> int:
    n = 0
    for batch in decode_batches(data):
        n += len(batch.tuples())
    return n


def kpax_decode_iter(data: bytes) -> int:
    n = 0
    for batch in decode_batches(data):
        for r in batch:
            _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
            n += 1
    return n


def _their_decode(mr_cls: type, data: bytes) -> int:
    n = 0
    mr = mr_cls(data)
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
            n += 1
    return n


def kafka_python_decode(data: bytes) -> int:
    return _their_decode(KpMemoryRecords, data)


def aiokafka_decode(data: bytes) -> int:
    return _their_decode(AioMemoryRecords, data)


# ------------------------------------------------------------------ harness


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return N_RECORDS / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kpax-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    data = kpax_encode_columns()
    # the encoders agree (kafka-python writes partitionLeaderEpoch 0 where Java and kpax
    # write -1; that field is outside the CRC) and every decoder reads the same records
    assert data == kpax_encode_builder() == kpax_encode_records()
    rows = [r for b in decode_batches(data) for r in b.tuples()]
    for other in (kafka_python_encode(), aiokafka_encode()):
        assert [r for b in decode_batches(other) for r in b.tuples()] == rows
    assert kpax_decode_tuples(data) == kafka_python_decode(data) == N_RECORDS

    cases: dict[str, Callable[[], object]] = {
        "encode  kpax encode_columns": kpax_encode_columns,
        "encode  kpax BatchBuilder.append+build": kpax_encode_builder,
        "encode  kpax encode_batch(Record list)": kpax_encode_records,
        "encode  kafka-python": kafka_python_encode,
        "encode  aiokafka (C ext)": aiokafka_encode,
        "decode  kpax batch.tuples()": lambda: kpax_decode_tuples(data),
        "decode  kpax for rec in batch": lambda: kpax_decode_iter(data),
        "decode  kafka-python": lambda: kafka_python_decode(data),
        "decode  aiokafka (C ext)": lambda: aiokafka_decode(data),
    }
    if args.kpax_only:
        cases = {k: v for k, v in cases.items() if "kpax" in k}
    pure: subprocess.Popen[str] | None = None
    if not args.kpax_only and _v2.SPEEDUPS:
        # the pure-Python rows, measured in a process that does not load the accelerator
        pure = subprocess.Popen(
            [sys.executable, __file__, "--kpax-only", "--rounds", str(args.rounds)],
            env={**os.environ, "KPAX_PURE_PYTHON": "1"},
            stdout=subprocess.PIPE,
            text=True,
        )
        pure_out, _ = pure.communicate()
        if pure.returncode != 0:
            raise SystemExit("the pure-Python run failed")
    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            results[name].append(_time(fn))
    if args.kpax_only:
        print(json.dumps(results))
        return
    if pure is not None:
        for name, vals in json.loads(pure_out).items():
            results[f"{name} (pure Python)"] = vals
        results = dict(sorted(results.items(), key=lambda kv: kv[0].split()[0]))
    best = {name: max(v) for name, v in results.items()}

    print(
        f"{N_RECORDS:,} records x 100 B values, {PER_BATCH} per batch, no compression, "
        f"best and median of {args.rounds} rounds; CRC-32C backend: {crc.CRC32C_BACKEND}; "
        f"C accelerator: {'built' if _v2.SPEEDUPS else 'not built'}"
    )
    print(
        f"{'case':56} {'best rec/s':>12} {'median':>12} {'vs kafka-python':>16} {'vs aiokafka':>12}"
    )
    for name, vals in results.items():
        kind = name.split()[0]
        kp = best[f"{kind}  kafka-python"]
        aio = best[f"{kind}  aiokafka (C ext)"]
        print(
            f"{name:56} {best[name]:12,.0f} {statistics.median(vals):12,.0f} "
            f"{best[name] / kp:15.2f}x {best[name] / aio:11.2f}x"
        )

    blob = os.urandom(1 << 20)
    print("\nCRC over 1 MiB (MB/s):", end="")
    for label, fn in [*crc.available_backends().items(), ("zlib crc32", crc.crc32)]:
        start = time.perf_counter()
        for _ in range(20):
            fn(blob)
        print(f"  {label}: {20 / (time.perf_counter() - start):,.0f}", end="")
    print()


if __name__ == "__main__":
    main()
