"""The in-process Kafka on the virtual-time loop: FakeCluster behind in-memory connections.

Role: :class:`SimKafka` serves a :class:`~kpax.testing.fake.cluster.FakeCluster`
to clients running on a :class:`~kpax.testing.sim.loop.VirtualTimeLoop`: each
fake broker listens at ``127.0.0.1:<9000 + node id>`` on the loop's in-memory
network, the bytes clients write go to the core's
:class:`~kpax.testing.fake.connection.FakeConnection` at the loop's time, the
answers come back by loop callbacks, and a timer calls ``cluster.tick`` at the
core's next deadline (long-poll fetches, session timeouts, injected delays).
Everything runs on the loop's one thread in virtual time: a simulation is a
function of its seeds.

Faults reach both layers: the core's (``cluster.inject``, ``move_leader``,
``set_offline``, ``move_coordinator``, ``stop_broker``...: see
:mod:`kpax.testing.fake`) and the network's (:meth:`SimKafka.cut` resets every
connection of a broker at the transport, as a dead process or a cable does;
:meth:`SimKafka.set_delay` slows a broker's links). After any change made from
outside a client request, :meth:`SimKafka.call` lets the core send what became
due.

Imports: kpax.testing.fake.{cluster,serving}, kpax.testing.sim.loop and the standard library.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kpax.testing.fake.cluster import FakeCluster
from kpax.testing.fake.serving import BrokerSide, Serving
from kpax.testing.sim.loop import VirtualTimeLoop

__all__ = ["SimKafka"]

T = TypeVar("T")


_BASE_PORT = 9000


class SimKafka(Serving):
    """See the module docstring. ``brokers``: a count (node ids 1..n) or node ids;
    ``topics``: name -> partitions to create at once; ``config``: broker configs;
    ``seed``: the core's random seed."""

    def __init__(
        self,
        loop: VirtualTimeLoop,
        brokers: int | Iterable[int] = 3,
        *,
        topics: Mapping[str, int] | None = None,
        config: Mapping[str, Any] | None = None,
        seed: int = 0,
        epoch: float | None = None,
    ) -> None:
        self.loop = loop
        #: The fake's clock at virtual time 0 (ms): ``epoch`` (seconds), else the
        #: wall clock now. Clients stamp records with ``time.time()``, which a
        #: broker checks against its own clock: ``simulate`` makes both virtual.
        self.epoch_ms = int((time.time() if epoch is None else epoch) * 1000)
        cluster = FakeCluster(
            brokers,
            seed=seed,
            config={
                k: str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in (config or {}).items()
            },
            now_ms=self.now_ms(),
        )
        super().__init__(cluster)
        for node_id, info in self.cluster.state.brokers.items():
            info.host, info.port = "127.0.0.1", _BASE_PORT + node_id
            self._listen(node_id)
        for name, partitions in (topics or {}).items():
            self.cluster.create_topic(name, partitions)

    # ------------------------------------------------------------ addresses and time

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for _, b in sorted(self.cluster.state.brokers.items()))

    def now_ms(self) -> int:
        return self.epoch_ms + int(self.loop.time() * 1000)

    def _listen(self, node_id: int) -> None:
        self.loop.listen("127.0.0.1", _BASE_PORT + node_id, lambda: BrokerSide(self, node_id))

    def event_loop(self) -> asyncio.AbstractEventLoop:
        return self.loop

    def call(self, fn: Callable[[FakeCluster], T]) -> T:
        """``fn(cluster)`` now (a fault, a look at the state), then what is due goes."""
        out = fn(self.cluster)
        self.flush()
        return out

    # ------------------------------------------------------------ network faults

    def cut(self, node_id: int) -> int:
        """Reset every connection of broker ``node_id`` at the transport (bytes in
        transit lost both ways); returns how many were open."""
        return self.loop.network.cut("127.0.0.1", _BASE_PORT + node_id)

    def set_delay(self, node_id: int, delay: float | Callable[[], float]) -> None:
        """Bytes to and from broker ``node_id`` take ``delay`` seconds (or a
        function's answer, per write)."""
        self.loop.network.set_delay("127.0.0.1", _BASE_PORT + node_id, delay)

    def stop_broker(self, node_id: int) -> None:
        """The broker dies: its connections reset, new ones refused, its
        partitions and coordinators move to live brokers."""
        self.cut(node_id)
        self.call(lambda c: c.stop_broker(node_id))

    def start_broker(self, node_id: int) -> None:
        self.call(lambda c: c.start_broker(node_id))
