"""kpax's ``metrics()`` through an OpenTelemetry MeterProvider (``export_metrics``):
one observable instrument per metric name, named as OpenTelemetry's Java
Kafka-client bridge names them.

Role: a part of :mod:`kpax.otel` (whose docstring is the guide).

Imports: opentelemetry-api; kpax._version, kpax.otel.{_common,clients,wrappers},
kpax.producer, kpax.consumer, kpax.admin, kpax.parallel (the client types).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterable
from functools import partial
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from kpax._version import __version__
from kpax.admin.client import AsyncAdmin
from kpax.admin.sync import Admin
from kpax.consumer.client import AsyncConsumer
from kpax.consumer.sync import Consumer
from kpax.otel._common import _SCOPE
from kpax.otel.clients import _core
from kpax.otel.wrappers import _Wrapper
from kpax.parallel.client import AsyncParallelConsumer
from kpax.parallel.sync import ParallelConsumer
from kpax.producer.client import AsyncProducer
from kpax.producer.sync import Producer

# ---------------------------------------------------------------- metrics

#: Metric names a client reports only with tags (per topic or partition), so
#: not in the snapshot of a client that has not sent or fetched yet.
_TAGGED_ONLY = {"producer": ("byte-total",), "consumer": ("records-lag",), "admin": ()}


def _kind(client: Any) -> str:
    if isinstance(client, (Producer, AsyncProducer)):
        return "producer"
    if isinstance(client, (Consumer, AsyncConsumer, ParallelConsumer, AsyncParallelConsumer)):
        return "consumer"
    if isinstance(client, (Admin, AsyncAdmin)):
        return "admin"
    raise TypeError(
        "kpax.otel.export_metrics takes a kpax producer, consumer or admin client, "
        f"not {type(client).__name__}"
    )


def _parse(key: str) -> tuple[str, dict[str, str]]:
    """``records-lag{topic=t,partition=3}`` -> ``records-lag``, ``{topic: t, partition: 3}``."""
    name, brace, rest = key.partition("{")
    if not brace:
        return key, {}
    tags = dict(item.split("=", 1) for item in rest.rstrip("}").split(",") if "=" in item)
    return name, tags


def instrument_name(kind: str, name: str) -> str:
    """The OpenTelemetry instrument of a kpax metric: ``kafka.producer.record_send_total``."""
    return f"kafka.{kind}.{name.replace('-', '_')}"


class MetricsExport:
    """One client's metrics in a MeterProvider (from :func:`export_metrics`).

    The client is weakly held: its metrics go when it is garbage-collected, or
    at :meth:`close`."""

    def __init__(self, client: Any, kind: str, bridge: _MetricsBridge) -> None:
        self.kind = kind
        self._client = weakref.ref(client)
        self._bridge = bridge
        self._attrs = {"client-id": str(_core(client).config.get("client_id") or "")}
        self._lock = threading.Lock()
        #: The snapshot being reported: base name -> [(attributes, value)], and
        #: the instruments that have reported from it (a second report from one
        #: of them is the next collection: a new snapshot).
        self._snapshot: dict[str, list[tuple[dict[str, str], float]]] | None = None
        self._read: set[str] = set()
        self.closed = False

    def names(self) -> list[str]:
        client = self._client()
        if client is None:
            return []
        found = {_parse(key)[0] for key in client.metrics()}
        return sorted(found.union(_TAGGED_ONLY[self.kind]))

    def _take(self) -> dict[str, list[tuple[dict[str, str], float]]] | None:
        client = self._client()
        if client is None:
            self.close()
            return None
        grouped: dict[str, list[tuple[dict[str, str], float]]] = {}
        for key, value in client.metrics().items():
            if value is None or math.isnan(value):
                continue  # no recording in the window (Java's NaN): nothing to report
            name, tags = _parse(key)
            grouped.setdefault(name, []).append(({**self._attrs, **tags}, float(value)))
        for name, rows in grouped.items():
            # A name reported per topic too: only the finest rows (as Java's bridge),
            # so that summing over the attributes does not count twice.
            if len(rows) > 1:
                finest = max(len(attrs) for attrs, _ in rows)
                grouped[name] = [row for row in rows if len(row[0]) == finest]
        return grouped

    def observe(self, name: str) -> list[Observation]:
        if self.closed:
            return []
        with self._lock:
            if self._snapshot is None or name in self._read:
                self._snapshot = self._take()
                self._read = set()
                if self._snapshot is None:
                    return []
            self._read.add(name)
            rows = self._snapshot.get(name, ())
        return [Observation(value, attrs) for attrs, value in rows]

    def close(self) -> None:
        """Stop reporting this client's metrics."""
        self.closed = True
        self._bridge.remove(self)


class _MetricsBridge:
    """The instruments of one MeterProvider, shared by the clients exported to
    it (a meter registers an instrument name once)."""

    def __init__(self, provider: MeterProvider | None) -> None:
        self.meter = metrics.get_meter(_SCOPE, __version__, meter_provider=provider)
        self._exports: list[MetricsExport] = []
        self._instruments: set[str] = set()
        self._lock = threading.Lock()

    def add(self, export: MetricsExport) -> None:
        names = export.names()
        with self._lock:
            self._exports.append(export)
            for name in names:
                full = instrument_name(export.kind, name)
                if full in self._instruments:
                    continue
                self._instruments.add(full)
                callback = partial(self._observe, export.kind, name)
                if name.endswith("-total"):
                    self.meter.create_observable_counter(full, [callback])
                else:
                    self.meter.create_observable_gauge(full, [callback])

    def remove(self, export: MetricsExport) -> None:
        with self._lock:
            if export in self._exports:
                self._exports.remove(export)

    def _observe(self, kind: str, name: str, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            exports = [e for e in self._exports if e.kind == kind]
        out: list[Observation] = []
        for export in exports:
            out += export.observe(name)
        return out


#: One bridge per MeterProvider (the global one when none is given).
_BRIDGES: weakref.WeakKeyDictionary[Any, _MetricsBridge] = weakref.WeakKeyDictionary()
_BRIDGES_LOCK = threading.Lock()


def export_metrics(client: Any, meter_provider: MeterProvider | None = None) -> MetricsExport:
    """Report ``client.metrics()`` (a producer, consumer or admin client, sync
    or asyncio, or a traced wrapper of one) through ``meter_provider`` (default:
    the global one) until the export is closed or the client is gone."""
    if isinstance(client, _Wrapper):
        client = client.client
    kind = _kind(client)
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _BRIDGES_LOCK:
        bridge = _BRIDGES.get(provider)
        if bridge is None:
            bridge = _BRIDGES[provider] = _MetricsBridge(provider)
    export = MetricsExport(client, kind, bridge)
    bridge.add(export)
    return export
