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
