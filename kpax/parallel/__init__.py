"""kpax.parallel: process records concurrently beyond the partition count.

Role: the parallel consumer. Its core is sans-I/O and deterministic
(:mod:`~kpax.parallel.codec`, :mod:`~kpax.parallel.offsets`,
:mod:`~kpax.parallel.schedule`, :mod:`~kpax.parallel.engine`: no asyncio, no
threads, time as an input); see docs/parallel-consumer.md.

Imports: nothing at package level.
"""
