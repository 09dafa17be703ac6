"""What a method name of confluent-kafka, aiokafka or kafka-python is called in kpax.

Role: a shared utility (not a layer). A program ported from a peer calls the
peer's method names (``producer.produce``, ``consumer.getmany``,
``admin.list_consumer_groups``...); kpax's clients have no such attribute, and
a bare ``AttributeError: 'Producer' object has no attribute 'produce'`` says
nothing of what to call instead. :class:`PeerHints` gives the clients a
``__getattr__`` (reached only for a name the class does not have: no cost to
any call that exists) whose AttributeError names the kpax equivalent.

Imports: the standard library.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["ADMIN", "CONSUMER", "PRODUCER", "PeerHints"]

PRODUCER = {
    "produce": "send(topic, value, key=..., partition=..., headers=..., callback=fn)",
    "poll": "nothing: delivery callbacks run on kpax's I/O thread by themselves "
    "(flush() waits for every record)",
    "stop": "close()",
    "send_batch": "send_many(topic, values, keys=...)",
    "create_batch": "send_many(topic, values, keys=...)",
    "send_and_wait": "send(...).result() (kpax.aio: await producer.send_and_wait(...))",
    "partitions_for_topic": "partitions_for(topic)",
}
CONSUMER = {
    "getmany": "poll(timeout=seconds, max_records=n) (a list of records; "
    "kpax.aio.Consumer has aiokafka's getmany too)",
    "getone": "next(consumer) or `for rec in consumer:` (kpax.aio.Consumer has getone)",
    "stop": "close()",
    "consumer_group_metadata": "group_metadata()",
    "get_watermark_offsets": "beginning_offsets([tp]) and end_offsets([tp])",
    "incremental_assign": "assign(partitions) (the whole new assignment)",
    "incremental_unassign": "assign(partitions) (the whole new assignment)",
    "unassign": "assign([])",
    "last_stable_offset": "end_offsets([tp]) with isolation_level='read_committed'",
}
ADMIN = {
    "list_consumer_groups": "list_groups()",
    "describe_consumer_groups": "describe_groups(group_ids)",
    "delete_consumer_groups": "delete_groups(group_ids)",
    "list_consumer_group_offsets": "list_group_offsets(group_id)",
    "alter_consumer_group_offsets": "alter_group_offsets(group_id, offsets)",
    "delete_consumer_group_offsets": "delete_group_offsets(group_id, partitions)",
    "alter_configs": "incremental_alter_configs({resource: {name: value}})",
    "elect_leaders": "nothing yet: kpax's admin has no leader election",
}


class PeerHints:
    """A ``__getattr__`` naming kpax's method for a peer's method name."""

    #: peer method name -> what to call in kpax
    _peer_methods: ClassVar[dict[str, str]] = {}

    def __getattr__(self, name: str) -> Any:
        hint = type(self)._peer_methods.get(name)
        kind = type(self).__name__
        if hint is None:
            raise AttributeError(f"{kind!r} object has no attribute {name!r}")
        raise AttributeError(
            f"{kind!r} object has no attribute {name!r} (a name of another Kafka "
            f"client): in kpax, {hint}; see docs/migrating.md"
        )
