"""Shared test setup. The Kafka fixtures (kafka, kafka_cluster3, kafka_factory, topic)
come from the kpax pytest plugin (kpax/testing/pytest_plugin.py), which is opt-in:
this file loads it, as a user's conftest.py does with
``pytest_plugins = ["kpax.testing.pytest_plugin"]``.

Soak tests (marker ``soak``: long fault campaigns, whole suites re-run on a
cluster; minutes each) are left out of ``make test`` and run by ``make
test-soak``. A module can mark some of the tests it imports from another one
as soak by naming them in a module-level ``SOAK`` set."""

from __future__ import annotations

import pytest

PLUGIN = "kpax.testing.pytest_plugin"


def pytest_configure(config: pytest.Config) -> None:
    # Not already loaded by `pytest -p kpax.testing.pytest_plugin`, nor by the
    # ``pytest11`` entry point ("kpax") that kpax 0.1's own metadata declared.
    if not any(config.pluginmanager.has_plugin(name) for name in (PLUGIN, "kpax")):
        config.pluginmanager.import_plugin(PLUGIN)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if item.originalname in getattr(module, "SOAK", ()):  # type: ignore[attr-defined]
            item.add_marker(pytest.mark.soak)
