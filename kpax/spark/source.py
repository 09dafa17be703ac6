"""The PySpark Python data source "kpax": the DataSource and its batch reader.

Role: ``spark.dataSource.register(KpaxDataSource)`` makes
``spark.read.format("kpax")`` / ``readStream`` / ``write`` / ``writeStream``
work with the option names of Spark's built-in Kafka source. Options are
checked when Spark plans the query (``reader()`` / ``writer()``); offsets are
resolved on the driver (kpax.Admin); each input partition (one Kafka
partition, a piece of one with ``minPartitions``, or several small ones
packed together) is read on an executor by
:func:`kpax.spark.read.read_ranges`. Objects Spark ships to executors hold
plain data only (options, offset ranges), never a client.

Errors a user makes (a bad option, a topic that does not exist) are
:class:`~kpax.errors.ConfigError` s: :func:`user_errors` has Spark show them as
one line (``kpax.errors.ConfigError: option 'x' ...``) instead of a Python
traceback inside its AnalysisException; other errors keep their traceback.

Imports: pyspark.sql.datasource, kpax.errors, kpax.spark.*.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)

from kpax.errors import ConfigError
from kpax.spark.options import ReadOptions, parse_read_options, parse_write_options
from kpax.spark.planning import OffsetRange

__all__ = ["KpaxBatchReader", "KpaxDataSource", "RangePartition", "user_errors"]

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """A ConfigError out of ``fn`` reaches the user as its message alone: the Python
    worker that reports it (to Spark, then exits) is told to leave out the
    traceback (``SPARK_HIDE_TRACEBACK``, read when it formats the error). Spark's
    workers exit after reporting an error, so nothing else is affected."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError:
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return wrapper  # type: ignore[return-value]


class RangePartition(InputPartition):
    """The offset ranges one Spark task reads, one after the other (plain data: pickles)."""

    def __init__(self, ranges: list[OffsetRange]) -> None:
        super().__init__(ranges)
        self.ranges = list(ranges)

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


class KpaxBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    @user_errors
    def partitions(self) -> list[RangePartition]:
        from kpax.spark.planning import Planner

        planner = Planner(self.opts)
        try:
            tasks = planner.batch_tasks()
        finally:
            planner.close()
        return [RangePartition(t) for t in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kpax.spark.read import read_ranges

        if isinstance(partition, RangePartition):  # (Spark's stand-in when there is none: no rows)
            yield from read_ranges(self.opts, partition.ranges)


class KpaxDataSource(DataSource):
    """``spark.read.format("kpax").option("kafka.bootstrap.servers", ...)``."""

    @classmethod
    def name(cls) -> str:
        return "kpax"

    def _include_headers(self) -> bool:
        from kpax.spark.options import _bool

        return _bool("includeHeaders", str(self.options.get("includeHeaders", "false")))

    @user_errors
    def schema(self) -> Any:
        from kpax.spark.schema import spark_schema

        return spark_schema(self._include_headers())

    @user_errors
    def reader(self, schema: Any) -> DataSourceReader:
        return KpaxBatchReader(parse_read_options(self.options, batch=True))

    @user_errors
    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        from kpax.spark.stream import KpaxStreamReader

        return KpaxStreamReader(parse_read_options(self.options, batch=False))

    @user_errors
    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        from kpax.spark.write import KpaxBatchWriter

        return KpaxBatchWriter(parse_write_options(self.options), schema)

    @user_errors
    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        from kpax.spark.write import KpaxStreamWriter

        return KpaxStreamWriter(parse_write_options(self.options), schema)
