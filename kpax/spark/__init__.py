"""kpax.spark — the PySpark data source named "kpax" (batch and streaming, read and write).

``kpax.spark.register(spark)`` registers it; then ``spark.read.format("kpax")``
with the option names of Spark's built-in Kafka source (docs/spark.md).

Imports: the public kpax API; pyspark and pyarrow only inside the data source methods.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the "kpax" data source with ``spark`` (a SparkSession)."""
    from kpax.spark.source import KpaxDataSource

    spark.dataSource.register(KpaxDataSource)
