"""Admin operations on offsets and records (``OffsetAdmin``): list_offsets, delete_records.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for leader-routed
calls: one request per partition leader through ``_per_leader`` (the request
path's fan-out), a partition whose leader moved routed again; per-partition
results.

Imports: kpax.admin.base, kpax.broker, kpax.proto, kpax.structs, the standard library.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from kpax.admin.base import AdminBase, Outcome, broker_error
from kpax.broker.broker import Broker
from kpax.proto.messages import DeleteRecordsRequest, ListOffsetsRequest
from kpax.structs import BatchResult, OffsetAndTimestamp, TopicPartition

#: Special timestamps of ListOffsets.
OFFSET_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3, "earliest_local": -4}


class OffsetAdmin(AdminBase):
    """Leader-routed calls: list_offsets, delete_records."""

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, str | int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, OffsetAndTimestamp]:
        """Offsets by ``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a
        timestamp in ms (the first offset at or after it; -1 when none)."""
        wanted: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str):
                if spec not in OFFSET_SPECS:
                    raise ValueError(
                        f"offset spec {spec!r} for {tp}: use 'earliest', 'latest', "
                        "'max_timestamp' or a timestamp in ms"
                    )
                wanted[TopicPartition(*tp)] = OFFSET_SPECS[spec]
            else:
                if isinstance(spec, bool) or not isinstance(spec, int) or not 0 <= spec < 2**63:
                    raise ValueError(
                        f"offset spec {spec!r} for {tp}: a timestamp is an int of ms "
                        "since the epoch, from 0 to 2**63-1"
                    )
                wanted[TopicPartition(*tp)] = spec
        level = 1 if isolation_level == "read_committed" else 0

        return await self._per_leader(
            "list offsets",
            wanted,
            lambda broker, tps: self._list_offsets_on(broker, tps, wanted, level),
            timeout,
        )

    async def _list_offsets_on(
        self,
        broker: Broker,
        tps: list[TopicPartition],
        wanted: Mapping[TopicPartition, int],
        level: int,
    ) -> Outcome[TopicPartition]:
        by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp in tps:
            by_topic[tp.topic].append(tp)
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=level,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=tp.partition, timestamp=wanted[tp]
                        )
                        for tp in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
            timeout_ms=int(self.cluster.options.request_timeout_ms),
        )
        resp = await broker.request(req)
        out: Outcome[TopicPartition] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    # (a moved leader is forgotten by the request path before the retry)
                    out[tp] = broker_error(
                        p.error_code, f"list offsets of {tp} on {broker.describe()}"
                    )
                else:
                    out[tp] = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch)
        return out

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> BatchResult[TopicPartition, int]:
        """Delete records below ``before[tp]`` (-1: up to the high watermark);
        each result is the partition's new low watermark."""
        offsets = {TopicPartition(*tp): o for tp, o in before.items()}
        api_timeout = int((self._timeout if timeout is None else timeout) * 1000)

        async def on(broker: Broker, tps: list[TopicPartition]) -> Outcome[TopicPartition]:
            by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
            for tp in tps:
                by_topic[tp.topic].append(tp)
            req = DeleteRecordsRequest(
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(
                        name=topic,
                        partitions=[
                            DeleteRecordsRequest.DeleteRecordsPartition(
                                partition_index=tp.partition, offset=offsets[tp]
                            )
                            for tp in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
                timeout_ms=api_timeout,
            )
            resp = await broker.request(req)
            out: Outcome[TopicPartition] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        out[tp] = broker_error(p.error_code, f"delete records of {tp}")
                    else:
                        out[tp] = p.low_watermark
            return out

        return await self._per_leader("delete records", offsets, on, timeout)
