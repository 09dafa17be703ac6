"""Admin operations on configs (``ConfigAdmin``): describe_configs, incremental_alter_configs.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for topic, broker
and group configuration: a broker's own resources go to that broker, the rest
(topics, groups, client metrics...) to any broker, one request per broker;
per-resource results.

Imports: kpax.admin.base, kpax.cluster.request_path,
kpax.admin.types, kpax.broker, kpax.proto, kpax.structs,
the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kpax.admin.base import AdminBase, Outcome, broker_error
from kpax.admin.types import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    alter_config_ops,
)
from kpax.broker.broker import Broker
from kpax.cluster.request_path import ANY_BROKER, Route, ToNode
from kpax.proto.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kpax.structs import BatchResult


class ConfigAdmin(AdminBase):
    """Config calls: describe_configs, incremental_alter_configs."""

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[ConfigResource, dict[str, ConfigEntry]]:
        """Configuration entries of topics, brokers and groups (``keys`` limits
        which); a group's (``ConfigResource(ConfigResourceType.GROUP, id)``)
        include, on brokers with share groups, the share-group settings
        ``share.auto.offset.reset``, ``share.record.lock.duration.ms``,
        ``share.delivery.count.limit`` and ``share.isolation.level``."""
        key_list = list(keys) if keys is not None else None

        async def send(broker: Broker, group: list[ConfigResource]) -> Outcome[ConfigResource]:
            out: Outcome[ConfigResource] = {}
            req = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configuration_keys=key_list,
                    )
                    for r in group
                ],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            resp = await broker.request(req)
            for res in resp.results:
                key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                if res.error_code:
                    out[key] = broker_error(
                        res.error_code, f"describe configs of {key}", res.error_message
                    )
                    continue
                out[key] = {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        read_only=c.read_only,
                        source=_config_source(c.config_source),
                        is_sensitive=c.is_sensitive,
                        synonyms=tuple(
                            (s.name, s.value, s.source) for s in getattr(c, "synonyms", [])
                        ),
                        documentation=getattr(c, "documentation", None),
                    )
                    for c in res.configs
                }
            return out

        return await self._routed(
            "describe configs", resources, _config_route, send, timeout, topic_of=_topic_of
        )

    async def incremental_alter_configs(
        self,
        changes: Mapping[
            ConfigResource, Iterable[AlterConfigOp | tuple[str, Any]] | Mapping[str, Any]
        ],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[ConfigResource, None]:
        """Set, delete, append to or subtract from configuration values (of
        topics, brokers or groups: see :meth:`describe_configs`).

        Each resource's changes are :class:`AlterConfigOp` objects, or a dict
        ``{"retention.ms": "86400000"}`` (a value sets the option, None deletes
        it, non-str values are sent as Kafka writes them), or ``(name, value)``
        pairs. ``validate_only``: the brokers check the changes without applying
        them. Returns a per-resource result; a failed resource's error names it::

            admin.incremental_alter_configs(
                {ConfigResource.topic("orders"): {"retention.ms": 86_400_000}}
            ).raise_for_errors()
        """
        ops = {r: alter_config_ops(r, c) for r, c in changes.items()}

        async def send(broker: Broker, group: list[ConfigResource]) -> Outcome[ConfigResource]:
            out: Outcome[ConfigResource] = {}
            req = IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name=op.name, config_operation=int(op.op), value=op.value
                            )
                            for op in ops[r]
                        ],
                    )
                    for r in group
                ],
                validate_only=validate_only,
            )
            resp = await broker.request(req)
            for res in resp.responses:
                key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                out[key] = (
                    broker_error(res.error_code, f"alter configs of {key}", res.error_message)
                    if res.error_code
                    else None
                )
            return out

        return await self._routed(
            "alter configs", ops, _config_route, send, timeout, topic_of=_topic_of
        )


def _config_route(resource: ConfigResource) -> Route:
    """A broker's (or broker logger's) configs are that broker's to answer
    (``ToNode``); topic and group configs any broker's. Resources of different
    brokers go to them at once (the request path's fan-out)."""
    if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and (
        resource.name.isdigit()
    ):
        return ToNode(int(resource.name))
    return ANY_BROKER


def _config_source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


def _topic_of(resource: ConfigResource) -> str | None:
    """The topic a config resource names (None: a broker, group...)."""
    return resource.name if resource.type == ConfigResourceType.TOPIC else None
