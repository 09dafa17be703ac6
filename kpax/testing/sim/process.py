"""Which simulated process the running code belongs to.

Role: :data:`PROCESS`, a context variable naming the process (a name given to
:meth:`kpax.testing.sim.loop.VirtualTimeLoop.spawn`) whose task, callback or
timer is running; None for the scenario itself. Tasks and callbacks inherit it
from the code that made them, so everything a client started inside a process
belongs to that process (the loop drops its callbacks once it is killed, the
network resets its connections).

Imports: the standard library only.
"""

from __future__ import annotations

import contextvars

__all__ = ["PROCESS"]

PROCESS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kpax_sim_process", default=None
)
