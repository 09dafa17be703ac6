"""kpax.parallel: process records concurrently beyond the partition count, in key order.

Role: ``kpax.ParallelConsumer`` (:mod:`~kpax.parallel.sync`) and
``kpax.aio.ParallelConsumer`` (:mod:`~kpax.parallel.client`), built on the
consumer's public API. The core is sans-I/O and deterministic
(:mod:`~kpax.parallel.codec`, :mod:`~kpax.parallel.offsets`,
:mod:`~kpax.parallel.schedule`, :mod:`~kpax.parallel.engine`: no asyncio, no
threads, time as an input); :mod:`~kpax.parallel.driver` runs it on asyncio.
See docs/parallel-consumer.md.

Imports: kpax.parallel.client, kpax.parallel.sync.
"""

from kpax.parallel.client import AsyncParallelConsumer
from kpax.parallel.sync import ParallelConsumer

__all__ = ["AsyncParallelConsumer", "ParallelConsumer"]
