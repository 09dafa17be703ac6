"""Bad and large batches on a real broker, read by kpax.Consumer and kpax.aio.Consumer.

- A batch above ``max_decompressed_batch_bytes`` (the broker accepts it: its
  compressed size is small): poll raises DecompressionLimitError naming the
  partition, the offset and the option, again at every poll while the position
  stays there; ``seek(e.topic_partition, e.next_offset)`` resumes after it; the
  other partition's records all arrive.
- Large legitimate batches written by kpax.Producer (70 MB of lz4, 100 MB of
  zstd, decompressed) are read with the default cap, and refused, naming the
  option, under a cap below them.
- A batch failing its CRC-32C: Kafka validates CRCs on produce, so the test
  flips one byte of a record value in the partition's segment file on the
  broker's disk (skipped when that directory is not on this machine); the broker
  serves the bytes as they are.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.admin.types import ConfigResource

pytestmark = pytest.mark.integration

MiB = 1 << 20


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes], **options) -> None:
    """``values`` as one batch (one send_many, delivered before returning)."""
    with kpax.Producer(bootstrap, linger_ms=0, **options) as p:
        assert p.send_many(topic, values, partition=partition).result(timeout=60) == len(values)


def _poll_until_error(
    c: kpax.Consumer, into: list[kpax.ConsumerRecord], timeout: float = 20.0
) -> kpax.KafkaError:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            into.extend(c.poll(0.5))
        except kpax.KafkaError as exc:
            return exc
    raise AssertionError(f"no error within {timeout}s; got {len(into)} records")


def _drain(c: kpax.Consumer, into: list[kpax.ConsumerRecord], n: int, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while len(into) < n and time.monotonic() < deadline:
        into.extend(c.poll(0.5))
    return into


def _values(recs: list[kpax.ConsumerRecord], partition: int) -> list[bytes]:
    return [r.value for r in recs if r.partition == partition]


def test_batch_above_the_cap_repeats_until_seek_past_it(kafka, topic):
    t = topic(2)
    big = [bytes([65 + i]) * (MiB // 2) for i in range(3)]  # 1.5 MiB decompressed, ~20 KB lz4
    _produce(kafka.bootstrap, t, 0, [b"a0", b"a1", b"a2"], compression_type="lz4")
    _produce(
        kafka.bootstrap,
        t,
        0,
        big,
        compression_type="lz4",
        batch_size=4 * MiB,
        max_request_size=8 * MiB,
    )
    _produce(kafka.bootstrap, t, 0, [b"c6", b"c7"], compression_type="lz4")
    _produce(kafka.bootstrap, t, 1, [b"p1-%d" % i for i in range(5)])
    tp0, tp1 = TP(t, 0), TP(t, 1)
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", max_decompressed_batch_bytes=MiB
    ) as c:
        c.assign([tp0, tp1])
        got: list[kpax.ConsumerRecord] = []
        e = _poll_until_error(c, got)
        assert isinstance(e, kpax.DecompressionLimitError)
        assert (e.topic_partition, e.offset, e.next_offset) == (tp0, 3, 6)
        msg = str(e)
        assert f"partition {t}-0, offset 3" in msg
        assert "max_decompressed_batch_bytes is 1048576" in msg
        assert _values(got, 0) == [b"a0", b"a1", b"a2"]
        for _ in range(3):  # not once: at every poll, the position unchanged
            with pytest.raises(kpax.DecompressionLimitError) as again:
                c.poll(0.5)
            assert (again.value.topic_partition, again.value.offset) == (tp0, 3)
            assert c.position(tp0) == 3
        c.seek(e.topic_partition, e.next_offset)
        _drain(c, got, 3 + 2 + 5)
        assert _values(got, 0) == [b"a0", b"a1", b"a2", b"c6", b"c7"]
        assert _values(got, 1) == [b"p1-%d" % i for i in range(5)]  # none lost, none twice
        assert c.position(tp0) == 8
    # the same batch is read under a cap above it
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", max_decompressed_batch_bytes=2 * MiB
    ) as c:
        c.assign([tp0])
        recs = _drain(c, [], 8)
        assert [r.value for r in recs[3:6]] == big


@pytest.mark.parametrize(("codec", "size"), [("lz4", 70_000_000), ("zstd", 100_000_000)])
def test_large_batches_are_read_with_the_default_cap(kafka, topic, codec, size):
    """librdkafka reads these with its defaults (it caps zstd output at
    receive.message.max.bytes, 100,000,000); the former fixed 64 MiB cap refused them."""
    t = topic()
    block = hashlib.sha256(codec.encode()).digest() * 128  # 4 KiB: compresses well
    big = (block * (size // len(block) + 1))[:size]
    _produce(kafka.bootstrap, t, 0, [b"before"], compression_type=codec)
    _produce(
        kafka.bootstrap,
        t,
        0,
        [big],
        compression_type=codec,
        max_request_size=size + MiB,
        buffer_memory=size + 8 * MiB,
    )
    _produce(kafka.bootstrap, t, 0, [b"after"], compression_type=codec)
    tp = TP(t, 0)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        recs = _drain(c, [], 3, timeout=60)
        assert [r.offset for r in recs] == [0, 1, 2]
        assert recs[0].value == b"before" and recs[2].value == b"after"
        assert recs[1].value == big
        del recs
    with kpax.Consumer(
        kafka.bootstrap, auto_offset_reset="earliest", max_decompressed_batch_bytes=64 * MiB
    ) as c:
        c.assign([tp])
        got: list[kpax.ConsumerRecord] = []
        e = _poll_until_error(c, got, timeout=60)
        assert isinstance(e, kpax.DecompressionLimitError)
        assert (e.topic_partition, e.offset, e.next_offset) == (tp, 1, 2)
        assert "max_decompressed_batch_bytes is 67108864: raise it" in str(e)
        assert [r.value for r in got] == [b"before"]
        c.seek(tp, e.next_offset)
        assert [r.value for r in _drain(c, [], 1)] == [b"after"]


def _segment_file(kafka, topic: str, partition: int) -> Path:
    with kpax.Admin(kafka.bootstrap) as a:
        leader = a.describe_topics([topic])[topic].partitions[partition].leader
        found = a.describe_configs([ConfigResource.broker(leader)], keys=["log.dirs", "log.dir"])
        entries = found[ConfigResource.broker(leader)]
    dirs = entries["log.dirs"].value if "log.dirs" in entries else None
    dirs = dirs or entries["log.dir"].value
    for d in dirs.split(","):
        logs = sorted(Path(d.strip(), f"{topic}-{partition}").glob("*.log"))
        if logs:
            return logs[-1]
    pytest.skip(f"the broker's log directory ({dirs}) is not on this machine")


def test_batch_failing_its_crc_on_the_broker_repeats_until_seek_past_it(kafka, topic):
    t = topic(2)
    _produce(kafka.bootstrap, t, 0, [b"a0", b"a1", b"a2"])
    _produce(kafka.bootstrap, t, 0, [b"b3", b"b4-CORRUPT-ME", b"b5", b"b6"])
    _produce(kafka.bootstrap, t, 0, [b"c7", b"c8"])
    _produce(kafka.bootstrap, t, 1, [b"p1-%d" % i for i in range(5)])
    path = _segment_file(kafka, t, 0)
    fd = os.open(path, os.O_RDWR)
    try:
        data = os.pread(fd, path.stat().st_size, 0)
        assert data.count(b"CORRUPT-ME") == 1
        os.pwrite(fd, b"K", data.index(b"CORRUPT-ME"))  # what the broker now serves
    finally:
        os.close(fd)
    tp0, tp1 = TP(t, 0), TP(t, 1)
    with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        got: list[kpax.ConsumerRecord] = []
        e = _poll_until_error(c, got)
        assert type(e) is kpax.CorruptRecordError
        assert (e.topic_partition, e.offset, e.next_offset) == (tp0, 3, 7)
        assert f"partition {t}-0, offset 3" in str(e) and "CRC-32C" in str(e)
        assert _values(got, 0) == [b"a0", b"a1", b"a2"]
        for _ in range(3):
            with pytest.raises(kpax.CorruptRecordError, match=f"partition {t}-0, offset 3"):
                c.poll(0.5)
            assert c.position(tp0) == 3
        c.seek(tp0, 4)  # into the batch: the broker sends it whole again, the error stays
        with pytest.raises(kpax.CorruptRecordError) as inside:
            _poll_until_error_raising(c, got)
        assert (inside.value.offset, inside.value.next_offset) == (4, 7)
        c.seek(e.topic_partition, e.next_offset)
        _drain(c, got, 3 + 2 + 5)
        assert _values(got, 0) == [b"a0", b"a1", b"a2", b"c7", b"c8"]
        assert _values(got, 1) == [b"p1-%d" % i for i in range(5)]

    async def read_async() -> tuple[kpax.KafkaError, list[bytes]]:
        async with kpax.aio.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as ac:
            await ac.assign([tp0])
            out: list[kpax.ConsumerRecord] = []
            err: kpax.KafkaError | None = None
            for _ in range(40):
                try:
                    out += await ac.poll(0.5)
                except kpax.CorruptRecordError as exc:
                    err = exc
                    break
            assert err is not None
            with pytest.raises(kpax.CorruptRecordError, match="offset 3"):
                await ac.poll(0.5)
            await ac.seek(tp0, err.next_offset)
            for _ in range(40):
                if len(out) >= 5:
                    break
                out += await ac.poll(0.5)
            return err, [r.value for r in out]

    err, values = asyncio.run(read_async())
    assert (err.offset, err.next_offset) == (3, 7)
    assert values == [b"a0", b"a1", b"a2", b"c7", b"c8"]


def _poll_until_error_raising(c: kpax.Consumer, into: list[kpax.ConsumerRecord]) -> None:
    for _ in range(40):
        into.extend(c.poll(0.5))
