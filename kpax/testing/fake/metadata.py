"""Handlers: ApiVersions, Metadata, FindCoordinator, DescribeCluster.

Role: what a client asks before anything else. ApiVersions advertises the
versions the fake serves (``FakeCluster.api_ranges``; Produce, TxnOffsetCommit
and EndTxn below their transactions-v2 versions while ``transaction.version`` is
below 2, as Kafka advertises them) and, from v3, the
finalized features ``transaction.version`` (broker config, 2 by default) and
``group.version`` 1 (KIP-848). A version newer than the fake knows gets the v0
answer with UNSUPPORTED_VERSION, as Kafka sends. Metadata lists the live
brokers, the controller (the lowest live node id) and topics by name or (v12+)
by id, with topic ids (v10+), leaders, leader epochs (v7+) and offline
replicas (v5+); an unknown topic is created when the request allows it (v4+) and
``auto.create.topics.enable`` is on (immediately ready, where Kafka answers
LEADER_NOT_AVAILABLE until its leaders are elected). FindCoordinator answers one
key (v0-3) or a batch of keys (v4+) for groups and transactional ids.

Imports: kpax.testing.fake.{codes,context,frames,state}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import uuid
from typing import Any

from kpax.proto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    EndTxnRequest,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import Ctx
from kpax.testing.fake.frames import RequestHeader, encode_response
from kpax.testing.fake.state import Topic, check_topic_name

__all__ = ["HANDLERS", "unsupported_api_versions"]

AVR = ApiVersionsResponse
MR = MetadataResponse
FCR = FindCoordinatorResponse
_NO_OPERATIONS = -(2**31)
#: KIP-848 groups: the finalized level of "group.version".
GROUP_VERSION = 1


def _api_keys(ranges: dict[int, tuple[int, int]]) -> list[Any]:
    return [
        AVR.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(ranges.items())
    ]


def unsupported_api_versions(header: RequestHeader, ranges: dict[int, tuple[int, int]]) -> bytes:
    """The v0 answer to an ApiVersions version the fake does not know."""
    response = AVR(error_code=codes.UNSUPPORTED_VERSION, api_keys=_api_keys(ranges))
    return encode_response(header, response, 0)


#: The last versions before transactions v2, advertised while ``transaction.version``
#: is below 2 (as Kafka does: a client then never speaks v2 to a v1 coordinator).
_BEFORE_TV2 = {
    ProduceRequest.API_KEY: 11,
    TxnOffsetCommitRequest.API_KEY: 4,
    EndTxnRequest.API_KEY: 4,
}


def api_versions(ctx: Ctx, req: ApiVersionsRequest) -> Any:
    state = ctx.cluster.state
    tv = state.conf_int("transaction.version")
    ranges = dict(ctx.cluster.api_ranges)
    if tv < 2:
        for key, hi in _BEFORE_TV2.items():
            lo, top = ranges[key]
            ranges[key] = (lo, min(top, hi))
    return AVR(
        error_code=ctx.forced() or codes.NONE,
        api_keys=_api_keys(ranges),
        supported_features=[
            AVR.SupportedFeatureKey(name="transaction.version", min_version=0, max_version=2),
            AVR.SupportedFeatureKey(name="group.version", min_version=0, max_version=1),
        ],
        finalized_features_epoch=1,
        finalized_features=[
            AVR.FinalizedFeatureKey(
                name="transaction.version", max_version_level=tv, min_version_level=tv
            ),
            AVR.FinalizedFeatureKey(
                name="group.version", max_version_level=GROUP_VERSION, min_version_level=1
            ),
        ],
    )


def _auto_create(ctx: Ctx, name: str) -> Topic:
    state = ctx.cluster.state
    check_topic_name(name)
    rf = min(state.conf_int("default.replication.factor"), max(1, len(state.alive())))
    return state.create_topic(name, -1, rf)


def metadata(ctx: Ctx, req: MetadataRequest) -> Any:
    state = ctx.cluster.state
    v = ctx.version
    allow_create = (req.allow_auto_topic_creation if v >= 4 else True) and state.conf(
        "auto.create.topics.enable"
    ) == "true"
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if req.topics is None or (v == 0 and not req.topics):
        wanted = [(name, None) for name in sorted(state.topics)]
    else:
        wanted = [(t.name, t.topic_id if v >= 10 and t.topic_id.int else None) for t in req.topics]
    topics = []
    for name, tid in wanted:
        topic: Topic | None
        if name is None and tid is not None:
            topic = state.by_id.get(tid)
            if topic is None:
                topics.append(
                    MR.MetadataResponseTopic(
                        error_code=codes.UNKNOWN_TOPIC_ID, name=None, topic_id=tid
                    )
                )
                continue
        else:
            topic = state.topic(name)
        shown = name if name is not None else (topic.name if topic else "")
        forced = ctx.forced(shown)
        if forced is not None:
            topics.append(MR.MetadataResponseTopic(error_code=forced, name=shown))
            continue
        if topic is None:
            error = codes.UNKNOWN_TOPIC_OR_PARTITION
            if allow_create and name is not None:
                try:
                    topic = _auto_create(ctx, name)
                except ApiError as exc:
                    error = exc.code
            if topic is None:
                topics.append(MR.MetadataResponseTopic(error_code=error, name=shown))
                continue
        topics.append(_topic(ctx, topic))
    controller = state.controller()
    return MR(
        brokers=[
            MR.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for n, b in sorted(state.brokers.items())
            if b.alive
        ],
        cluster_id=state.cluster_id,
        controller_id=controller,
        topics=topics,
    )


def _topic(ctx: Ctx, topic: Topic) -> Any:
    state = ctx.cluster.state
    parts = []
    for p in topic.partitions:
        offline = [r for r in p.replicas if not state.is_alive(r)]
        parts.append(
            MR.MetadataResponsePartition(
                error_code=codes.NONE if p.leader >= 0 else codes.LEADER_NOT_AVAILABLE,
                partition_index=p.index,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=[r for r in p.isr if state.is_alive(r)],
                offline_replicas=offline,
            )
        )
    return MR.MetadataResponseTopic(
        error_code=codes.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=parts,
    )


def find_coordinator(ctx: Ctx, req: FindCoordinatorRequest) -> Any:
    state = ctx.cluster.state
    v = ctx.version
    keys = list(req.coordinator_keys) if v >= 4 else [req.key]
    key_type = req.key_type if v >= 1 else 0
    out = []
    for key in keys:
        c = FCR.Coordinator(key=key, node_id=-1, host="", port=-1, error_message=None)
        forced = ctx.forced()
        if forced is not None:
            c.error_code = forced
        elif key_type not in (0, 1):
            c.error_code = codes.INVALID_REQUEST
            c.error_message = f"key type {key_type} is not served by the fake"
        elif not key:
            c.error_code = codes.INVALID_REQUEST
            c.error_message = "an empty coordinator key"
        else:
            node = state.coordinator(key_type, key)
            if node < 0:
                c.error_code = codes.COORDINATOR_NOT_AVAILABLE
            else:
                b = state.brokers[node]
                c.node_id, c.host, c.port = node, b.host, b.port
        out.append(c)
    if v >= 4:
        return FCR(coordinators=out)
    c = out[0]
    return FCR(
        error_code=c.error_code,
        error_message=c.error_message,
        node_id=c.node_id,
        host=c.host,
        port=c.port,
    )


def describe_cluster(ctx: Ctx, req: DescribeClusterRequest) -> Any:
    state = ctx.cluster.state
    if ctx.version >= 1 and req.endpoint_type != 1:
        return DescribeClusterResponse(
            error_code=codes.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="the fake has brokers only, no controller endpoints",
            endpoint_type=req.endpoint_type,
        )
    return DescribeClusterResponse(
        cluster_id=state.cluster_id,
        controller_id=state.controller(),
        endpoint_type=1,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack
            )
            for _, b in sorted(state.brokers.items())
            if b.alive
        ],
    )


HANDLERS = {
    ApiVersionsRequest.API_KEY: (api_versions, 0, 5, False),
    MetadataRequest.API_KEY: (metadata, 0, 13, True),
    FindCoordinatorRequest.API_KEY: (find_coordinator, 0, 6, True),
    DescribeClusterRequest.API_KEY: (describe_cluster, 0, 2, False),
}
