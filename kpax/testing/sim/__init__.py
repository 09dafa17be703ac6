"""Deterministic simulations of kpax's asyncio clients against the in-process Kafka.

Role: the pieces a seeded simulation is made of: :class:`VirtualTimeLoop`
(virtual time, in-memory connections; :mod:`kpax.testing.sim.loop`) and the
in-memory network (:mod:`kpax.testing.sim.transport`).

Imports: kpax.testing.sim.*.
"""

from __future__ import annotations

from kpax.testing.sim.loop import SimulationDeadlock, VirtualTimeLoop
from kpax.testing.sim.transport import MemoryNetwork, MemoryTransport

__all__ = ["MemoryNetwork", "MemoryTransport", "SimulationDeadlock", "VirtualTimeLoop"]
