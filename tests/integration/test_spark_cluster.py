"""The Spark tests that matter most, again on a Spark standalone cluster: a master and
two workers started by the test set-up (tests/integration/spark_helpers.py), an
application with one executor JVM on each worker, kpax imported by the executors'
own Python workers (``spark.executorEnv.PYTHONPATH``, as an installed kpax) and by
the planning workers on the driver host.

The other Spark test modules run on the shared local[2] session; this module
re-runs a few of their tests here (imported below, with this module's ``spark``)
rather than the whole Spark suite twice: a batch read of every column, split
reads, batch and streaming writes, a streaming query restarted from its
checkpoint, exactly-once batch writes, and several kpax streaming queries at
once (issue 31 saw two of them stall on a 2-core cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.spark_helpers import spark_session
from tests.integration.test_spark_concurrent import test_four_kpax_queries_at_once
from tests.integration.test_spark_exactly_once import (
    test_batch_write_exactly_once_is_all_or_nothing,
)
from tests.integration.test_spark_read import (
    data,
    test_min_partitions_splits_without_gap_or_overlap,
    test_read_everything,
)
from tests.integration.test_spark_stream import (
    test_batch_write_reads_back_equal,
    test_stream_restart_reads_every_record_once,
    test_stream_write_reads_back_equal,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration]

#: Re-run here only by ``make test-soak`` (``make test`` runs them on local[2]
#: and, on the cluster, the application and a full read: the executors' own
#: Python workers import kpax and read every column; restarting a stream from its
#: checkpoint is the driver's work, the same on local[2]).
SOAK = {
    "test_batch_write_exactly_once_is_all_or_nothing",
    "test_batch_write_reads_back_equal",
    "test_four_kpax_queries_at_once",
    "test_min_partitions_splits_without_gap_or_overlap",
    "test_stream_restart_reads_every_record_once",
    "test_stream_write_reads_back_equal",
}

__all__ = [
    "data",
    "test_batch_write_exactly_once_is_all_or_nothing",
    "test_batch_write_reads_back_equal",
    "test_four_kpax_queries_at_once",
    "test_min_partitions_splits_without_gap_or_overlap",
    "test_read_everything",
    "test_stream_restart_reads_every_record_once",
    "test_stream_write_reads_back_equal",
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """An application on the standalone cluster (two executors, one per worker)."""
    yield from spark_session("kpax-spark-cluster", "standalone")


def test_the_application_runs_on_two_executors(spark: Any) -> None:
    """Two executor JVMs besides the driver: the tests above ran on a real cluster."""
    assert spark.sparkContext.master.startswith("spark://")
    assert spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() == 3
