"""A Python data source that writes nothing ("pynoop"): the floor of a Python sink in Spark.

Role: bench/spark.py's ``first write`` runs it beside kpax and the JVM Kafka sink,
so the table shows what any Python data source pays on a session's first write
(the Python processes Spark starts to plan, run and commit it) with no Kafka
work at all. Its tasks read their Arrow batches and discard them.

Imports: pyspark.sql.datasource.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


class NoopWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class NoopDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pynoop"

    def writer(self, schema: Any, overwrite: bool) -> NoopWriter:
        return NoopWriter()
