"""The sync and asyncio faces offer the same public methods.

A method one face has and the other lacks is a trapdoor (an internal the other
face reaches through) or a feature missing from one face. The differences
allowed are listed here, each with why.
"""

from __future__ import annotations

import pytest

import kpax

#: name -> why only the asyncio face has it
ASYNC_ONLY = {
    "start": "the asyncio clients start with `await c.start()` or `async with`; "
    "a sync client starts in its constructor",
    "send_and_wait": "aiokafka's spelling of `await send(...)`; sync: `send(...).result()`",
    "wait_topic": "asyncio: wait until a topic's metadata is known before the first send",
    "getmany": "aiokafka's `getmany(timeout_ms=)` (records by partition)",
    "getone": "aiokafka's `getone()`",
    "member_id": "the share member's id, for logs",
    "cluster": "the parallel consumer's cluster, for its instrumentation",
    "config": "the parallel consumer's options, for its instrumentation",
}
#: name -> why only the sync face has it
SYNC_ONLY = {
    "aio": "the asyncio client under the sync face, for what only asyncio has",
}

PAIRS = [
    (kpax.Producer, kpax.aio.Producer),
    (kpax.Consumer, kpax.aio.Consumer),
    (kpax.Admin, kpax.aio.Admin),
    (kpax.ShareConsumer, kpax.aio.ShareConsumer),
    (kpax.ParallelConsumer, kpax.aio.ParallelConsumer),
]


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


@pytest.mark.parametrize("sync, aio", PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_both_faces_offer_the_same_public_methods(sync: type, aio: type) -> None:
    only_aio = _public(aio) - _public(sync) - set(ASYNC_ONLY)
    only_sync = _public(sync) - _public(aio) - set(SYNC_ONLY)
    assert not only_aio, f"only kpax.aio.{aio.__name__} has {sorted(only_aio)}"
    assert not only_sync, f"only kpax.{sync.__name__} has {sorted(only_sync)}"
