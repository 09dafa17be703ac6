"""Deterministic simulations of kpax's asyncio clients against the in-process Kafka.

Role: the pieces a seeded simulation is made of: :func:`simulate` (one run:
seeds, virtual clocks; :mod:`kpax.testing.sim.run`), :class:`SimKafka` (the
in-process Kafka on the virtual loop; :mod:`kpax.testing.sim.kafka`),
:class:`Chaos` (seeded faults; :mod:`kpax.testing.sim.chaos`),
:class:`VirtualTimeLoop` (virtual time, processes; :mod:`kpax.testing.sim.loop`)
and the in-memory network (:mod:`kpax.testing.sim.transport`).

Imports: kpax.testing.sim.*.
"""

from __future__ import annotations

from kpax.testing.sim.chaos import Chaos
from kpax.testing.sim.kafka import SimKafka
from kpax.testing.sim.loop import SimulationDeadlock, SimulationLivelock, VirtualTimeLoop
from kpax.testing.sim.run import simulate
from kpax.testing.sim.transport import MemoryNetwork, MemoryTransport

__all__ = [
    "Chaos",
    "MemoryNetwork",
    "MemoryTransport",
    "SimKafka",
    "SimulationDeadlock",
    "SimulationLivelock",
    "VirtualTimeLoop",
    "simulate",
]
