"""The consumer's ``metrics()``: its counters under the Java consumer's names.

Role: builds the ``{name: value}`` of
:meth:`AsyncConsumer.metrics <kpax.consumer.client.AsyncConsumer.metrics>` from the
partition states (lag per partition and its max, assigned partitions), the
consumer's sensors (records consumed, fetches, commits) and the connections'
metrics (kpax.metrics); read from any thread.

Imports: kpax.consumer.{options,state}, kpax.metrics, kpax.structs.
"""

from __future__ import annotations

from kpax.consumer.options import ConsumerSettings
from kpax.consumer.state import PartitionState
from kpax.metrics import NAN, ConnectionMetrics, Metrics, tagged
from kpax.structs import TopicPartition


def consumer_metrics(
    states: dict[TopicPartition, PartitionState],
    settings: ConsumerSettings,
    metrics: Metrics | None,
    conn_metrics: ConnectionMetrics | None,
) -> dict[str, float]:
    """The Java consumer's metrics that apply (see docs/observability.md); only
    the lags and assigned partitions when metrics are switched off."""
    read_committed = settings.read_committed
    out: dict[str, float] = {}
    lags: list[int] = []
    for tp, st in list(states.items()):
        end = st.last_stable_offset if read_committed else st.high_watermark
        if st.position is None or end < 0 or not st.assigned:
            continue
        lag = max(end - st.position, 0)
        out[tagged("records-lag", topic=tp.topic, partition=tp.partition)] = lag
        lags.append(lag)
    out["records-lag-max"] = max(lags) if lags else NAN
    out["assigned-partitions"] = sum(1 for st in list(states.values()) if st.assigned)
    m, conn = metrics, conn_metrics
    if m is None or conn is None:
        return out
    now = m.clock()
    consumed = m.sensor("records-consumed")
    out["records-consumed-total"] = consumed.total
    out["records-consumed-rate"] = consumed.rate(now)
    out["records-per-poll-avg"] = consumed.avg(now)
    fetch_latency, fetch_size = m.sensor("fetch-latency"), m.sensor("fetch-size")
    out["fetch-total"] = fetch_latency.count
    out["fetch-rate"] = fetch_latency.count_rate(now)
    out["fetch-latency-avg"] = fetch_latency.avg(now)
    out["fetch-latency-max"] = fetch_latency.max(now)
    out["fetch-size-avg"] = fetch_size.avg(now)
    out["fetch-size-max"] = fetch_size.max(now)
    out["bytes-fetched-total"] = fetch_size.total
    commit = m.sensor("commit-latency")
    out["commit-total"] = commit.count
    out["commit-rate"] = commit.count_rate(now)
    out["commit-latency-avg"] = commit.avg(now)
    out["commit-latency-max"] = commit.max(now)
    conn.snapshot(out, now)
    return out
