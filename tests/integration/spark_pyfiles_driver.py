"""A Spark application shipping kpax as a zip with ``--py-files`` (what
``spark.submit.pyFiles`` does when PySpark starts its JVM), for
test_spark_deploy.py: run as a process of its own so that its executors import
kpax from the zip only.

``python -m tests.integration.spark_pyfiles_driver --master URL --zip Z
--bootstrap B --topic T`` prints one JSON line: the application id, where the
executors imported kpax from, and how many records a "kpax" read counted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tests.integration.spark_helpers import session_config


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("master", "zip", "bootstrap", "topic"):
        ap.add_argument(f"--{name}", required=True)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kpax.spark

    conf = session_config("standalone", "kpax-spark-pyfiles", master=args.master)
    conf.pop("spark.executorEnv.PYTHONPATH")  # kpax only from the zip on the executors
    conf["spark.submit.pyFiles"] = args.zip
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kpax.spark.register(spark)
    files = (
        spark.sparkContext.parallelize(range(4), 4)
        .map(lambda _: __import__("kpax").__file__)
        .collect()
    )
    count = (
        spark.read.format("kpax")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("minPartitions", "8")
        .load()
        .count()
    )
    print(json.dumps({"app": spark.sparkContext.applicationId, "files": files, "count": count}))
    spark.stop()


if __name__ == "__main__":
    main()
