"""The one exception kpax.testing raises when it cannot provide a Kafka.

Imports: nothing from kpax.
"""

from __future__ import annotations

__all__ = ["KafkaStartError"]


class KafkaStartError(RuntimeError):
    """A test Kafka could not be provided; the message says why and what to do."""
