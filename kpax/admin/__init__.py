"""kpax.admin — topics, partitions, configs, offsets, groups (share groups too), ACLs, users.

``AsyncAdmin`` (kpax.admin.client) combines one mixin per domain (kpax.admin.topics,
.configs, .offsets, .groups, .share_groups, .acls, .users, .cluster) over kpax.admin.base;
``Admin`` (kpax.admin.sync) is its blocking face; kpax.admin.types the value types.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
a module of this package (an option table, say) does not load the rest.

Imports: kpax.admin.client, kpax.admin.sync, kpax.admin.types, kpax.lazy_names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpax.lazy_names import lazy_names

if TYPE_CHECKING:
    from kpax.admin.client import ADMIN_OPTIONS, AsyncAdmin
    from kpax.admin.sync import Admin
    from kpax.admin.types import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AlterConfigOp,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigResourceType,
        ConfigSource,
        GroupDescription,
        GroupListing,
        MemberDescription,
        PatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        ShareGroupDescription,
        ShareMemberDescription,
        SharePartitionOffset,
        UserScramCredentialDeletion,
        UserScramCredentials,
        UserScramCredentialUpsertion,
    )

__all__ = [
    "ADMIN_OPTIONS",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "AsyncAdmin",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "PatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "SharePartitionOffset",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentials",
]

# name -> module it is imported from on first use
_LAZY: dict[str, str] = {
    "ADMIN_OPTIONS": "kpax.admin.client",
    "AsyncAdmin": "kpax.admin.client",
    "Admin": "kpax.admin.sync",
    "AclBinding": "kpax.admin.types",
    "AclBindingFilter": "kpax.admin.types",
    "AclOperation": "kpax.admin.types",
    "AclPermissionType": "kpax.admin.types",
    "AlterConfigOp": "kpax.admin.types",
    "AlterConfigOpType": "kpax.admin.types",
    "ConfigEntry": "kpax.admin.types",
    "ConfigResource": "kpax.admin.types",
    "ConfigResourceType": "kpax.admin.types",
    "ConfigSource": "kpax.admin.types",
    "GroupDescription": "kpax.admin.types",
    "GroupListing": "kpax.admin.types",
    "MemberDescription": "kpax.admin.types",
    "PatternType": "kpax.admin.types",
    "ResourceType": "kpax.admin.types",
    "ScramCredentialInfo": "kpax.admin.types",
    "ScramMechanism": "kpax.admin.types",
    "ShareGroupDescription": "kpax.admin.types",
    "ShareMemberDescription": "kpax.admin.types",
    "SharePartitionOffset": "kpax.admin.types",
    "UserScramCredentialDeletion": "kpax.admin.types",
    "UserScramCredentials": "kpax.admin.types",
    "UserScramCredentialUpsertion": "kpax.admin.types",
}


_load, __dir__ = lazy_names(__name__, _LAZY)


# Hidden from type checkers, which take the names from the TYPE_CHECKING imports
# above (and so still report a misspelt one).
if not TYPE_CHECKING:
    __getattr__ = _load
