"""The exceptions kpax.testing raises when it cannot provide a Kafka, or what a test asks of it.

Imports: nothing from kpax.
"""

from __future__ import annotations

__all__ = ["KafkaStartError", "NotAvailableHere", "PortTakenError"]


class KafkaStartError(RuntimeError):
    """A test Kafka could not be provided; the message says why and what to do."""


class NotAvailableHere(KafkaStartError):
    """The cluster at hand cannot do what a test asks: stop, kill or pause a
    broker of a cluster someone else runs (``KPAX_TEST_BOOTSTRAP``), use a
    listener it was not described with. The pytest plugin reports such a test
    as skipped, with this message; everywhere else it is a KafkaStartError."""


class PortTakenError(KafkaStartError):
    """A broker could not bind a port picked for it: another process took the
    port between the pick and the bind (a free port is only free until someone
    binds it). ``LocalCluster.start`` tries again with new ports."""
