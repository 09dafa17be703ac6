"""kpax.spark — the PySpark data source named "kpax" (batch and streaming, read and write).

``kpax.spark.register(spark)`` registers it; then ``spark.read.format("kpax")``
with the option names of Spark's built-in Kafka source (docs/spark.md).
``kpax.spark.source_progress(query.lastProgress)`` adds what Spark's progress
cannot show of a "kpax" source (its topics, offsets behind latest).

Imports: the public kpax API; pyspark and pyarrow only inside the data source methods.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "source_progress"]


def register(spark: Any) -> None:
    """Register the "kpax" data source with ``spark`` (a SparkSession)."""
    from kpax.spark.source import KpaxDataSource

    spark.dataSource.register(KpaxDataSource)


def source_progress(progress: Any) -> list[dict[str, Any]]:
    """A streaming query progress's sources, each "kpax" source with a description
    naming its topics and the JVM Kafka source's offsets-behind-latest metrics
    (``kpax.spark.progress``)."""
    from kpax.spark.progress import source_progress as fill

    return fill(progress)
