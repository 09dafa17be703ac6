"""The Spark tests' shared SparkSession (``spark``: local[2]) for the whole test
session, so that the Spark test modules do not each pay a SparkSession and its
executors. The standalone cluster has its own small module
(test_spark_cluster.py) and the tests that start applications of their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.spark_helpers import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    yield from spark_session("kpax-spark-tests", "local")
