"""Bad records in fetched bytes, without a broker: a batch failing its CRC, one
decompressing above ``max_decompressed_batch_bytes``, a failing deserializer.

What is checked (as the Java consumer behaves): the records before the bad
data are delivered, then the error names the partition and the offset, is
raised again by every poll while the position stays there, and a seek past it
(``e.next_offset``) resumes with the records after it. Records of partitions
before the bad one in the same Fetch response are delivered before its error;
a paused failed partition does not block the others."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import kpax
from kpax.broker.options import connection_options
from kpax.cluster.cluster import Cluster
from kpax.config import resolve
from kpax.consumer.buffer import Chunk, FetchBuffer
from kpax.consumer.fetcher import Fetcher
from kpax.consumer.options import CONSUMER_OPTIONS, ConsumerSettings, max_decompressed_batch_bytes
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.proto.records import Record, decode_batches, encode_batch
from kpax.structs import TopicPartition as TP
from tests.unit.fetcher_walks import walk_all  # noqa: F401 - an autouse fixture

MiB = 1 << 20


def _fetcher(**options: Any) -> tuple[Fetcher, FetchBuffer]:
    config = resolve("consumer", CONSUMER_OPTIONS, {"bootstrap_servers": "127.0.0.1:1", **options})
    cluster = Cluster(["127.0.0.1:1"], connection_options(config))
    buf = FetchBuffer()
    return Fetcher(cluster, {}, buf, ConsumerSettings.from_config(config)), buf


def _partition(index: int, data: bytes, high_watermark: int = -1) -> SimpleNamespace:
    return SimpleNamespace(
        partition_index=index,
        error_code=0,
        high_watermark=high_watermark,
        last_stable_offset=-1,
        log_start_offset=-1,
        diverging_epoch=None,
        records=data,
        aborted_transactions=[],
    )


def _feed(fetcher: Fetcher, parts: dict[PartitionState, tuple[bytes, int]]) -> None:
    """One Fetch response holding ``parts`` (state -> (bytes, fetch offset)), in that
    order, handled as Fetcher._fetch does: frame every partition, then decode."""
    resp = SimpleNamespace(
        responses=[
            SimpleNamespace(
                topic="t",
                topic_id=None,
                partitions=[_partition(st.tp.partition, data) for st, (data, _) in parts.items()],
            )
        ]
    )
    sent = {st.tp: (st, st.gen, offset) for st, (_, offset) in parts.items()}
    for item in fetcher._handle_response(resp, sent, {}, "broker 1"):
        fetcher.decoder.decode(*item)


def _state(partition: int = 0, offset: int = 0) -> PartitionState:
    st = PartitionState(TP("t", partition))
    st.seek(offset)
    return st


def _batch(values: list[bytes], base: int, compression: str | None = None) -> bytes:
    return encode_batch(
        [Record(v, timestamp=1000) for v in values], base_offset=base, compression=compression
    )


def _bad_crc(data: bytes) -> bytes:
    raw = bytearray(data)
    raw[-3] ^= 0xFF  # inside the last record: the CRC-32C no longer matches
    return bytes(raw)


def _take_all(buf: FetchBuffer) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    while recs := buf.take(1000):
        out.extend(recs)
    return out


# ------------------------------------------------------------------ CRC


def test_crc_error_repeats_at_its_offset_until_a_seek_past_the_batch() -> None:
    f, buf = _fetcher()
    st = _state()
    bad = _bad_crc(_batch([b"b3", b"b4", b"b5"], 3))
    data = _batch([b"a0", b"a1", b"a2"], 0) + bad + _batch([b"c6", b"c7"], 6)
    _feed(f, {st: (data, 0)})
    assert [r.value for r in buf.take(100)] == [b"a0", b"a1", b"a2"]
    for _ in range(3):  # every poll, not once
        with pytest.raises(kpax.CorruptRecordError) as info:
            buf.take(100)
        e = info.value
        assert e.topic_partition == TP("t", 0) and e.offset == 3 and e.next_offset == 6
        msg = str(e)
        assert "partition t-0, offset 3" in msg and "CRC-32C" in msg
        assert "seek(TopicPartition('t', 0), 6)" in msg
        assert st.position == 3 and not st.fetchable
    with pytest.raises(kpax.CorruptRecordError):
        buf.take_chunk()  # the iteration path too
    st.seek(e.next_offset)
    assert buf.take(100) == []  # no error any more
    _feed(f, {st: (_batch([b"c6", b"c7"], 6), 6)})
    assert [r.value for r in _take_all(buf)] == [b"c6", b"c7"]
    assert st.position == 8


def test_seek_into_a_bad_batch_raises_again_at_the_new_position() -> None:
    f, buf = _fetcher()
    st = _state(offset=4)
    bad = _bad_crc(_batch([b"b3", b"b4", b"b5"], 3))  # the broker returns the whole batch
    _feed(f, {st: (bad, 4)})
    with pytest.raises(kpax.CorruptRecordError) as info:
        buf.take(100)
    assert info.value.offset == 4 and info.value.next_offset == 6
    assert "offsets 4 to 5" in str(info.value)


def test_implausible_batch_end_falls_back_to_skipping_one_record() -> None:
    f, buf = _fetcher()
    st = _state(offset=3)
    raw = bytearray(_batch([b"b3", b"b4"], 3))
    raw[23:27] = (1_000_000).to_bytes(4, "big")  # lastOffsetDelta damaged (so is the CRC)
    resp = SimpleNamespace(
        responses=[
            SimpleNamespace(
                topic="t", topic_id=None, partitions=[_partition(0, bytes(raw), high_watermark=5)]
            )
        ]
    )
    for item in f._handle_response(resp, {st.tp: (st, st.gen, 3)}, {}, "b"):
        f.decoder.decode(*item)
    with pytest.raises(kpax.CorruptRecordError) as info:
        buf.take(10)
    assert info.value.next_offset == 4  # beyond the high watermark: not trusted


def test_records_of_partitions_before_the_bad_one_come_first() -> None:
    """Response order p0, p1 (bad first batch), p2: p0's records before p1's error
    (the error of a batch failing framing used to jump ahead of them)."""
    f, buf = _fetcher()
    p0, p1, p2 = _state(0), _state(1), _state(2)
    _feed(
        f,
        {
            p0: (_batch([b"p0-0", b"p0-1"], 0), 0),
            p1: (_bad_crc(_batch([b"p1-0"], 0)), 0),
            p2: (_batch([b"p2-0"], 0), 0),
        },
    )
    assert [r.value for r in buf.take(100)] == [b"p0-0", b"p0-1"]
    for _ in range(2):
        with pytest.raises(kpax.CorruptRecordError, match="partition t-1, offset 0"):
            buf.take(100)
    # records queued behind the error wait (as in Java) until it is dealt with:
    # pausing the failed partition lets them through, its error comes back on resume
    p1.pause()
    assert [r.value for r in buf.take(100)] == [b"p2-0"]
    p1.resume()
    with pytest.raises(kpax.CorruptRecordError, match="partition t-1"):
        buf.take(100)
    p1.revoke()  # unassigned: its error goes with it
    assert buf.take(100) == []


def test_error_found_while_decoding_is_dropped_after_a_pause_meanwhile() -> None:
    f, buf = _fetcher(max_decompressed_batch_bytes=MiB)
    st = _state()
    big = _batch([b"\0" * (2 * MiB)], 0, "lz4")
    resp = SimpleNamespace(
        responses=[SimpleNamespace(topic="t", topic_id=None, partitions=[_partition(0, big)])]
    )
    pending = f._handle_response(resp, {st.tp: (st, st.gen, 0)}, {}, "b")
    st.pause()  # while the response is being decoded
    for item in pending:
        f.decoder.decode(*item)
    assert buf.take(10) == [] and st.error is None  # fetched (and found) again on resume


def test_framing_error_is_dropped_after_a_pause_meanwhile() -> None:
    f, buf = _fetcher()
    st = _state()
    resp = SimpleNamespace(
        responses=[
            SimpleNamespace(
                topic="t", topic_id=None, partitions=[_partition(0, _bad_crc(_batch([b"x"], 0)))]
            )
        ]
    )
    pending = f._handle_response(resp, {st.tp: (st, st.gen, 0)}, {}, "b")
    assert st.error is not None  # no more fetching of it meanwhile
    st.pause()
    for item in pending:
        f.decoder.decode(*item)
    assert buf.take(10) == [] and st.error is None


# ------------------------------------------------------------------ decompression cap


def test_default_cap_is_twice_fetch_max_bytes_at_least_64_mib() -> None:
    def cap(**options: Any) -> int:
        return max_decompressed_batch_bytes(resolve("consumer", CONSUMER_OPTIONS, options))

    assert cap() == 100 * MiB  # Java's fetch_max_bytes, 50 MiB
    assert cap(fetch_max_bytes=MiB) == 64 * MiB
    assert cap(fetch_max_bytes=200 * MiB) == 400 * MiB
    assert cap(max_decompressed_batch_bytes=5 * MiB) == 5 * MiB
    for bad in (0, -1, "1M"):
        with pytest.raises(kpax.ConfigError, match="max_decompressed_batch_bytes"):
            resolve("consumer", CONSUMER_OPTIONS, {"max_decompressed_batch_bytes": bad})


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_batch_above_the_cap_names_the_option_and_repeats(codec: str) -> None:
    f, buf = _fetcher(max_decompressed_batch_bytes=MiB)
    st = _state()
    data = (
        _batch([b"a0"], 0, codec)
        + _batch([b"\1" * (MiB // 2), b"\2" * (MiB // 2), b"\3" * 10], 1, codec)
        + _batch([b"c4"], 4, codec)
    )
    _feed(f, {st: (data, 0)})
    assert [r.value for r in buf.take(100)] == [b"a0"]
    for _ in range(2):
        with pytest.raises(kpax.DecompressionLimitError) as info:
            buf.take(100)
        e = info.value
        assert isinstance(e, kpax.CorruptRecordError)
        assert (e.topic_partition, e.offset, e.next_offset) == (TP("t", 0), 1, 4)
        assert "max_decompressed_batch_bytes is 1048576" in str(e)
        assert "partition t-0, offset 1" in str(e)
    st.seek(4)
    _feed(f, {st: (_batch([b"c4"], 4, codec), 4)})
    assert [r.value for r in buf.take(100)] == [b"c4"]


def test_the_same_batch_is_read_under_a_cap_above_it() -> None:
    data = _batch([b"\1" * (3 * MiB)], 0, "lz4")
    f, buf = _fetcher(max_decompressed_batch_bytes=4 * MiB)
    st = _state()
    _feed(f, {st: (data, 0)})
    assert [len(r.value or b"") for r in buf.take(10)] == [3 * MiB]


def test_one_chunk_decompresses_about_one_cap_and_the_rest_is_fetched_again() -> None:
    """Many small batches, each under the cap, cannot add up to many caps in one go."""
    f, buf = _fetcher(max_decompressed_batch_bytes=5 * MiB // 2)
    st = _state()
    data = b"".join(_batch([bytes([i]) * MiB], i, "zstd") for i in range(5))
    assert len(data) < 5000  # what a fetch of decompression bombs looks like
    _feed(f, {st: (data, 0)})
    assert [r.offset for r in buf.take(100)] == [0, 1, 2]  # over 2.5 MiB after the third
    assert st.fetch_position == 3 and st.error is None
    _feed(f, {st: (_tail(data, 3), 3)})
    assert [r.offset for r in buf.take(100)] == [3, 4]
    assert st.position == 5 and st.fetch_position == 5


def _tail(data: bytes, offset: int) -> bytes:
    """The batches of ``data`` from the one holding ``offset`` on (what the broker sends)."""
    pos = 0
    for batch in decode_batches(data):
        if batch.next_offset > offset:
            return data[pos:]
        pos += batch.size_in_bytes
    return b""


def test_decoder_errors_keep_their_class_and_batch_offsets() -> None:
    (batch,) = decode_batches(_batch([b"\0" * (2 * MiB)] * 3, 7, "zstd"), max_decompressed_size=MiB)
    with pytest.raises(kpax.DecompressionLimitError) as info:
        batch.tuples()
    assert (info.value.offset, info.value.next_offset) == (7, 10)
    with pytest.raises(kpax.CorruptRecordError) as crc:
        list(decode_batches(_bad_crc(_batch([b"x", b"y"], 5))))
    assert (crc.value.offset, crc.value.next_offset) == (5, 7)
    assert "batch at offset 5 fails its CRC-32C check" in str(crc.value)


# ------------------------------------------------------------------ deserializers


def test_deserializer_error_after_the_records_before_it_and_repeated() -> None:
    f, buf = _fetcher(value_deserializer=lambda b: b.decode("ascii"))
    st = _state(offset=10)
    _feed(f, {st: (_batch([b"ok10", b"ok11", b"\xff", b"ok13"], 10), 10)})
    assert [r.value for r in buf.take(100)] == ["ok10", "ok11"]
    assert st.position == 12
    for _ in range(2):
        with pytest.raises(kpax.SerializationError) as info:
            buf.take(100)
        e = info.value
        assert (e.topic_partition, e.offset, e.next_offset) == (TP("t", 0), 12, 13)
        assert "value deserializer failed on t-0 at offset 12" in str(e)
        assert isinstance(e.__cause__, UnicodeDecodeError)
    st.seek(13)
    _feed(f, {st: (_batch([b"ok10", b"ok11", b"\xff", b"ok13"], 10), 13)})
    assert [r.value for r in buf.take(100)] == ["ok13"]


def test_key_deserializer_failure_names_the_key() -> None:
    f, buf = _fetcher(key_deserializer=lambda b: b.decode("ascii"))
    st = _state()
    data = encode_batch([Record(b"v", key=b"k"), Record(b"v", key=b"\xff")], base_offset=0)
    _feed(f, {st: (data, 0)})
    assert [r.key for r in buf.take(10)] == ["k"]
    with pytest.raises(kpax.SerializationError, match="key deserializer failed on t-0 at offset 1"):
        buf.take(10)


# ------------------------------------------------------------------ the buffer alone


def test_buffer_repeats_a_partition_error_without_growing_its_traceback() -> None:
    buf = FetchBuffer()
    st = _state()
    boom = kpax.CorruptRecordError("boom")
    st.puts += 1
    buf.put(Chunk(st, [], 0, -1, st.gen))
    st.fail(boom)
    buf.put((st, boom))
    depths = []
    for _ in range(5):
        with pytest.raises(kpax.CorruptRecordError) as info:
            buf.take(10)
        tb, n = info.value.__traceback__, 0
        while tb is not None:
            tb, n = tb.tb_next, n + 1
        depths.append(n)
    assert len(set(depths[1:])) == 1 and depths[0] <= depths[1]  # bounded, not growing
    st.seek(0)
    assert buf.take(10) == []
    buf.put((None, kpax.KafkaError("fatal")))  # a consumer-wide error: raised once here
    with pytest.raises(kpax.KafkaError, match="fatal"):
        buf.take(10)
    assert buf.take(10) == []
