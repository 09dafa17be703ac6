"""Handlers: CreateTopics (v2-v7), DeleteTopics (v1-v6), CreatePartitions (v0-v3),
DescribeConfigs (v1-v4), AlterConfigs (v0-v2), IncrementalAlterConfigs (v0-v1).

Role: topic administration on any broker (Kafka forwards these to its controller;
the fake applies them at once, so a topic is usable as soon as CreateTopics
answers). Configs of topics (the names in
:data:`~kpax.testing.fake.state.TOPIC_DEFAULTS`: an unknown name is
INVALID_CONFIG) and brokers (the cluster-wide broker config, any resource name
of a broker: the fake keeps one for all) and groups (``share.*`` and
``consumer.*`` group configs, e.g. ``share.auto.offset.reset``); DescribeConfigs
tells a topic override (source 1) or group config (8) from a default (source 5)
and a broker config given at start (4) or altered (2) from a default.

Imports: kpax.testing.fake.{codes,context,state}, kpax.proto.messages and the
standard library.
"""

from __future__ import annotations

import uuid
from typing import Any

from kpax.proto.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kpax.testing.fake import codes
from kpax.testing.fake.codes import ApiError
from kpax.testing.fake.context import Ctx
from kpax.testing.fake.state import BROKER_DEFAULTS, GROUP_DEFAULTS, TOPIC_DEFAULTS

__all__ = ["HANDLERS"]

CTR = CreateTopicsResponse
DCR = DescribeConfigsResponse
TOPIC, BROKER, GROUP = 2, 4, 32
SOURCE_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 2, 4, 5
SOURCE_GROUP = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7


def _config_type(name: str, value: str) -> int:
    if value in ("true", "false"):
        return _BOOLEAN
    if name in ("cleanup.policy",):
        return _LIST
    if name.endswith((".ms", ".bytes", ".messages")):
        return _LONG
    if name.endswith("ratio"):
        return _DOUBLE
    return _INT if value.lstrip("-").isdigit() else _STRING


def create_topics(ctx: Ctx, req: CreateTopicsRequest) -> Any:
    state = ctx.cluster.state
    out = []
    for t in req.topics:
        r = CTR.CreatableTopicResult(name=t.name, error_message=None, configs=None)
        forced = ctx.forced(t.name)
        try:
            if forced is not None:
                raise ApiError(forced)
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            topic = state.create_topic(
                t.name,
                t.num_partitions,
                t.replication_factor,
                configs,
                assignments or None,
                validate_only=req.validate_only,
            )
            r.topic_id = topic.topic_id
            r.num_partitions = len(topic.partitions) if topic.partitions else t.num_partitions
            r.replication_factor = (
                len(topic.partitions[0].replicas) if topic.partitions else t.replication_factor
            )
            r.configs = [
                CTR.CreatableTopicConfigs(
                    name=name,
                    value=topic.config(name),
                    config_source=SOURCE_TOPIC if name in topic.configs else SOURCE_DEFAULT,
                )
                for name in sorted(TOPIC_DEFAULTS)
            ]
        except ApiError as exc:
            r.error_code, r.error_message = exc.code, exc.message
        out.append(r)
    return CTR(topics=out)


def delete_topics(ctx: Ctx, req: DeleteTopicsRequest) -> Any:
    cluster = ctx.cluster
    state = cluster.state
    v = ctx.version
    wanted: list[tuple[str | None, uuid.UUID]] = (
        [(t.name, t.topic_id) for t in req.topics]
        if v >= 6
        else [(n, uuid.UUID(int=0)) for n in req.topic_names]
    )
    out = []
    for name, tid in wanted:
        r = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=tid)
        topic = state.by_id.get(tid) if name is None else state.topic(name)
        forced = ctx.forced(name or (topic.name if topic else None))
        if forced is not None:
            r.error_code = forced
        elif state.conf("delete.topic.enable") != "true":
            r.error_code = codes.TOPIC_DELETION_DISABLED
        elif topic is None:
            r.error_code = (
                codes.UNKNOWN_TOPIC_ID if name is None else codes.UNKNOWN_TOPIC_OR_PARTITION
            )
        else:
            state.delete_topic(topic.name)
            cluster.offsets.delete_topic(topic.name)
            r.name, r.topic_id = topic.name, topic.topic_id
        out.append(r)
    return DeleteTopicsResponse(responses=out)


def create_partitions(ctx: Ctx, req: CreatePartitionsRequest) -> Any:
    state = ctx.cluster.state
    out = []
    for t in req.topics:
        r = CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name)
        try:
            forced = ctx.forced(t.name)
            if forced is not None:
                raise ApiError(forced)
            assignments = (
                [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            )
            state.add_partitions(
                t.name, t.count, assignments or None, validate_only=req.validate_only
            )
        except ApiError as exc:
            r.error_code, r.error_message = exc.code, exc.message
        out.append(r)
    return CreatePartitionsResponse(results=out)


def describe_configs(ctx: Ctx, req: DescribeConfigsRequest) -> Any:
    state = ctx.cluster.state
    out = []
    for res in req.resources:
        r = DCR.DescribeConfigsResult(
            resource_type=res.resource_type, resource_name=res.resource_name, error_message=None
        )
        values: dict[str, tuple[str, int]] = {}
        if res.resource_type == TOPIC:
            topic = state.topic(res.resource_name)
            if topic is None:
                r.error_code = codes.UNKNOWN_TOPIC_OR_PARTITION
                r.error_message = f"no topic {res.resource_name!r}"
            else:
                for name, default in TOPIC_DEFAULTS.items():
                    override = topic.configs.get(name)
                    values[name] = (
                        (override, SOURCE_TOPIC)
                        if override is not None
                        else (default, SOURCE_DEFAULT)
                    )
        elif res.resource_type == BROKER:
            static = ctx.cluster.static_config
            for name, default in BROKER_DEFAULTS.items():
                value = state.config.get(name)
                if value is None:
                    values[name] = (default, SOURCE_DEFAULT)
                elif static.get(name) == value:
                    values[name] = (value, SOURCE_STATIC_BROKER)
                else:
                    values[name] = (value, SOURCE_DYNAMIC_BROKER)
        elif res.resource_type == GROUP:
            overrides = ctx.cluster.group_configs.get(res.resource_name, {})
            for name in GROUP_DEFAULTS:
                value = ctx.cluster.group_config(res.resource_name, name)
                values[name] = (value, SOURCE_GROUP if name in overrides else SOURCE_DEFAULT)
        else:
            r.error_code = codes.INVALID_REQUEST
            r.error_message = f"resource type {res.resource_type} is not served by the fake"
        keys = res.configuration_keys
        for name in sorted(values):
            if keys is not None and keys and name not in keys:
                continue
            value, source = values[name]
            r.configs.append(
                DCR.DescribeConfigsResourceResult(
                    name=name,
                    value=value,
                    config_source=source,
                    synonyms=[DCR.DescribeConfigsSynonym(name=name, value=value, source=source)]
                    if ctx.version >= 1 and req.include_synonyms
                    else [],
                    config_type=_config_type(name, value),
                    documentation=None,
                )
            )
        out.append(r)
    return DCR(results=out)


def _alter(
    ctx: Ctx,
    resource_type: int,
    name: str,
    ops: list[tuple[str, int, str | None]],
    *,
    replace: bool,
    validate_only: bool,
) -> None:
    """Apply config operations (ApiError when one is refused)."""
    state = ctx.cluster.state
    if resource_type == TOPIC:
        topic = state.topic(name)
        if topic is None:
            raise ApiError(codes.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        known, target = TOPIC_DEFAULTS, dict(topic.configs)
    elif resource_type == BROKER:
        known, target = BROKER_DEFAULTS, dict(state.config)
    elif resource_type == GROUP:
        known = dict.fromkeys(GROUP_DEFAULTS, "")
        target = dict(ctx.cluster.group_configs.get(name, {}))
    else:
        raise ApiError(codes.INVALID_REQUEST, f"resource type {resource_type} is not served")
    if replace:
        target = {}
    for key, op, value in ops:
        if key not in known:
            raise ApiError(codes.INVALID_CONFIG, f"unknown config {key!r}")
        if op == SET:
            if value is None:
                raise ApiError(codes.INVALID_REQUEST, f"no value to set {key!r} to")
            target[key] = value
        elif op == DELETE:
            target.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            items = [x for x in target.get(key, known[key]).split(",") if x]
            change = [x for x in (value or "").split(",") if x]
            if op == APPEND:
                items += [x for x in change if x not in items]
            else:
                items = [x for x in items if x not in change]
            target[key] = ",".join(items)
        else:
            raise ApiError(codes.INVALID_REQUEST, f"unknown config operation {op}")
    if resource_type == GROUP:
        for key, value in target.items():
            _check_group_config(ctx, key, value)
    if validate_only:
        return
    if resource_type == TOPIC:
        state.topics[name].configs = target
    elif resource_type == GROUP:
        ctx.cluster.group_configs[name] = target
    else:
        state.config = target


def _check_group_config(ctx: Ctx, key: str, value: str) -> None:
    state = ctx.cluster.state
    if key == "share.auto.offset.reset":
        ok = value in ("earliest", "latest")
    elif key == "share.isolation.level":
        ok = value in ("read_committed", "read_uncommitted")
    elif key == "share.record.lock.duration.ms":
        lo = state.conf_int("group.share.min.record.lock.duration.ms")
        hi = state.conf_int("group.share.max.record.lock.duration.ms")
        ok = value.isdigit() and lo <= int(value) <= hi
    else:
        ok = value.isdigit() and int(value) > 0
    if not ok:
        raise ApiError(codes.INVALID_CONFIG, f"group config {key}={value!r} is not valid")


def incremental_alter_configs(ctx: Ctx, req: IncrementalAlterConfigsRequest) -> Any:
    out = []
    for res in req.resources:
        r = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            resource_type=res.resource_type, resource_name=res.resource_name, error_message=None
        )
        try:
            forced = ctx.forced(res.resource_name if res.resource_type == TOPIC else None)
            if forced is not None:
                raise ApiError(forced)
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            _alter(
                ctx,
                res.resource_type,
                res.resource_name,
                ops,
                replace=False,
                validate_only=req.validate_only,
            )
        except ApiError as exc:
            r.error_code, r.error_message = exc.code, exc.message
        out.append(r)
    return IncrementalAlterConfigsResponse(responses=out)


def alter_configs(ctx: Ctx, req: AlterConfigsRequest) -> Any:
    out = []
    for res in req.resources:
        r = AlterConfigsResponse.AlterConfigsResourceResponse(
            resource_type=res.resource_type, resource_name=res.resource_name, error_message=None
        )
        try:
            ops = [(c.name, SET, c.value) for c in res.configs]
            _alter(
                ctx,
                res.resource_type,
                res.resource_name,
                ops,
                replace=True,
                validate_only=req.validate_only,
            )
        except ApiError as exc:
            r.error_code, r.error_message = exc.code, exc.message
        out.append(r)
    return AlterConfigsResponse(responses=out)


HANDLERS = {
    CreateTopicsRequest.API_KEY: (create_topics, 2, 7, True),
    DeleteTopicsRequest.API_KEY: (delete_topics, 1, 6, True),
    CreatePartitionsRequest.API_KEY: (create_partitions, 0, 3, True),
    DescribeConfigsRequest.API_KEY: (describe_configs, 1, 4, False),
    AlterConfigsRequest.API_KEY: (alter_configs, 0, 2, False),
    IncrementalAlterConfigsRequest.API_KEY: (incremental_alter_configs, 0, 1, True),
}
