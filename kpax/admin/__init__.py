"""kpax.admin — topics, partitions, configs, offsets, groups, ACLs, users.

Imports: kpax.cluster, kpax.broker, kpax.proto.
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
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentials",
]
