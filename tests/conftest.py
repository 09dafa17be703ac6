"""Shared test setup. The Kafka fixtures (kafka, kafka_cluster3, kafka_factory, topic)
come from the kpax pytest plugin (kpax/testing/pytest_plugin.py), loaded through the
``pytest11`` entry point of the installed package; this file loads it directly when
the package is used from a source tree without that entry point."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("kpax"):
        config.pluginmanager.import_plugin("kpax.testing.pytest_plugin")
