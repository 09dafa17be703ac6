"""A consumer's commits and the group identity they carry: ``commit`` and
``group_metadata``.

Role: the bodies of :meth:`AsyncConsumer.commit
<kpax.consumer.client.AsyncConsumer.commit>` and ``group_metadata``, and the note
the fetch buffer takes (per take, never per record) of the group identity the
records go out under. kpax's consumer rebalances in the background (the Java
consumer only inside ``poll()``), so the group can give a partition to another
member while the application still works on records it polled. Their offsets
must then not reach the broker with the member's newer generation, which passes
Kafka's fencing check (member id and generation, not ownership) and moves the
new owner's committed offset back:

* ``group_metadata()`` (for ``send_offsets_to_transaction``) gives the identity
  in force when the last poll or iteration step handed records out, as Java's
  ``groupMetadata()`` changes only in ``poll()``; the broker refuses it once the
  group moved on (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH);
* ``commit(offsets)`` naming a partition no longer assigned is refused
  (CommitFailedError), nothing committed;
* a commit carries the identity in force when its offsets were chosen
  (:meth:`kpax.consumer.group.GroupBase.commit`), not when its turn comes.

Imports: kpax.consumer.errors, kpax.proto.errors, kpax.structs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kpax.consumer.errors import CommitFailedError
from kpax.proto.errors import IllegalStateError
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kpax.consumer.client import AsyncConsumer


def group_metadata(c: AsyncConsumer) -> ConsumerGroupMetadata:
    """``c.group_metadata()``: the identity the records in hand went out under."""
    group = c.group
    if group is None:
        raise IllegalStateError("group_metadata() needs a consumer with a group_id")
    identity = c._handout_identity
    if identity is None:
        identity = group.commit_identity()  # nothing handed out yet
    generation, member_id = identity  # a member epoch under KIP-848
    return ConsumerGroupMetadata(group.group_id, generation, member_id, group.instance_id)


def note_handout(c: AsyncConsumer) -> None:
    """The buffer handed records out (on the taking thread): note the identity
    they go out under (a member out of its generation keeps the last one, which
    the broker then refuses)."""
    group = c.group
    if group is not None:
        identity = group.commit_identity()
        if identity[0] >= 0:
            c._handout_identity = identity


async def commit(
    c: AsyncConsumer, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
) -> None:
    """``c.commit(offsets)`` (see its docstring)."""
    c._check()
    group = c.group
    if group is None:
        raise IllegalStateError("commit() needs a group_id")
    if offsets is None:
        final = c._member._commit_offsets()
    else:
        final = {
            TopicPartition(*tp): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
            for tp, om in offsets.items()
        }
        for tp, om in final.items():
            if not isinstance(om.offset, int) or isinstance(om.offset, bool) or om.offset < 0:
                # (as the Java consumer: a negative offset would reset the group's
                # position to "no committed offset" on the broker)
                raise ValueError(
                    f"cannot commit offset {om.offset!r} for {tp}: an offset is an int >= 0"
                )
    if c._is_subscribed:
        if not group.in_group():
            raise CommitFailedError(
                f"cannot commit for group {group.group_id!r}: this member is not in the "
                "group now (a rebalance is in progress, or it was evicted for exceeding "
                "max_poll_interval_ms); its partitions may belong to another member"
            )
        lost = sorted(tp for tp in final if tp not in c.states)
        if lost:
            raise CommitFailedError(
                f"cannot commit for group {group.group_id!r}: "
                f"{', '.join(f'{tp.topic}-{tp.partition}' for tp in lost)} no longer "
                "assigned to this member (the group rebalanced after their records were "
                "handed out; another member reads them from the committed offset); "
                "nothing committed: poll again and commit what it returns"
            )
    await group.commit(final)  # with the identity in force now (GroupBase.commit)
