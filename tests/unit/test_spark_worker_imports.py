"""The Python workers Spark starts on the driver host to plan and to commit a "kpax"
write (a fresh Python each, per session) load only what they use: unpickling the
writer and committing an at-least-once write must not import the exactly-once
machinery (kpax.spark.txn, asyncio) or the kpax clients."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

_CHILD = """
import pickle, sys
writer, messages = pickle.loads(sys.stdin.buffer.read())
writer.commit(messages)
loaded = [m for m in ("kpax.spark.txn", "asyncio", "kpax.producer", "kpax.admin", "pyarrow")
          if m in sys.modules]
print(",".join(loaded))
"""


def test_committing_an_at_least_once_write_loads_no_client_or_txn_module() -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kpax.spark.options import parse_write_options
    from kpax.spark.write import KpaxBatchWriter, KpaxCommitMessage

    schema = StructType([StructField("value", BinaryType())])
    writer = KpaxBatchWriter(
        parse_write_options({"kafka.bootstrap.servers": "localhost:9092", "topic": "t"}), schema
    )
    messages = [KpaxCommitMessage(rows=3, topics={"t": 3}), None]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=pickle.dumps((writer, messages)),
        capture_output=True,
        check=True,
    )
    assert out.stdout.decode().strip() == ""


_PLAN = """
import sys
from pyspark.sql.types import BinaryType, StructField, StructType
from kpax.spark.source import KpaxDataSource
opts = {"kafka.bootstrap.servers": "localhost:9092", "topic": "t", "kafka.linger.ms": "5",
        "subscribe": "t", "kafka.fetch.max.wait.ms": "100"}
write = {k: v for k, v in opts.items() if k not in ("subscribe", "kafka.fetch.max.wait.ms")}
KpaxDataSource(write).writer(StructType([StructField("value", BinaryType())]), False)
KpaxDataSource(write).streamWriter(StructType([StructField("value", BinaryType())]), False)
read = {k: v for k, v in opts.items() if k not in ("topic", "kafka.linger.ms")}
KpaxDataSource(read).reader(None)
loaded = [m for m in sys.modules if m in (
    "asyncio", "kpax.broker.connection", "kpax.cluster.cluster", "kpax.producer.client",
    "kpax.consumer.client", "kpax.admin.client") or m.startswith("kpax.proto.messages._generated.")]
print(",".join(sorted(loaded)))
"""


def test_planning_a_query_checks_its_kafka_options_without_loading_a_client() -> None:
    """The planning worker of a write (and the driver's reader() of a batch read) checks
    the kafka.* options against the client's option table: that loads the table, not
    the client (its broker connection, cluster, protocol messages, asyncio)."""
    out = subprocess.run([sys.executable, "-c", _PLAN], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
