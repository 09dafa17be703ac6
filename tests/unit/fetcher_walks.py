"""The fetcher's two ways of framing a response, as a fixture for the fetcher's
unit tests (test_consumer_units.py, test_consumer_bad_records.py): import
``walk_all`` into a test module and every test there runs twice."""

from __future__ import annotations

import pytest

from kpax.consumer.fetcher import Fetcher


@pytest.fixture(autouse=True, params=["each partition walked", "a response walked at once"])
def walk_all(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each partition's batches framed and checked as it is decoded (the asyncio
    face), or a whole response's at once (walk_many: the sync face)."""
    walk = request.param == "a response walked at once"
    monkeypatch.setattr(Fetcher, "walk_all", walk)
    return walk
