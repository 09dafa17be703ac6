"""The PySpark Python data source "kpax": the DataSource and its batch reader.

Role: ``spark.dataSource.register(KpaxDataSource)`` makes
``spark.read.format("kpax")`` / ``readStream`` / ``write`` / ``writeStream``
work with the option names of Spark's built-in Kafka source. Options are
checked when Spark plans the query (``reader()`` / ``writer()``); offsets are
resolved on the driver (kpax.Admin); each input partition (one Kafka
partition, or one piece of it with ``minPartitions``) is read on an executor
by :func:`kpax.spark.read.read_range`. Objects Spark ships to executors hold
plain data only (options, offset ranges), never a client.

Imports: pyspark.sql.datasource, kpax.spark.*.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)

from kpax.spark.options import ReadOptions, parse_read_options, parse_write_options
from kpax.spark.planning import OffsetRange

__all__ = ["KpaxDataSource", "KpaxBatchReader", "RangePartition"]


class RangePartition(InputPartition):
    """One offset range to read (plain data: pickles)."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


class KpaxBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[RangePartition]:
        from kpax.spark.planning import Planner

        planner = Planner(self.opts)
        try:
            ranges = planner.batch_ranges()
        finally:
            planner.close()
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kpax.spark.read import read_range

        assert isinstance(partition, RangePartition)
        yield from read_range(self.opts, partition.range)


class KpaxDataSource(DataSource):
    """``spark.read.format("kpax").option("kafka.bootstrap.servers", ...)``."""

    @classmethod
    def name(cls) -> str:
        return "kpax"

    def _include_headers(self) -> bool:
        from kpax.spark.options import _bool

        return _bool("includeHeaders", str(self.options.get("includeHeaders", "false")))

    def schema(self) -> Any:
        from kpax.spark.schema import spark_schema

        return spark_schema(self._include_headers())

    def reader(self, schema: Any) -> DataSourceReader:
        return KpaxBatchReader(parse_read_options(self.options, batch=True))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        from kpax.spark.stream import KpaxStreamReader

        return KpaxStreamReader(parse_read_options(self.options, batch=False))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        from kpax.spark.write import KpaxBatchWriter

        return KpaxBatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        from kpax.spark.write import KpaxStreamWriter

        return KpaxStreamWriter(parse_write_options(self.options), schema)
