"""Admin operations on ACLs (``AclAdmin``): describe_acls, create_acls, delete_acls.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for ACLs, asked of
any broker; per-ACL (or per-filter) results.

Imports: kpax.admin.base, kpax.cluster.request_path,
kpax.admin.types, kpax.broker.broker, kpax.proto, kpax.structs,
the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kpax.admin.base import AdminBase, Outcome, broker_error
from kpax.admin.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kpax.broker.broker import Broker
from kpax.cluster.request_path import ANY_BROKER, Route
from kpax.proto.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kpax.structs import BatchResult


class AclAdmin(AdminBase):
    """ACL calls: describe_acls, create_acls, delete_acls."""

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        """ACLs matching the filter (all ACLs by default)."""
        f = acl_filter or AclBindingFilter()

        async def call(broker: Broker) -> list[AclBinding]:
            resp = await broker.request(DescribeAclsRequest(**_filter_fields(f)))
            if resp.error_code:
                raise broker_error(
                    resp.error_code, f"describe ACLs on {broker.describe()}", resp.error_message
                )
            return [
                _binding(r.resource_type, r.resource_name, r.pattern_type, a)
                for r in resp.resources
                for a in r.acls
            ]

        return await self._on_route("describe ACLs", ANY_BROKER, call, timeout)

    async def create_acls(
        self, acls: Iterable[AclBinding], *, timeout: float | None = None
    ) -> BatchResult[AclBinding, None]:
        """Create ACLs (per-ACL results)."""

        async def send(broker: Broker, items: list[AclBinding]) -> Outcome[AclBinding]:
            resp = await broker.request(
                CreateAclsRequest(
                    creations=[
                        CreateAclsRequest.AclCreation(
                            resource_type=int(a.resource_type),
                            resource_name=a.resource_name,
                            resource_pattern_type=int(a.pattern_type),
                            principal=a.principal,
                            host=a.host,
                            operation=int(a.operation),
                            permission_type=int(a.permission_type),
                        )
                        for a in items
                    ]
                )
            )
            return {
                a: (
                    broker_error(r.error_code, f"create ACL {a}", r.error_message)
                    if r.error_code
                    else None
                )
                for a, r in zip(items, resp.results, strict=True)
            }

        return await self._routed("create ACL", acls, _any_broker, send, timeout)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
    ) -> BatchResult[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching each filter; each result lists what was deleted."""

        async def send(broker: Broker, items: list[AclBindingFilter]) -> Outcome[AclBindingFilter]:
            resp = await broker.request(
                DeleteAclsRequest(
                    filters=[DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in items]
                )
            )
            out: Outcome[AclBindingFilter] = {}
            for f, r in zip(items, resp.filter_results, strict=True):
                if r.error_code:
                    out[f] = broker_error(
                        r.error_code, f"delete ACLs matching {f}", r.error_message
                    )
                    continue
                out[f] = [
                    _binding(m.resource_type, m.resource_name, m.pattern_type, m)
                    for m in r.matching_acls
                    if not m.error_code
                ]
            return out

        return await self._routed("delete ACLs", filters, _any_broker, send, timeout)


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """The fields DescribeAcls and DeleteAcls filters share, by their protocol names."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission_type),
    }


def _binding(resource_type: int, resource_name: str, pattern_type: int, acl: Any) -> AclBinding:
    """An AclBinding from a described or deleted ACL entry."""
    return AclBinding(
        resource_type=ResourceType(resource_type),
        resource_name=resource_name,
        principal=acl.principal,
        operation=AclOperation(acl.operation),
        permission_type=AclPermissionType(acl.permission_type),
        host=acl.host,
        pattern_type=PatternType(pattern_type),
    )


def _any_broker(_item: object) -> Route:
    """ACL calls go to any broker (the request path's ANY_BROKER route)."""
    return ANY_BROKER
