"""Fuzz the record decoder: 100,000+ mutated batches of every format and codec.

Whatever the bytes, decoding (including full record iteration) either succeeds
or raises CorruptRecordError: never IndexError, struct.error, ValueError,
MemoryError or a hang. Half of the mutants get their CRC fixed up so that the
mutation reaches the record parser and the decompressors.
"""

from __future__ import annotations

import itertools
import random
import struct
import time

from kpax.proto import crc
from kpax.proto.errors import CorruptRecordError
from kpax.proto.records import ControlRecord, Record, decode_batches, encode_batch

CASES = 100_000


def _seeds() -> list[bytes]:
    rng = random.Random(1)
    seeds = []
    for magic in (0, 1, 2):
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            if magic < 2 and codec == "zstd":
                continue
            for n in (1, 3, 9):
                recs = [
                    Record(
                        rng.randbytes(rng.randint(0, 70)) if i % 4 else None,
                        key=rng.randbytes(rng.randint(0, 9)) if i % 3 else None,
                        headers=[(f"h{i}", b"x" * i), ("n", None)]
                        if magic == 2 and i % 2
                        else None,
                        timestamp=1_700_000_000_000 + rng.randint(0, 10**6),
                    )
                    for i in range(n)
                ]
                seeds.append(
                    encode_batch(
                        recs, base_offset=rng.randint(0, 10**6), compression=codec, magic=magic
                    )
                )
    seeds.append(
        encode_batch([ControlRecord(1, 3, timestamp=5)], transactional=True, producer_id=1)
    )
    return seeds


def _fix_crc(data: bytearray) -> None:
    if len(data) >= 61 and data[16] == 2:
        (length,) = struct.unpack_from(">i", data, 8)
        end = min(len(data), 12 + max(length, 0))
        struct.pack_into(">I", data, 17, crc.crc32c(bytes(data[21:end])))
    elif len(data) >= 26 and data[16] in (0, 1):
        (size,) = struct.unpack_from(">i", data, 8)
        end = min(len(data), 12 + max(size, 0))
        struct.pack_into(">I", data, 12, crc.crc32(bytes(data[16:end])))


_INTERESTING = [0, 1, 0x7F, 0x80, 0xFF]
_INT32 = [-1, -(2**31), 2**31 - 1, 0, 1, 13, 48, 49, 60, 1 << 24]


def _mutate(rng: random.Random, data: bytes) -> bytearray:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if not out:
            out = bytearray(rng.randbytes(rng.randint(1, 80)))
        pos = rng.randrange(len(out))
        if op == 0:
            out[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[pos] = rng.choice(_INTERESTING)
        elif op == 2:
            del out[pos:]
        elif op == 3:
            out[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 4:
            del out[pos : pos + rng.randint(1, 8)]
        elif op == 5 and len(out) >= 4:
            p = rng.choice([8, 57, 53, 21, rng.randrange(len(out) - 3)])
            if p + 4 <= len(out):
                struct.pack_into(">i", out, p, rng.choice(_INT32))
        else:
            out[pos : pos + 4] = bytes([0xFF] * rng.randint(1, 11))  # runaway varint
    return out


def _decode_all(data: bytes, validate: bool, partial: bool) -> int:
    n = 0
    for batch in decode_batches(
        data, validate_crc=validate, max_decompressed_size=1 << 20, allow_partial=partial
    ):
        for rec in batch:
            n += rec.offset >= 0
        n += len(batch.tuples()) if hasattr(batch, "tuples") else 0
    return n


def test_fuzz_record_decoder() -> None:
    rng = random.Random(20240601)
    seeds = _seeds()
    doubles = [a + b for a, b in itertools.pairwise(seeds)]
    pool = seeds + doubles
    started = time.monotonic()
    outcomes = {"ok": 0, "corrupt": 0}
    for i in range(CASES):
        data = _mutate(rng, rng.choice(pool))
        validate = i % 4 == 0
        if i % 2:
            _fix_crc(data)
        try:
            _decode_all(bytes(data), validate, i % 3 != 0)
            outcomes["ok"] += 1
        except CorruptRecordError:
            outcomes["corrupt"] += 1
        except Exception as e:  # pragma: no cover - the failure report
            raise AssertionError(
                f"case {i}: {type(e).__name__}: {e} for input {bytes(data).hex()}"
            ) from e
    elapsed = time.monotonic() - started
    assert outcomes["ok"] + outcomes["corrupt"] == CASES
    # both outcomes are exercised (mutations that leave a batch valid do happen)
    assert outcomes["ok"] > 1000 and outcomes["corrupt"] > 10_000, outcomes
    assert elapsed < 240, f"fuzzing {CASES} cases took {elapsed:.0f}s"
