"""Consumer pieces without a broker: the fetched-records buffer (positions,
max_records, stale data after a seek, errors, listener calls), decoding of
fetched bytes (v2, legacy message sets, compression, read_committed with
aborted transactions and control batches, records before the fetch offset,
deserializers) and the options."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

import kpax
from kpax.broker.options import connection_options
from kpax.cluster.cluster import Cluster
from kpax.config import resolve
from kpax.consumer.buffer import Chunk, FetchBuffer
from kpax.consumer.fetcher import Fetcher
from kpax.consumer.options import CONSUMER_OPTIONS, ConsumerSettings
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.proto.records import ControlRecord, Record, encode_batch
from kpax.structs import TopicPartition as TP
from tests.unit.fetcher_walks import walk_all  # noqa: F401 - an autouse fixture


def _recs(tp: TP, start: int, n: int) -> list[ConsumerRecord]:
    return [
        ConsumerRecord(tp.topic, tp.partition, o, 0, 0, None, b"%d" % o, (), 0)
        for o in range(start, start + n)
    ]


def _chunk(st: PartitionState, start: int, n: int) -> Chunk:
    st.puts += 1
    return Chunk(st, _recs(st.tp, start, n), start + n, 0, st.gen)


def test_buffer_take_respects_max_records_and_advances_positions():
    buf = FetchBuffer()
    a, b = PartitionState(TP("t", 0)), PartitionState(TP("t", 1))
    buf.put(_chunk(a, 0, 5))
    buf.put(_chunk(b, 10, 3))
    got = buf.take(4)
    assert [r.offset for r in got] == [0, 1, 2, 3] and a.position == 4
    got = buf.take(10)
    assert [(r.partition, r.offset) for r in got] == [(0, 4), (1, 10), (1, 11), (1, 12)]
    assert (a.position, b.position) == (5, 13)
    assert a.buffered == b.buffered == 0
    assert buf.take(10) == []


def test_buffer_drops_data_fetched_before_a_seek():
    buf = FetchBuffer()
    st = PartitionState(TP("t", 0))
    drained = []
    buf.on_drained = drained.append
    buf.put(_chunk(st, 0, 5))
    st.seek(100)
    assert buf.take(10) == []
    assert st.position == 100 and st.buffered == 0 and drained == [st]


def test_buffer_take_chunk_and_errors():
    buf = FetchBuffer()
    st = PartitionState(TP("t", 0))
    buf.put(_chunk(st, 0, 3))
    boom = kpax.KafkaError("boom on t-0")
    st.fail(boom)
    buf.put((st, boom))
    chunk = buf.take_chunk()
    assert chunk is not None and [r.offset for r in chunk.records] == [0, 1, 2]
    with pytest.raises(kpax.KafkaError, match="boom on t-0"):
        buf.take(10)
    # an error for a partition that was seeked since is not raised
    st.seek(5)
    buf.put((st, kpax.KafkaError("stale")))
    assert buf.take(10) == []


def test_an_error_retried_while_nobody_polls_is_queued_once():
    buf = FetchBuffer()
    for _ in range(1000):  # a background request failing every backoff
        buf.put_error(kpax.errors.ProtocolError("garbage from broker 1"))
    with pytest.raises(kpax.errors.ProtocolError, match="garbage from broker 1"):
        buf.take(10)
    assert buf.take(10) == []  # raised once, not 1000 times
    buf.put_error(kpax.errors.ProtocolError("garbage from broker 1"))  # a new one, later
    with pytest.raises(kpax.errors.ProtocolError):
        buf.take(10)


def _reader(buf: FetchBuffer):
    """What the consumers' iteration does with the buffer."""
    while True:
        chunk = buf.take_chunk()
        if chunk is None:
            return
        it = buf.start_reading(chunk)
        try:
            yield from it
        finally:
            buf.finish_reading(chunk, it)


def test_iteration_positions_follow_the_records_handed_out():
    buf = FetchBuffer()
    st = PartitionState(TP("t", 0))
    st.position = 0
    buf.put(_chunk(st, 0, 5))
    buf.put(_chunk(st, 5, 3))
    reader = _reader(buf)
    assert next(reader).offset == 0
    assert buf.read_position(st) == (1, 0)  # what commit()/position() see
    assert next(reader).offset == 1
    assert buf.read_position(st) == (2, 0)
    reader.close()  # a break: records 2..4 go back, the position to 2
    assert st.position == 2 and buf.read_position(st) is None
    assert [r.offset for r in buf.take(10)] == [2, 3, 4, 5, 6, 7]
    assert st.position == 8


def test_a_seek_during_iteration_ends_the_old_chunk():
    buf = FetchBuffer()
    st = PartitionState(TP("t", 0))
    st.position = 0
    buf.put(_chunk(st, 0, 5))
    reader = _reader(buf)
    assert next(reader).offset == 0
    buf.settle_reading(st)  # what seek/pause/revoke do first
    assert st.position == 1
    st.seek(100)
    assert list(reader) == []  # nothing more of the old chunk
    assert st.position == 100


def test_a_paused_partition_mid_iteration_is_read_again_from_where_it_stopped():
    buf = FetchBuffer()
    st = PartitionState(TP("t", 0))
    st.position = 0
    buf.put(_chunk(st, 0, 5))
    reader = _reader(buf)
    assert [next(reader).offset, next(reader).offset] == [0, 1]
    buf.settle_reading(st)
    st.pause()
    assert st.position == 2 and st.fetch_position == 2
    assert list(reader) == []


async def test_buffer_runs_listener_calls_on_the_taking_side():
    buf = FetchBuffer()
    ran = []
    fut = buf.call_in_app(lambda: ran.append("called") or 42)
    assert buf.take(10) == []
    assert await asyncio.wait_for(fut, 1) == 42 and ran == ["called"]


# ---------------------------------------------------------------- decoding


def _fetcher(**options):
    config = resolve("consumer", CONSUMER_OPTIONS, {"bootstrap_servers": "127.0.0.1:1", **options})
    cluster = Cluster(["127.0.0.1:1"], connection_options(config))
    buf = FetchBuffer()
    return Fetcher(cluster, {}, buf, ConsumerSettings.from_config(config)), buf


def _response(data, fetch_offset=0, aborted=()):
    partition = SimpleNamespace(
        partition_index=0,
        error_code=0,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        diverging_epoch=None,
        records=data,
        aborted_transactions=[SimpleNamespace(producer_id=p, first_offset=o) for p, o in aborted],
    )
    return SimpleNamespace(
        responses=[SimpleNamespace(topic="t", topic_id=None, partitions=[partition])]
    )


def _feed(fetcher, st, data, fetch_offset=0, aborted=()):
    """What Fetcher._fetch does with a response: frame, then decode."""
    sent = {st.tp: (st, st.gen, fetch_offset)}
    for item in fetcher._handle_response(_response(data, fetch_offset, aborted), sent, {}, "b"):
        fetcher.decoder.decode(*item)


def _decode(fetcher, buf, data, fetch_offset=0, aborted=()):
    st = PartitionState(TP("t", 0))
    st.seek(fetch_offset)
    _feed(fetcher, st, data, fetch_offset, aborted)
    out = []
    while True:
        recs = buf.take(1000)
        if not recs:
            break
        out.extend(recs)
    return out, st


@pytest.mark.parametrize(
    ("magic", "compression"),
    [(m, c) for m in (0, 1, 2) for c in (None, "gzip", "lz4") if (m, c) != (0, "lz4")],
)
def test_decode_formats_and_skip_before_fetch_offset(magic, compression):
    f, buf = _fetcher()
    data = encode_batch(
        [Record(b"v%d" % i, key=b"k", timestamp=1000 + i) for i in range(10)],
        base_offset=0,
        magic=magic,
        compression=compression,
    )
    data += encode_batch([Record(b"v10", timestamp=1010)], base_offset=10, magic=magic)
    recs, st = _decode(f, buf, data + data[:20], fetch_offset=3)  # partial tail ignored
    assert [r.offset for r in recs] == list(range(3, 11))
    assert recs[0].value == b"v3" and recs[0].key == b"k"
    assert st.position == 11 and st.fetch_position == 11
    if magic:
        assert recs[0].timestamp == 1003


@pytest.mark.parametrize("compression", [None, "lz4", "gzip"])
def test_a_poll_builds_only_the_records_it_returns(compression):
    """A response's batches are checked when it arrives and their records built when
    taken, compressed ones too: a poll of 10 builds one batch's records, not the
    response's (built all at once they outran the free list of records and set off
    young-GC collections)."""
    f, buf = _fetcher()
    data = b"".join(
        encode_batch(
            [Record(b"v%d" % (b * 50 + i), timestamp=1000) for i in range(50)],
            base_offset=b * 50,
            compression=compression,
        )
        for b in range(20)
    )
    st = PartitionState(TP("t", 0))
    st.seek(0)
    _feed(f, st, data)
    chunk = buf._items[0]
    assert chunk.records == [] and chunk.pending == 1000  # checked, nothing built yet
    first = buf.take(10)
    assert [r.value for r in first] == [b"v%d" % i for i in range(10)]
    assert len(chunk.records) + chunk.pending == 1000 and chunk.pending == 950
    rest = buf.take(2000)
    assert [r.offset for r in rest] == list(range(10, 1000))


def test_each_record_carries_its_own_batchs_epoch_and_timestamp_type():
    """Records are built from one template per (timestamp type, leader epoch) of a
    chunk, not one per batch: batches of other epochs and types in the same
    response still give each record its own."""
    f, buf = _fetcher()
    shapes = [(0, 3), (0, 3), (1, 3), (0, 4), (1, 4), (0, 3)]  # (timestamp type, epoch)
    data = b"".join(
        encode_batch(
            [Record(b"v%d" % i, timestamp=1000 + i)],
            base_offset=i,
            timestamp_type=ts_type,
            partition_leader_epoch=epoch,
        )
        for i, (ts_type, epoch) in enumerate(shapes)
    )
    recs, _st = _decode(f, buf, data)
    assert [(r.offset, r.timestamp_type, r.leader_epoch) for r in recs] == [
        (i, ts_type, epoch) for i, (ts_type, epoch) in enumerate(shapes)
    ]
    assert [r.value for r in recs] == [b"v%d" % i for i in range(6)]


def test_read_committed_drops_aborted_batches_and_control_records():
    data = b"".join(
        [
            encode_batch([Record(b"a0"), Record(b"a1")], base_offset=0, producer_id=7,
                         producer_epoch=0, base_sequence=0, transactional=True),
            encode_batch([Record(b"c0")], base_offset=2, producer_id=8, producer_epoch=0,
                         base_sequence=0, transactional=True),
            encode_batch([ControlRecord(0, 0)], base_offset=3, producer_id=7,
                         producer_epoch=0, transactional=True),  # ABORT for 7
            encode_batch([ControlRecord(1, 0)], base_offset=4, producer_id=8,
                         producer_epoch=0, transactional=True),  # COMMIT for 8
            encode_batch([Record(b"a2")], base_offset=5, producer_id=7, producer_epoch=0,
                         base_sequence=2, transactional=True),  # a new txn of 7: committed
            encode_batch([Record(b"plain")], base_offset=6),
        ]
    )  # fmt: skip
    f, buf = _fetcher(isolation_level="read_committed")
    recs, st = _decode(f, buf, data, aborted=[(7, 0)])
    assert [r.value for r in recs] == [b"c0", b"a2", b"plain"]
    assert st.position == 7
    f, buf = _fetcher()
    recs, _ = _decode(f, buf, data, aborted=[(7, 0)])
    assert [r.value for r in recs] == [b"a0", b"a1", b"c0", b"a2", b"plain"]  # no markers


def test_only_control_records_still_advance_the_position():
    data = encode_batch([ControlRecord(1, 0)], base_offset=4, producer_id=8, transactional=True)
    f, buf = _fetcher()
    recs, st = _decode(f, buf, data, fetch_offset=4)
    assert recs == [] and st.position == 5


def test_deserializer_failure_names_partition_and_offset():
    f, buf = _fetcher(value_deserializer=lambda b: b.decode("ascii"))
    data = encode_batch([Record(b"ok"), Record(b"\xff")], base_offset=40)
    st = PartitionState(TP("t", 0))
    st.seek(40)
    _feed(f, st, data, 40)
    assert [r.value for r in buf.take(10)] == ["ok"]  # the records before it first (as Java)
    with pytest.raises(
        kpax.SerializationError, match="value deserializer failed on t-0 at offset 41"
    ):
        buf.take(10)


def test_corrupt_bytes_become_an_error_for_that_partition():
    data = bytearray(encode_batch([Record(b"x" * 50)], base_offset=0))
    data[-5] ^= 0xFF  # CRC mismatch
    f, buf = _fetcher()
    st = PartitionState(TP("t", 0))
    st.seek(0)
    _feed(f, st, bytes(data), 0)
    with pytest.raises(kpax.CorruptRecordError):
        buf.take(10)


def test_options_have_java_defaults_and_unknown_ones_are_named():
    c = resolve("consumer", CONSUMER_OPTIONS, {})
    assert c["auto_offset_reset"] == "latest" and c["enable_auto_commit"] is True
    assert c["max_poll_records"] == 500 and c["fetch_max_wait_ms"] == 500
    assert c["session_timeout_ms"] == 45000 and c["max_poll_interval_ms"] == 300000
    assert c["group_protocol"] == "classic"
    with pytest.raises(kpax.ConfigError, match="max_poll_records"):
        resolve("consumer", CONSUMER_OPTIONS, {"max_pol_records": 5})
    with pytest.raises(kpax.ConfigError, match="isolation_level"):
        resolve("consumer", CONSUMER_OPTIONS, {"isolation_level": "committed"})


def test_records_before_corrupt_bytes_are_delivered_then_the_error():
    good = encode_batch([Record(b"a"), Record(b"b")], base_offset=0)
    bad = bytearray(encode_batch([Record(b"x" * 50)], base_offset=2))
    bad[-5] ^= 0xFF
    f, buf = _fetcher()
    st = PartitionState(TP("t", 0))
    st.seek(0)
    _feed(f, st, good + bytes(bad), 0)
    assert [r.value for r in buf.take(10)] == [b"a", b"b"]
    assert st.position == 2 and st.buffered == 0
    with pytest.raises(kpax.CorruptRecordError):
        buf.take(10)
    assert not st.fetchable  # stopped until a seek
