"""The producer's ``metrics()``: its counters under the Java producer's names.

Role: builds the ``{name: value}`` of
:meth:`AsyncProducer.metrics <kpax.producer.client.AsyncProducer.metrics>` from
the accumulator (buffer memory), the sender's sensors and per-topic counts and the
connections' metrics (kpax.metrics); read from any thread.

Imports: kpax.metrics, kpax.producer.{accumulator,sender}.
"""

from __future__ import annotations

from kpax.metrics import ConnectionMetrics, Metrics, tagged
from kpax.producer.accumulator import Accumulator
from kpax.producer.sender import Sender


def producer_metrics(
    acc: Accumulator,
    sender: Sender,
    metrics: Metrics | None,
    conn_metrics: ConnectionMetrics | None,
) -> dict[str, float]:
    """The Java producer's metrics that apply (see docs/observability.md): client-wide
    names and per-topic variants tagged like Java's; only the buffer and in-flight
    figures when metrics are switched off (``metrics`` None)."""
    out: dict[str, float] = {
        "buffer-total-bytes": acc.buffer_memory,
        "buffer-available-bytes": max(acc.buffer_memory - acc.reserved, 0),
        "requests-in-flight": sender.in_flight,
    }
    m, conn = metrics, conn_metrics
    if m is None or conn is None:
        return out
    now = m.clock()
    for name, sensor in (
        ("record-send", sender.m_sent),
        ("record-error", sender.m_error),
        ("record-retry", sender.m_retry),
    ):
        out[f"{name}-total"] = sensor.total
        out[f"{name}-rate"] = sensor.rate(now)
    out["batch-size-avg"] = sender.m_batch.avg(now)
    out["batch-size-max"] = sender.m_batch.max(now)
    out["records-per-request-avg"] = sender.m_per_request.avg(now)
    out["record-queue-time-avg"] = sender.m_queue.avg(now)
    out["record-queue-time-max"] = sender.m_queue.max(now)
    out["produce-throttle-time-avg"] = sender.m_throttle.avg(now)
    out["produce-throttle-time-max"] = sender.m_throttle.max(now)
    conn.snapshot(out, now)
    # list() copies at once (the I/O thread may add a topic meanwhile).
    topics = [(t, list(c)) for t, c in list(sender.topic_counts.items())]
    for topic, (sent, failed, nbytes) in topics:
        out[tagged("record-send-total", topic=topic)] = sent
        out[tagged("record-error-total", topic=topic)] = failed
        out[tagged("byte-total", topic=topic)] = nbytes
    return out
