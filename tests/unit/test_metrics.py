"""kpax.metrics: sampled windows as the Java client's (2 samples of 30 s), with a fake clock."""

from __future__ import annotations

import math

from kpax.metrics import ConnectionMetrics, Metrics, tagged


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_empty_sensor_is_nan_like_java():
    m = Metrics(Clock())
    s = m.sensor("x")
    assert math.isnan(s.avg()) and math.isnan(s.max())
    assert s.rate() == 0.0 and s.count == 0 and s.total == 0


def test_rate_is_over_at_least_one_window():
    clock = Clock()
    s = Metrics(clock).sensor("record-send")
    s.record(600)
    s.record(300)
    clock.now += 1.0
    # 900 records in 1 s, measured over one full 30 s window (Java's Rate).
    assert s.rate() == 900 / 31.0
    assert s.count_rate() == 2 / 31.0
    assert s.total == 900 and s.count == 2
    assert s.avg() == 450 and s.max() == 600


def test_windows_roll_when_read():
    clock = Clock()
    s = Metrics(clock).sensor("latency")
    s.record(100)
    clock.now += 31
    assert s.max() == 100 and s.avg() == 100  # this reading starts a second window
    s.record(10)
    assert s.max() == 100 and s.avg() == 55  # both windows
    clock.now += 31
    s.record(20)
    # read now: a third window starts, the first leaves
    assert s.max() == 20 and s.avg() == 15
    assert s.rate() == 30 / 31 and s.count_rate() == 2 / 31
    clock.now += 31  # the 20 was recorded before the last roll: its window leaves now
    assert math.isnan(s.avg()) and math.isnan(s.max()) and s.rate() == 0.0
    assert s.total == 130 and s.count == 3  # cumulative totals stay


def test_rarely_read_windows_cover_the_time_since_the_reading_before():
    clock = Clock()
    s = Metrics(clock).sensor("record-send")
    s.record(600)
    clock.now += 300
    assert s.rate() == 600 / 300  # no reading for 300 s: one window of 300 s


def test_connection_metrics_snapshot():
    clock = Clock()
    conn = ConnectionMetrics(Metrics(clock))
    conn.created.record()
    conn.created.record()
    conn.closed.record()
    conn.request_sent(100)
    conn.response_received(0.005, 40)
    out: dict[str, float] = {}
    conn.snapshot(out, clock())
    assert out["connection-count"] == 1
    assert out["request-total"] == 1 and out["outgoing-byte-total"] == 100
    assert out["response-total"] == 1 and out["incoming-byte-total"] == 40
    assert out["request-latency-avg"] == 5.0


def test_tagged_names():
    assert tagged("records-lag", topic="t", partition=0) == "records-lag{topic=t,partition=0}"
