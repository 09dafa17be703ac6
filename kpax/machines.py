"""What kpax's state machines raise for an event their table refuses.

Role: a shared utility (not a layer) for the engines' sans-I/O state machines
(a producer batch, transactions, a partition's fetch position, the classic and
KIP-848 group members, the share group member). Each holds its allowed
transitions in one ``TRANSITIONS`` table (``{state: {event: next state}}``)
and looks an event up in its state's row itself (a dict lookup, kept inline
where it runs per batch or per partition); an event missing from the row is
refused with :func:`refusal`, the one place that says how: the machine's fatal
error again if it has failed for good, else an :class:`IllegalStateError`
naming the event, the machine and its state.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import enum

from kpax.proto.errors import IllegalStateError

__all__ = ["refusal"]


def refusal(
    event: enum.Enum,
    state: enum.Enum,
    subject: str,
    *,
    fatal: BaseException | None = None,
    holder: str = "it",
    note: str = "",
) -> BaseException:
    """What a state machine raises for ``event``, which its table does not allow
    in ``state``: ``fatal``, the error the machine failed with for good (raised
    again to every later call), if given; else an :class:`IllegalStateError`
    "cannot <event> <subject>: <holder> is <state><note>" (``subject``: the
    machine, e.g. ``"for the member of group 'g'"``). An event or state is named
    by its value where that is words (``"take a heartbeat's answer"``), else by
    its name (an event as a verb: ``seal failed`` for ``SEAL_FAILED``; a state
    as it is: ``DONE``)."""
    if fatal is not None:
        return fatal
    action = event.value if isinstance(event.value, str) else event.name.lower().replace("_", " ")
    shown = state.value if isinstance(state.value, str) else state.name
    return IllegalStateError(f"cannot {action} {subject}: {holder} is {shown}{note}")
