"""Fuzz the response decoders: truncated, mutated and random bytes raise ProtocolError only.

Over 100,000 inputs in total, spread across every response class and version
(and the framing in kpax.proto.header): valid encodings of random messages,
then truncated, bit-flipped, length-smashed, spliced and purely random variants.
Any exception other than ProtocolError, or a decode that does not finish, fails.
"""

from __future__ import annotations

import random
import time

from kpax.proto.api import Response
from kpax.proto.errors import ProtocolError
from kpax.proto.header import decode_response
from tests.unit.test_messages_schema import random_instance, responses

TOTAL = 100_000
_SMASH = (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80\x80", b"\x00\x00", b"\xff")


def _mutate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    n = len(data)
    if kind == 0 or n == 0:  # truncate
        return data[: rng.randrange(n)] if n else rng.randbytes(rng.randint(0, 8))
    if kind == 1:  # flip bytes
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:  # overwrite a window with a nasty length / varint
        at = rng.randrange(n)
        smash = rng.choice(_SMASH)
        return data[:at] + smash + data[at + len(smash) :]
    if kind == 3:  # insert or delete a few bytes
        at = rng.randrange(n)
        if rng.random() < 0.5:
            return data[:at] + rng.randbytes(rng.randint(1, 4)) + data[at:]
        return data[:at] + data[at + rng.randint(1, 4) :]
    if kind == 4:  # random bytes
        return rng.randbytes(rng.randint(0, 64))
    return data + rng.randbytes(rng.randint(1, 3))  # trailing garbage


def _check(cls: type[Response], data: bytes, v: int) -> None:
    try:
        cls.decode(data, v)
    except ProtocolError:
        pass


def test_fuzz_response_decoders() -> None:
    rng = random.Random(848)
    targets = [(cls, v) for cls in responses() for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]
    per_target = TOTAL // len(targets) + 1
    start = time.monotonic()
    count = 0
    decoded_ok = 0
    for cls, v in targets:
        seeds = [cls().encode(v)]
        for _ in range(3):
            obj = random_instance(cls.__name__, v, cls.is_flexible(v), rng)
            seeds.append(obj.encode(v))
        for data in seeds:
            assert cls.decode(data, v).encode(v) == data
        for _ in range(per_target):
            data = _mutate(rng.choice(seeds), rng)
            try:
                cls.decode(memoryview(data), v)
                decoded_ok += 1
            except ProtocolError as exc:
                assert cls.__name__ in str(exc)
            count += 1
    elapsed = time.monotonic() - start
    assert count >= TOTAL
    # some mutants are still valid messages (e.g. a flipped bit in an int): both outcomes occur
    assert 0 < decoded_ok < count
    assert elapsed < 120, f"{count} decodes took {elapsed:.1f}s"


def test_fuzz_response_frames() -> None:
    """Framing too: header (tagged fields) + body, through decode_response."""
    rng = random.Random(7)
    from kpax.proto.messages import FetchResponse, MetadataResponse

    for cls, v in ((MetadataResponse, 12), (FetchResponse, 16), (MetadataResponse, 8)):
        body = random_instance(cls.__name__, v, cls.is_flexible(v), rng).encode(v)
        head = b"\x00\x00\x00\x2a" + (b"\x00" if cls.is_flexible(v) else b"")
        corr, back = decode_response(head + body, cls.API_KEY, v)
        assert corr == 42
        assert back.encode(v) == body
        for _ in range(2000):
            frame = _mutate(head + body, rng)
            try:
                decode_response(frame, cls.API_KEY, v)
            except ProtocolError:
                pass
