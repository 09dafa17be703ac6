"""Shared test setup. The Kafka fixtures (kafka, kafka_cluster3, kafka_factory, topic)
come from the kpax pytest plugin (kpax/testing/pytest_plugin.py), which is opt-in:
this file loads it, as a user's conftest.py does with
``pytest_plugins = ["kpax.testing.pytest_plugin"]``."""

from __future__ import annotations

import pytest

PLUGIN = "kpax.testing.pytest_plugin"


def pytest_configure(config: pytest.Config) -> None:
    # Not already loaded by `pytest -p kpax.testing.pytest_plugin`, nor by the
    # ``pytest11`` entry point ("kpax") that kpax 0.1's own metadata declared.
    if not any(config.pluginmanager.has_plugin(name) for name in (PLUGIN, "kpax")):
        config.pluginmanager.import_plugin(PLUGIN)
