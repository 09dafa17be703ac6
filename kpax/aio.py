"""kpax.aio — the asyncio face: ``kpax.aio.Producer``, ``Consumer``, ``Admin``.

Imports: kpax.producer, kpax.consumer, kpax.admin (as they land).
"""

__all__: list[str] = []
