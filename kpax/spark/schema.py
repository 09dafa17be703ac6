"""The Spark schema of the "kpax" source: Spark's Kafka source columns.

Role: ``key binary, value binary, topic string, partition int, offset long,
timestamp timestamp, timestampType int`` plus ``headers
array<struct<key:string,value:binary>>`` with ``includeHeaders=true``.

Imports: pyspark.sql.types (inside the function).
"""

from __future__ import annotations

from typing import Any

__all__ = ["spark_schema"]


def spark_schema(include_headers: bool) -> Any:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)
