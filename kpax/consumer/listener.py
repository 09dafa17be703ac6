"""Rebalance listener: what the application hears when partitions move.

Role: :class:`ConsumerRebalanceListener` (the Java names, snake_case).
Subclass it, or pass any object with these methods, to ``subscribe``. On the
sync face the calls run on the application's thread inside ``poll()`` (so a
listener may call ``commit()``); on the asyncio face they run on the loop and
may be coroutines.

Imports: kpax.structs.
"""

from __future__ import annotations

from typing import Any

from kpax.structs import TopicPartition

__all__ = ["ConsumerRebalanceListener"]


class ConsumerRebalanceListener:
    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        """Partitions taken away in an orderly rebalance (commit their offsets here)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        """Partitions newly given to this member."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        """Partitions lost without a chance to commit (the member was fenced or
        its generation expired); by default the same as revoked."""
        return self.on_partitions_revoked(lost)
