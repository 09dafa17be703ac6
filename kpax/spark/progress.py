"""Streaming progress of "kpax" sources as Spark's JVM Kafka source reports it.

Role: Spark's progress (``query.lastProgress["sources"]``) shows a "kpax"
source's ``startOffset``, ``endOffset`` and ``latestOffset`` (the source's
``reportLatestOffset``), but its ``description`` is the Java class of Spark's
wrapper (``PythonMicroBatchStreamWith...@1a2b``) and its ``metrics`` are empty:
Spark 4.x's Python data source API has no hook for either (the wrapper
implements neither ``toString`` nor ``ReportsSourceMetrics``).
:func:`source_progress` fills both from what the progress holds: the
description names the topics (``kpax[events,orders]``) and the metrics are the
JVM source's ``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` /
``avgOffsetsBehindLatest`` (latest minus end offset, per partition). The
source logs the same figures on the driver at INFO for every batch.

Imports: the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["is_kpax_source", "source_progress"]

_WRAPPER = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream"


def _offsets(raw: Any) -> dict[tuple[str, int], int] | None:
    """Spark's Kafka offset JSON (a string or a dict) as {(topic, partition): offset}."""
    if raw is None:
        return None
    obj = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(obj, dict):
        return None
    out: dict[tuple[str, int], int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            return None
        for p, off in parts.items():
            if isinstance(off, bool) or not isinstance(off, int):
                return None
            out[(str(topic), int(p))] = off
    return out


def is_kpax_source(source: Mapping[str, Any]) -> bool:
    """A progress source entry of a Python data source whose offsets are Kafka's."""
    desc = str(source.get("description", ""))
    return desc.startswith(_WRAPPER) and _offsets(source.get("endOffset")) is not None


def source_progress(progress: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The progress's ``sources``, each "kpax" source with a description naming its
    topics and the JVM Kafka source's offsets-behind-latest metrics (when the
    progress has a ``latestOffset``); other sources as they are."""
    out: list[dict[str, Any]] = []
    for source in progress.get("sources", []):
        entry = dict(source)
        if is_kpax_source(source):
            end = _offsets(source.get("endOffset")) or {}
            latest = _offsets(source.get("latestOffset"))
            topics = sorted({t for t, _ in end})
            entry["description"] = f"kpax[{','.join(topics)}]"
            metrics = dict(entry.get("metrics") or {})
            if latest:
                behind = [max(0, off - end.get(tp, off)) for tp, off in latest.items()]
                metrics.update(
                    minOffsetsBehindLatest=str(min(behind)),
                    maxOffsetsBehindLatest=str(max(behind)),
                    avgOffsetsBehindLatest=str(float(sum(behind)) / len(behind)),
                )
            entry["metrics"] = metrics
        out.append(entry)
    return out
