"""The "kpax" Spark data source's options, each with the semantics of Spark's JVM
Kafka connector (spark-sql-kafka-0-10) or refused with a clear error; unknown
option names are refused with a did-you-mean (the JVM connector ignores them).

Most checks run the source's own planning code against the real broker (no
Spark needed: it is what the planning worker runs); the ones whose result a
user sees through Spark run a query on the shared local[2] session.
The docs/spark.md option table names these tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kpax.errors import ConfigError, KafkaTimeoutError
from kpax.spark.options import parse_read_options, parse_write_options
from kpax.spark.planning import OffsetRange, Planner, split_ranges
from kpax.structs import TopicPartition
from tests.integration.spark_helpers import produce
from tests.wait import eventually

pytestmark = [pytest.mark.slow, pytest.mark.integration]

BASE_TS = 1_700_000_000_000
PARTS = 3
PER_PART = 40


@pytest.fixture(scope="module")
def data(kafka: Any) -> str:
    """3 partitions x 40 records, record i of each at BASE_TS + i*1000 ms."""
    from kpax.testing.pytest_plugin import create_topic

    name = create_topic(kafka, PARTS, config={"retention.ms": "-1"})
    produce(
        kafka.bootstrap,
        name,
        [
            (p, None, f"v{p}-{i}".encode(), None, BASE_TS + i * 1000)
            for p in range(PARTS)
            for i in range(PER_PART)
        ],
    )
    return name


def _read(bootstrap: str, batch: bool = True, **options: str) -> Any:
    return parse_read_options({"kafka.bootstrap.servers": bootstrap, **options}, batch=batch)


def _ranges(bootstrap: str, **options: str) -> dict[int, tuple[int, int]]:
    planner = Planner(_read(bootstrap, **options))
    try:
        return {r.partition: (r.start, r.end) for r in planner.batch_ranges()}
    finally:
        planner.close()


def _load(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kpax").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


# ---------------------------------------------------------------- timestamps


def test_ending_offsets_by_timestamp(spark: Any, kafka: Any, data: str) -> None:
    """Each partition ends at the first record at or after its timestamp; one with no
    such record ends at its latest offset (the JVM source's rule)."""
    ending = {data: {"0": BASE_TS + 10_500, "1": BASE_TS + 20_000, "2": BASE_TS + 10**9}}
    df = _load(spark, kafka.bootstrap, subscribe=data, endingOffsetsByTimestamp=json.dumps(ending))
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {0: 11, 1: 20, 2: PER_PART}


def test_timestamp_options_take_the_jvm_precedence(kafka: Any, data: str) -> None:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets, and the same
    for the ending options."""
    by_part = json.dumps({data: dict.fromkeys(("0", "1", "2"), BASE_TS + 30_000)})
    got = _ranges(
        kafka.bootstrap,
        subscribe=data,
        startingTimestamp=str(BASE_TS + 5_000),
        startingOffsetsByTimestamp=by_part,
        startingOffsets=json.dumps({data: {"0": 1, "1": 1, "2": 1}}),
        endingTimestamp=str(BASE_TS + 8_000),
        endingOffsetsByTimestamp=by_part,
        endingOffsets=json.dumps({data: {"0": 2, "1": 2, "2": 2}}),
    )
    assert got == dict.fromkeys(range(PARTS), (5, 8))
    got = _ranges(
        kafka.bootstrap,
        subscribe=data,
        startingOffsetsByTimestamp=json.dumps({data: {"0": BASE_TS, "1": BASE_TS + 1, "2": 0}}),
        startingOffsets="earliest",
        endingOffsetsByTimestamp=by_part,
        endingOffsets="latest",
    )
    assert got == {0: (0, 30), 1: (1, 30), 2: (0, 30)}


def test_starting_timestamp_strategy(spark: Any, kafka: Any, data: str) -> None:
    """A starting timestamp after every record: an error by default (as the JVM
    source's "No offset matched"), the partition's end with strategy "latest"."""
    late = str(BASE_TS + 10**9)
    with pytest.raises(Exception) as info:
        _load(spark, kafka.bootstrap, subscribe=data, startingTimestamp=late).count()
    assert "option 'startingTimestamp': no offset matched the timestamp of" in str(info.value)
    assert "Traceback" not in str(info.value)
    df = _load(
        spark,
        kafka.bootstrap,
        subscribe=data,
        startingTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0
    # Per partition, and in a stream's initial offsets, the same rule.
    by_part = json.dumps({data: {"0": BASE_TS + 39_000, "1": BASE_TS + 10**9, "2": BASE_TS}})
    with pytest.raises(ConfigError, match=rf"{data}-1 at {BASE_TS + 10**9}"):
        _ranges(kafka.bootstrap, subscribe=data, startingOffsetsByTimestamp=by_part)
    got = _ranges(
        kafka.bootstrap,
        subscribe=data,
        startingOffsetsByTimestamp=by_part,
        startingOffsetsByTimestampStrategy="LATEST",
    )
    assert got == {0: (39, 40), 1: (40, 40), 2: (0, 40)}

    from kpax.spark.stream import KpaxStreamReader

    stream = KpaxStreamReader(
        _read(
            kafka.bootstrap,
            batch=False,
            subscribe=data,
            startingTimestamp=late,
            startingOffsetsByTimestampStrategy="latest",
        )
    )
    try:
        assert stream.initialOffset() == {data: dict.fromkeys(("0", "1", "2"), PER_PART)}
    finally:
        stream.stop()


# ---------------------------------------------------------------- trigger limits


def test_min_offsets_per_trigger_and_max_trigger_delay(
    kafka: Any, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A micro-batch waits while fewer than minOffsetsPerTrigger records are new,
    unless maxTriggerDelay passed since the last batch; maxOffsetsPerTrigger still
    caps it; Trigger.AvailableNow never waits (the JVM source's rules)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    import kpax.spark.stream as stream_mod

    now = [1000.0]
    monkeypatch.setattr(stream_mod.time, "time", lambda: now[0])
    opts = _read(
        kafka.bootstrap,
        batch=False,
        subscribe=data,
        minOffsetsPerTrigger="50",
        maxTriggerDelay="30s",
        maxOffsetsPerTrigger="100",
    )
    stream = stream_mod.KpaxStreamReader(opts)
    try:
        assert stream.getDefaultReadLimit() == ReadMaxRows(100)
        start = {data: {"0": 30, "1": 30, "2": 30}}  # 30 new records in all
        limit = ReadMaxRows(100)
        # the first trigger is never held back (no batch yet: the delay has passed)
        assert stream.latestOffset(start, limit) == {data: dict.fromkeys(("0", "1", "2"), 40)}
        now[0] += 1
        assert stream.latestOffset(start, limit) == start  # 30 new < 50: wait
        now[0] += 28
        assert stream.latestOffset(start, limit) == start  # 29 s since the last batch
        now[0] += 1.5
        assert stream.latestOffset(start, limit) != start  # 30.5 s: maxTriggerDelay passed
        now[0] += 1
        more = {data: {"0": 20, "1": 20, "2": 20}}  # 60 new >= 50, capped at 100 in all
        end = stream.latestOffset(more, limit)
        assert sum(int(o) for o in end[data].values()) - 60 == 60
        assert stream.latestOffset(start, ReadAllAvailable()) != start  # the engine's limit wins
        assert stream.reportLatestOffset() == {data: dict.fromkeys(("0", "1", "2"), PER_PART)}
        # Trigger.AvailableNow: no waiting for a minimum it may never reach
        now[0] += 1
        stream.prepareForTriggerAvailableNow()
        assert stream.latestOffset(start, ReadMinRows(50)) != start
    finally:
        stream.stop()
    only_min = stream_mod.KpaxStreamReader(
        _read(kafka.bootstrap, batch=False, subscribe=data, minOffsetsPerTrigger="5")
    )
    assert only_min.getDefaultReadLimit() == ReadMinRows(5)


def test_min_offsets_per_trigger_in_a_running_query(spark: Any, kafka: Any, topic: Any) -> None:
    """Through Spark: after the first batch, 10 new records (< 100) make no batch;
    100 more do."""
    name = topic(1)
    produce(kafka.bootstrap, name, [(0, None, b"a", None, None)] * 5)
    got: list[int] = []

    def each(batch: Any, batch_id: int) -> None:
        got.append(batch.count())

    q = (
        spark.readStream.format("kpax")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", name)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "100")
        .option("maxTriggerDelay", "1h")
        .load()
        .writeStream.foreachBatch(each)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        eventually(lambda: got == [5], timeout=120)
        produce(kafka.bootstrap, name, [(0, None, b"b", None, None)] * 10)
        # the query keeps triggering and finding too little: it has seen the 10 records
        eventually(lambda: _latest_seen(q) == 15, timeout=60)
        assert got == [5]
        produce(kafka.bootstrap, name, [(0, None, b"c", None, None)] * 100)
        eventually(lambda: got == [5, 110], timeout=120)
    finally:
        q.stop()


def _latest_seen(q: Any) -> int:
    """The source's latestOffset (reportLatestOffset) in the query's last progress."""
    progress = q.lastProgress
    if not progress or not progress["sources"][0].get("latestOffset"):
        return -1
    latest = json.loads(progress["sources"][0]["latestOffset"])
    return sum(int(o) for parts in latest.values() for o in parts.values())


def test_trigger_options_are_refused_in_batch_queries() -> None:
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        with pytest.raises(ConfigError, match=f"option '{name}' is not allowed in batch"):
            _read("127.0.0.1:1", subscribe="t", **{name: "10"})
    with pytest.raises(ConfigError, match="'minOffsetsPerTrigger' \\(20\\) is higher"):
        _read(
            "127.0.0.1:1",
            False,
            subscribe="t",
            minOffsetsPerTrigger="20",
            maxOffsetsPerTrigger="10",
        )
    with pytest.raises(ConfigError, match="applies only with 'minOffsetsPerTrigger'"):
        _read("127.0.0.1:1", False, subscribe="t", maxTriggerDelay="5m")
    with pytest.raises(ConfigError, match="expected a duration"):
        _read(
            "127.0.0.1:1",
            False,
            subscribe="t",
            minOffsetsPerTrigger="1",
            maxTriggerDelay="5 parsecs",
        )
    for text, ms in (
        ("15m", 900_000),
        ("30s", 30_000),
        ("250ms", 250),
        ("2h", 7_200_000),
        ("7", 7),
    ):
        opts = _read(
            "127.0.0.1:1", False, subscribe="t", minOffsetsPerTrigger="1", maxTriggerDelay=text
        )
        assert opts.max_trigger_delay_ms == ms


def test_ending_options_are_refused_in_streams() -> None:
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(ConfigError, match=f"option '{name}' is not allowed in streaming"):
            _read("127.0.0.1:1", False, subscribe="t", **{name: "1"})


# ---------------------------------------------------------------- splitting


def test_max_records_per_partition(spark: Any, kafka: Any, data: str) -> None:
    """No Spark partition holds more than maxRecordsPerPartition records; with
    minPartitions, the larger count wins; no gap, no overlap."""
    df = _load(spark, kafka.bootstrap, subscribe=data, maxRecordsPerPartition="7")
    assert df.rdd.getNumPartitions() == PARTS * 6  # ceil(40 / 7) pieces per partition
    rows = df.select("partition", "offset").collect()
    assert sorted((r["partition"], r["offset"]) for r in rows) == [
        (p, o) for p in range(PARTS) for o in range(PER_PART)
    ]
    pieces = split_ranges([OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10)], 30, 20)
    assert all(r.size <= 20 for r in pieces) and len(pieces) >= 30
    assert sum(r.size for r in pieces) == 110
    with pytest.raises(ConfigError, match="option 'maxRecordsPerPartition': must be >= 1"):
        _read("127.0.0.1:1", subscribe="t", maxRecordsPerPartition="0")


# ---------------------------------------------------------------- offset fetching


class _FlakyAdmin:
    """list_offsets fails ``failures`` times, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def list_offsets(self, specs: Any, isolation_level: str) -> Any:
        from kpax.structs import OffsetAndTimestamp

        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaTimeoutError("list offsets timed out (test)")
        return {tp: OffsetAndTimestamp(7, -1) for tp in specs}

    def close(self) -> None:
        pass


def test_fetch_offset_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """fetchOffset.numRetries attempts in all, fetchOffset.retryIntervalMs apart (the
    JVM source's offset fetching); a configuration error is not retried."""
    import kpax.spark.planning as planning

    slept: list[float] = []
    monkeypatch.setattr(planning.time, "sleep", slept.append)
    tp = TopicPartition("t", 0)
    opts = _read(
        "127.0.0.1:1",
        subscribe="t",
        **{"fetchOffset.numRetries": "3", "fetchOffset.retryIntervalMs": "250"},
    )
    planner = Planner(opts)
    planner._admin = _FlakyAdmin(2)  # type: ignore[assignment]
    assert planner.list_offsets({tp: "latest"}) == {tp: 7}
    assert slept == [0.25, 0.25]
    planner._admin = _FlakyAdmin(3)  # type: ignore[assignment]
    with pytest.raises(KafkaTimeoutError):
        planner.list_offsets({tp: "latest"})
    assert planner._admin.calls == 3  # type: ignore[attr-defined]
    assert _read("127.0.0.1:1", subscribe="t").fetch_offset_attempts == 3  # the JVM default
    with pytest.raises(ConfigError, match=r"option 'fetchOffset\.numRetries'"):
        _read("127.0.0.1:1", subscribe="t", **{"fetchOffset.numRetries": "none"})


# ---------------------------------------------------------------- group ids


def test_group_id_options_name_the_executor_consumers() -> None:
    """kafka.group.id / groupIdPrefix: the executors' consumers are named after the
    group, as the JVM source's (client.id consumer-<group>); they never join it."""
    from kpax.spark.read import consumer_config

    batch = _read("127.0.0.1:1", subscribe="t")
    assert batch.group_id is not None and batch.group_id.startswith("spark-kafka-relation-")
    stream = _read("127.0.0.1:1", False, subscribe="t", groupIdPrefix="orders-app")
    assert stream.group_id is not None and stream.group_id.startswith("orders-app-")
    assert stream.group_id.endswith("-executor")
    cfg = consumer_config(stream)
    assert cfg["client_id"] == f"consumer-{stream.group_id}" and "group_id" not in cfg
    fixed = _read(
        "127.0.0.1:1", subscribe="t", groupIdPrefix="ignored", **{"kafka.group.id": "authorized"}
    )
    assert fixed.group_id == "authorized"
    assert consumer_config(fixed)["client_id"] == "consumer-authorized"
    named = _read("127.0.0.1:1", subscribe="t", **{"kafka.client.id": "mine"})
    assert consumer_config(named)["client_id"] == "mine"


def test_group_id_reads_through_spark(spark: Any, kafka: Any, data: str) -> None:
    df = _load(spark, kafka.bootstrap, subscribe=data, **{"kafka.group.id": "authorized-group"})
    assert df.count() == PARTS * PER_PART


# ---------------------------------------------------------------- unknown and misplaced


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffset": "earliest"}, "did you mean 'startingOffsets'?"),
        ({"maxOffsetPerTrigger": "5"}, "did you mean 'maxOffsetsPerTrigger'?"),
        ({"failOnDataLos": "false"}, "did you mean 'failOnDataLoss'?"),
        ({"topic": "x"}, "option 'topic' is a write option"),
        ({"deliveryGuarantee": "exactly-once"}, "option 'deliveryGuarantee' is a write option"),
        ({"path": "/x"}, "kpax takes no path"),
        ({"kafka.auto.offset.reset": "earliest"}, "use startingOffsets"),
        ({"kafka.fetch.max.byte": "5"}, "did you mean 'kafka.fetch.max.bytes'?"),
        ({"kafka.max.poll.records": "-3"}, "max_poll_records"),
        ({"kafka.acks": "all"}, "option 'kafka.acks' is a producer option: a read does not use it"),
    ],
)
def test_unknown_read_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _read("127.0.0.1:1", False, subscribe="t", **options)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topik": "x"}, "did you mean 'topic'?"),
        ({"deliveryGuarante": "exactly-once"}, "did you mean 'deliveryGuarantee'?"),
        ({"subscribe": "x"}, "option 'subscribe' is a read option"),
        ({"deliveryGuarantee": "twice"}, "must be 'at-least-once' or 'exactly-once'"),
        ({"transactionalIdPrefix": "p"}, "applies only with deliveryGuarantee=exactly-once"),
        ({"kafka.transactional.id": "t"}, "the sink names one transactional id per task"),
        (
            {"deliveryGuarantee": "exactly-once", "kafka.acks": "1"},
            "not allowed with deliveryGuarantee=exactly-once",
        ),
        (
            {"deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"},
            "transactions need idempotence",
        ),
        ({"kafka.key.serializer": "x"}, "write a binary or string 'key' column"),
        (
            {"kafka.max.poll.records": "5"},
            "option 'kafka.max.poll.records' is a consumer option: a write does not use it",
        ),
        ({"includeHeaders": "perhaps"}, "option 'includeHeaders'"),
    ],
)
def test_unknown_write_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_write_options({"kafka.bootstrap.servers": "127.0.0.1:1", **options})
    assert message in str(info.value)


def test_spark_level_options_reach_a_sink_and_are_accepted() -> None:
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "topic": "t",
            "checkpointLocation": "/tmp/x",
            "queryName": "q",
            "includeHeaders": "true",
        }
    )
    assert opts.topic == "t" and not opts.exactly_once


def test_a_misspelt_option_is_one_clear_line_through_spark(
    spark: Any, kafka: Any, data: str, tmp_path: Path
) -> None:
    """The ConfigError's message, not a Python traceback, is what Spark's
    AnalysisException says (read, write and streaming write)."""
    with pytest.raises(Exception) as info:
        _load(spark, kafka.bootstrap, subscribe=data, startingOffset="earliest").count()
    text = str(info.value)
    assert "ConfigError: option 'startingoffset' is not an option of the kpax source" in text
    assert "did you mean 'startingOffsets'?" in text
    assert "Traceback" not in text and len(text.strip().splitlines()) <= 3
    with pytest.raises(Exception) as info:
        spark.range(1).selectExpr("cast(id AS string) AS value").write.format("kpax").option(
            "kafka.bootstrap.servers", kafka.bootstrap
        ).option("topik", data).mode("append").save()
    assert "did you mean 'topic'?" in str(info.value) and "Traceback" not in str(info.value)


def test_poll_timeout_fails_a_task_that_makes_no_progress(kafka: Any, data: str) -> None:
    """kafkaConsumer.pollTimeoutMs: a task waiting that long for records it must read
    (here: past the partition's end) fails, naming the partition and the option."""
    import time

    from kpax.spark.read import read_range

    opts = _read(kafka.bootstrap, subscribe=data, **{"kafkaConsumer.pollTimeoutMs": "1500"})
    started = time.monotonic()
    with pytest.raises(
        KafkaTimeoutError, match=rf"{data}-0 for 1.5s \(kafkaConsumer.pollTimeoutMs\)"
    ):
        list(read_range(opts, OffsetRange(data, 0, 30, PER_PART + 5)))
    assert time.monotonic() - started < 30


def test_small_partitions_are_packed_into_one_task(spark: Any, kafka: Any, data: str) -> None:
    """minRecordsPerPartition (kpax's; default 20,000): Kafka partitions with few
    records are read by one task, every record once and in order per partition;
    0, or minPartitions, keeps the JVM source's one task per Kafka partition."""
    from kpax.spark.planning import pack_ranges

    df = _load(spark, kafka.bootstrap, subscribe=data)
    assert df.rdd.getNumPartitions() == 1
    rows = [(r["partition"], r["offset"]) for r in df.select("partition", "offset").collect()]
    assert sorted(rows) == [(p, o) for p in range(PARTS) for o in range(PER_PART)]
    for p in range(PARTS):
        mine = [o for q, o in rows if q == p]
        assert mine == sorted(mine)
    one_each = _load(spark, kafka.bootstrap, subscribe=data, minRecordsPerPartition="0")
    assert one_each.rdd.getNumPartitions() == PARTS
    assert (
        _load(spark, kafka.bootstrap, subscribe=data, minPartitions="3").rdd.getNumPartitions() >= 3
    )
    packed = _load(spark, kafka.bootstrap, subscribe=data, minRecordsPerPartition="50")
    assert packed.rdd.getNumPartitions() == 2  # 40 + 40, then 40
    assert packed.count() == PARTS * PER_PART

    def sizes(groups: list[list[OffsetRange]]) -> list[list[int]]:
        return [[r.size for r in g] for g in groups]

    ranges = [OffsetRange("t", p, 0, n) for p, n in enumerate([10, 500, 5, 5, 0, 30])]
    assert sizes(pack_ranges(ranges, 100)) == [[10, 500], [5, 5, 30]]
    assert sizes(pack_ranges(ranges, 100, max_records=39)) == [[10], [500], [5, 5], [30]]
    assert sizes(pack_ranges(ranges, 0)) == [[10], [500], [5], [5], [30]]
