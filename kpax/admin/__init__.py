"""kpax.admin — topics, partitions, configs, offsets, groups (share groups too), ACLs, users.

``AsyncAdmin`` (kpax.admin.client) combines one mixin per domain (kpax.admin.topics,
.configs, .offsets, .groups, .share_groups, .acls, .users, .cluster) over kpax.admin.base;
``Admin`` (kpax.admin.sync) is its blocking face; kpax.admin.types the value types.

Imports: kpax.admin.client, kpax.admin.sync, kpax.admin.types.
"""

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
