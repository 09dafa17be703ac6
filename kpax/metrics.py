"""Client metrics: the Java client's metric names, counted per batch or request.

Role: the small, cheap instruments behind ``producer.metrics()``,
``consumer.metrics()`` and ``admin.metrics()`` (see docs/observability.md).
A :class:`Sensor` keeps a cumulative count and sum and, like the Java
client's ``SampledStat`` (``metrics.num.samples=2``,
``metrics.sample.window.ms=30000``), two 30-second windows for the windowed
figures: ``-rate`` is the windowed sum divided by the elapsed time (at
least one full window, as Java's ``Rate``, so a burst of 1000 records in one
second reads as about 32/s until the window fills); ``-avg`` and ``-max`` are
over the same windows and NaN when there are none (as Java). Recording only
adds to counters; the windows roll when they are read (see :class:`Sensor`).

Nothing here runs per record: the producer records per completed batch, the
consumer per fetch response and per ``poll``/chunk, the broker connection per
request. Each sensor has one writer (the client's I/O loop, or the consumer's
polling thread) and takes no lock; ``metrics()`` reads from any thread.

Shared utility outside the layers (like kpax.config): the broker layer and the
clients import it.

Imports: kpax.user_callbacks and the standard library.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from kpax.user_callbacks import call_user

__all__ = [
    "NAN",
    "ConnectionMetrics",
    "Metrics",
    "Sensor",
    "metrics_enabled",
    "report_stats",
    "tagged",
]

NAN = math.nan
#: A private switch for measuring what the counters cost (bench/metrics_cost.py):
#: clients built while it is False count nothing and ``metrics()`` reports gauges only.
_ENABLED = True
#: Java's defaults: metrics.sample.window.ms and metrics.num.samples.
WINDOW_S = 30.0
SAMPLES = 2


class Sensor:
    """Cumulative count and sum of recorded values, and their windows.

    :meth:`record` only adds (no clock, no lock: one writer per sensor, the
    client's I/O loop or the consumer's polling thread). The windows roll when
    they are read: a reading more than ``WINDOW_S`` after the current window
    began starts a new one, and the windowed figures cover the window before it
    and the current one (Java: ``metrics.num.samples=2``). Read at least every
    30 s (as an exporter does), they are Java's; read less often, they cover
    the time since the reading before the last one."""

    __slots__ = ("_clock", "_marks", "_prev_peak", "count", "peak", "total")

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        #: All-time number of recordings and sum of recorded values.
        self.count = 0
        self.total = 0.0
        #: The largest value recorded in the current window (and in the one before).
        self.peak = -math.inf
        self._prev_peak = -math.inf
        #: (start, count, total) when each window began, oldest first.
        self._marks: list[tuple[float, int, float]] = [(clock(), 0, 0.0)]

    def record(self, value: float = 1.0) -> None:
        self.count += 1
        self.total += value
        if value > self.peak:  # noqa: PLR1730 - cheaper than max() on this path
            self.peak = value

    def _window(self, now: float | None) -> tuple[float, int, float, float]:
        """(seconds, recordings, sum, max) of the windows ending now, rolling them
        first. ``seconds`` is at least one full window, as Java's ``Rate``."""
        now = self._clock() if now is None else now
        marks = self._marks
        if now - marks[-1][0] >= WINDOW_S:
            self._prev_peak, self.peak = self.peak, -math.inf
            marks = self._marks = [*marks[1 - SAMPLES :], (now, self.count, self.total)]
        start, count0, total0 = marks[0]
        elapsed = now - start
        full = int(elapsed // WINDOW_S)
        if full < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full) * WINDOW_S
        peak = max(self.peak, self._prev_peak) if len(marks) > 1 else self.peak
        return elapsed, self.count - count0, self.total - total0, peak

    def rate(self, now: float | None = None) -> float:
        """Windowed sum per second (Java's ``Rate``)."""
        elapsed, _, total, _ = self._window(now)
        return total / elapsed if elapsed > 0 else 0.0

    def count_rate(self, now: float | None = None) -> float:
        """Windowed recordings per second (Java's ``Rate(new WindowedCount())``)."""
        elapsed, n, _, _ = self._window(now)
        return n / elapsed if elapsed > 0 else 0.0

    def avg(self, now: float | None = None) -> float:
        _, n, total, _ = self._window(now)
        return total / n if n else NAN

    def max(self, now: float | None = None) -> float:
        peak = self._window(now)[3]
        return peak if peak > -math.inf else NAN


class Metrics:
    """One client's sensors."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._sensors: dict[str, Sensor] = {}

    def sensor(self, name: str) -> Sensor:
        s = self._sensors.get(name)
        if s is None:
            s = self._sensors[name] = Sensor(self.clock)
        return s


class ConnectionMetrics:
    """What every broker connection of one client records (Java's common
    client metrics: requests, responses, bytes, latency, connections)."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = m = metrics or Metrics()
        self.requests = m.sensor("request")  # value: bytes sent
        self.latency = m.sensor("request-latency")  # value: ms, per response
        self.responses = m.sensor("response")  # value: bytes received
        self.created = m.sensor("connection-creation")
        self.closed = m.sensor("connection-close")

    def request_sent(self, nbytes: int) -> None:
        self.requests.record(nbytes)

    def response_received(self, latency_s: float, nbytes: int) -> None:
        self.latency.record(latency_s * 1000.0)
        self.responses.record(nbytes)

    def snapshot(self, out: dict[str, float], now: float) -> None:
        """Add the common client metrics to ``out``."""
        req, resp, lat = self.requests, self.responses, self.latency
        out["request-total"] = req.count
        out["request-rate"] = req.count_rate(now)
        out["outgoing-byte-total"] = req.total
        out["outgoing-byte-rate"] = req.rate(now)
        out["response-total"] = resp.count
        out["response-rate"] = resp.count_rate(now)
        out["incoming-byte-total"] = resp.total
        out["incoming-byte-rate"] = resp.rate(now)
        out["request-latency-avg"] = lat.avg(now)
        out["request-latency-max"] = lat.max(now)
        out["connection-creation-total"] = self.created.count
        out["connection-creation-rate"] = self.created.count_rate(now)
        out["connection-close-total"] = self.closed.count
        out["connection-close-rate"] = self.closed.count_rate(now)
        out["connection-count"] = self.created.count - self.closed.count


def tagged(name: str, **tags: object) -> str:
    """A metric name with Java-style tags: ``record-send-total{topic=orders}``."""
    inner = ",".join(f"{k.replace('_', '-')}={v}" for k, v in tags.items())
    return f"{name}{{{inner}}}"


def metrics_enabled() -> bool:
    return _ENABLED


async def report_stats(
    metrics: Callable[[], dict[str, float]],
    callback: Callable[[dict[str, float]], object],
    interval: float,
    client: str,
) -> None:
    """Call ``callback(metrics())`` every ``interval`` seconds until cancelled
    (the ``stats_callback`` / ``statistics_interval_ms`` options, as
    confluent-kafka's ``stats_cb``). A callback that raises is logged
    (``kpax.metrics``) and called again next time."""
    import asyncio  # here: the option tables import this module, and need no asyncio

    log = logging.getLogger("kpax.metrics")
    while True:
        await asyncio.sleep(interval)
        call_user(callback, metrics(), f"{client}: stats_callback", log)
