"""kpax.aio — the asyncio face: ``kpax.aio.Producer``, ``Consumer``, ``Admin``.

Imports: kpax.admin (and kpax.producer, kpax.consumer as they land).
"""

from kpax.admin.client import AsyncAdmin as Admin

__all__ = ["Admin"]
