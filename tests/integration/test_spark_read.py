"""The "kpax" Spark data source, batch reads: what Spark sees equals what was produced,
for every offset option; minPartitions splits without gap or overlap; bad options
are clear planning-time errors. On the shared local[2] session
(tests/integration/conftest.py); test_spark_cluster.py runs some on the standalone cluster."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from typing import Any

import pytest

import kpax
from tests.integration.spark_helpers import produce

pytestmark = [pytest.mark.slow, pytest.mark.integration]

BASE_TS = 1_700_000_000_000
PARTS = 3
PER_PART = 40


@pytest.fixture(scope="module")
def data(kafka: Any) -> tuple[str, dict[tuple[int, int], tuple[Any, ...]]]:
    """A 3-partition topic with 40 records each: keys (some null), values, headers,
    timestamps BASE_TS + i*1000 (i = index within the partition)."""
    from kpax.testing.pytest_plugin import create_topic

    name = create_topic(kafka, PARTS, config={"retention.ms": "-1"})
    rows = []
    for part in range(PARTS):
        for i in range(PER_PART):
            key = None if i % 7 == 0 else f"k{part}-{i}".encode()
            headers = [("h", f"{i}".encode()), ("n", None)] if i % 2 else None
            rows.append((part, key, f"v{part}-{i}".encode() * 3, headers, BASE_TS + i * 1000))
    metas = produce(kafka.bootstrap, name, rows)
    expected = {}
    for (part, key, value, headers, ts), meta in zip(rows, metas, strict=True):
        assert meta.partition == part
        expected[(part, meta.offset)] = (key, value, tuple(headers or ()), ts)
    return name, expected


def _load(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kpax").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df: Any) -> dict[tuple[int, int], Any]:
    return {(r["partition"], r["offset"]): r for r in df.collect()}


def _check(
    rows: dict[tuple[int, int], Any], expected: dict[Any, Any], topic: str, headers: bool
) -> None:
    assert set(rows) == set(expected)
    for pos, r in rows.items():
        key, value, hdrs, ts = expected[pos]
        assert r["topic"] == topic
        assert r["key"] == key
        assert r["value"] == value
        assert (
            r["timestamp"]
            == dt.datetime.fromtimestamp(ts / 1000, dt.timezone.utc).replace(tzinfo=None)
            or r["timestamp"].timestamp() * 1000 == ts
        )
        assert r["timestampType"] == 0
        if headers:
            assert [(h["key"], h["value"]) for h in r["headers"]] == list(hdrs)
        else:
            assert "headers" not in r.asDict()


def test_read_everything(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    df = _load(spark, kafka.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    _check(_rows(df), expected, topic, headers=True)
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == dict.fromkeys(range(PARTS), PER_PART)


def test_read_without_headers_and_exact_timestamps(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    df = _load(spark, kafka.bootstrap, subscribe=topic)
    _check(_rows(df), expected, topic, headers=False)
    ms = {
        (r["partition"], r["offset"]): r["ms"]
        for r in df.selectExpr("partition", "offset", "unix_millis(timestamp) AS ms").collect()
    }
    assert ms == {pos: v[3] for pos, v in expected.items()}


def test_offsets_json_and_sentinels(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    starting = json.dumps({topic: {"0": 5, "1": -2, "2": 39}})
    ending = json.dumps({topic: {"0": 10, "1": -1, "2": -1}})
    df = _load(
        spark, kafka.bootstrap, subscribe=topic, startingOffsets=starting, endingOffsets=ending
    )
    rows = _rows(df)
    want = {(0, o) for o in range(5, 10)} | {(1, o) for o in range(PER_PART)} | {(2, 39)}
    assert set(rows) == want
    _check(rows, {p: expected[p] for p in want}, topic, headers=False)


def test_partitions_left_out_of_json_use_defaults(spark: Any, kafka: Any, data: Any) -> None:
    topic, _ = data
    df = _load(
        spark,
        kafka.bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"2": 30}}),
        endingOffsets=json.dumps({topic: {"0": 3}}),
    )
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {0: 3, 1: PER_PART, 2: PER_PART - 30}


def test_timestamps(spark: Any, kafka: Any, data: Any) -> None:
    topic, _ = data
    df = _load(
        spark,
        kafka.bootstrap,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 10_000),
        endingTimestamp=str(BASE_TS + 15_500),
    )
    got = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert got == [(p, o) for p in range(PARTS) for o in range(10, 16)]
    # a start after every record reads nothing (with strategy "latest"; the default
    # "error" is test_spark_options.py::test_starting_timestamp_strategy)
    df = _load(
        spark,
        kafka.bootstrap,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 10**9),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0
    by_part = json.dumps({topic: {"0": BASE_TS + 38_000, "1": BASE_TS, "2": BASE_TS + 10**9}})
    df = _load(
        spark,
        kafka.bootstrap,
        subscribe=topic,
        startingOffsetsByTimestamp=by_part,
        startingOffsetsByTimestampStrategy="latest",
    )
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {0: 2, 1: PER_PART}


def test_assign_and_pattern(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    df = _load(spark, kafka.bootstrap, assign=json.dumps({topic: [0, 2]}))
    assert {p for p, _ in _rows(df)} == {0, 2}
    assert df.count() == 2 * PER_PART
    df = _load(spark, kafka.bootstrap, subscribePattern=topic[:6] + ".*" + topic[-3:])
    assert df.count() == len(expected)


def test_min_partitions_splits_without_gap_or_overlap(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    df = _load(spark, kafka.bootstrap, subscribe=topic, minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    got = df.select("partition", "offset").collect()
    assert len(got) == len(expected)  # no overlap (duplicates)
    assert {(r["partition"], r["offset"]) for r in got} == set(expected)  # no gap

    from kpax.spark.planning import OffsetRange, split_ranges

    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 7, 107)]
    pieces = split_ranges(ranges, 8)
    assert len(pieces) >= 8
    for part, (lo, hi) in {0: (0, 1000), 2: (7, 107)}.items():
        mine = [r for r in pieces if r.partition == part]
        assert mine[0].start == lo and mine[-1].end == hi
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))


def test_read_committed_and_kafka_options(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    df = _load(
        spark,
        kafka.bootstrap,
        subscribe=topic,
        **{
            "isolation.level": "read_committed",
            "kafka.client.id": "spark-test",
            "kafka.request.timeout.ms": "20000",
            "kafka.fetch.max.bytes": "100000",
        },
    )
    assert df.count() == len(expected)


def test_sasl_listener(spark: Any, kafka: Any, data: Any) -> None:
    topic, expected = data
    df = (
        spark.read.format("kpax")
        .option("kafka.bootstrap.servers", kafka.listener("SASL_PLAINTEXT"))
        .option("kafka.security.protocol", "SASL_PLAINTEXT")
        .option("kafka.sasl.mechanism", "PLAIN")
        .option("kafka.sasl.plain.username", "alice")
        .option("kafka.sasl.plain.password", kafka.sasl_users["alice"])
        .option("subscribe", topic)
        .load()
    )
    assert df.count() == len(expected)


def test_empty_topic(spark: Any, kafka: Any, topic: Any) -> None:
    name = topic(2)
    assert _load(spark, kafka.bootstrap, subscribe=name).count() == 0


BAD_OPTIONS = [
    ({}, "exactly one of the options 'subscribe', 'subscribePattern', 'assign'"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of the options"),
    ({"assign": "[1,2]"}, "option 'assign'"),
    ({"subscribe": "TOPIC", "startingOffsets": "latest"}, "option 'startingOffsets'"),
    ({"subscribe": "TOPIC", "endingOffsets": "earliest"}, "option 'endingOffsets'"),
    ({"subscribe": "TOPIC", "startingOffsets": "{bad"}, "option 'startingOffsets'"),
    ({"subscribe": "TOPIC", "startingOffsets": '{"TOPIC":{"0":-1}}'}, "-1 (latest)"),
    ({"subscribe": "TOPIC", "minPartitions": "0"}, "option 'minPartitions'"),
    ({"subscribe": "TOPIC", "includeHeaders": "maybe"}, "option 'includeHeaders'"),
    ({"subscribe": "TOPIC", "kafka.auto.offset.reset": "none"}, "option 'kafka.auto.offset.reset'"),
    ({"subscribe": "TOPIC", "kafka.no.such.thing": "1"}, "option 'kafka.no.such.thing'"),
    (
        {"subscribe": "TOPIC", "kafka.request.timeout.ms": "soon"},
        "option 'kafka.request.timeout.ms'",
    ),
    ({"subscribe": "TOPIC", "isolation.level": "dirty"}, "option 'isolation.level'"),
    ({"subscribe": "TOPIC", "maxOffsetsPerTrigger": "5"}, "option 'maxOffsetsPerTrigger'"),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_options_are_clear_errors(options: dict[str, str], message: str) -> None:
    from kpax.errors import ConfigError
    from kpax.spark.options import parse_read_options

    options = {"kafka.bootstrap.servers": "127.0.0.1:1", **options}
    with pytest.raises(ConfigError) as info:
        parse_read_options(options, batch=True)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        BAD_OPTIONS[0],
        BAD_OPTIONS[3],
        BAD_OPTIONS[10],
        ({"subscribe": "TOPIC", "startingOffsets": '{"TOPIC":{"9":0}}'}, "TOPIC-9"),
        ({"subscribe": "no-such-topic-kpax"}, "no-such-topic-kpax"),
        (
            {"subscribe": "TOPIC", "endingOffsets": '{"TOPIC":{"1":1000}}'},
            "option 'endingOffsets': 1000 for TOPIC-1 is after the partition's end 40",
        ),
    ],
)
def test_bad_options_fail_spark_planning(
    spark: Any, kafka: Any, data: Any, options: dict[str, str], message: str
) -> None:
    topic, _ = data
    options = {k: v.replace("TOPIC", topic) for k, v in options.items()}
    message = message.replace("TOPIC", topic)
    with pytest.raises(Exception, match=r"kpax|option|exactly") as info:
        _load(spark, kafka.bootstrap, **options).count()
    assert message in str(info.value)


def test_missing_bootstrap_is_a_clear_error(spark: Any) -> None:
    with pytest.raises(Exception) as info:
        spark.read.format("kpax").option("subscribe", "x").load().count()
    assert "option 'kafka.bootstrap.servers' is required" in str(info.value)


def test_admin_sees_what_spark_read(kafka: Any, data: Any) -> None:
    topic, expected = data
    with kpax.Admin(kafka.bootstrap) as admin:
        ends = admin.list_offsets({kpax.TopicPartition(topic, p): "latest" for p in range(PARTS)})
    assert sum(v.offset for v in ends.values()) == len(expected)


def test_everything_spark_ships_pickles(kafka: Any, data: Any) -> None:
    """Readers, partitions and writers travel to executors by pickle: plain data only,
    even after the driver-side Admin client was used."""
    import pickle

    from pyspark.sql.types import BinaryType, StructField, StructType

    from kpax.spark.options import parse_read_options, parse_write_options
    from kpax.spark.source import KpaxBatchReader
    from kpax.spark.stream import KpaxStreamReader, cap_offsets
    from kpax.spark.write import KpaxBatchWriter, KpaxStreamWriter

    topic, expected = data
    opts = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic}
    reader = KpaxBatchReader(parse_read_options(opts, batch=True))
    parts = reader.partitions()
    assert sum(p.size for p in parts) == len(expected)
    for obj in [reader, *parts]:
        assert pickle.loads(pickle.dumps(obj)).__dict__.keys() == obj.__dict__.keys()
    stream = KpaxStreamReader(parse_read_options(opts, batch=False))
    start = stream.initialOffset()  # "latest" by default for streams
    assert start == {topic: dict.fromkeys(("0", "1", "2"), PER_PART)}
    assert stream._planner is not None  # the Admin client exists on the driver ...
    clone = pickle.loads(pickle.dumps(stream))
    assert clone._planner is None  # ... and never travels
    stream.stop()
    schema = StructType([StructField("value", BinaryType())])
    wopts = parse_write_options({"kafka.bootstrap.servers": kafka.bootstrap, "topic": topic})
    for w in (KpaxBatchWriter(wopts, schema), KpaxStreamWriter(wopts, schema)):
        assert pickle.loads(pickle.dumps(w)).opts == wopts

    tp = [kpax.TopicPartition("t", p) for p in range(3)]
    capped = cap_offsets({tp[0]: 0, tp[1]: 10, tp[2]: 5}, {tp[0]: 100, tp[1]: 10, tp[2]: 55}, 30)
    assert capped[tp[1]] == 10
    assert sum(capped[t] for t in tp) - 15 == 30
    assert capped[tp[0]] - 0 >= capped[tp[2]] - 5  # shared by backlog
