"""Public types of the admin client: config resources and entries, ACLs, groups, SCRAM.

Role: what :class:`kpax.Admin` takes and returns besides the shared types of
:mod:`kpax.structs`. Enum values are the protocol's own numbers.

Imports: kpax.structs, kpax.config and the standard library.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kpax.config import dataclass_repr
from kpax.structs import TopicPartition


class ConfigResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True)
class ConfigResource:
    """``ConfigResource(ConfigResourceType.TOPIC, "orders")`` or a broker id as name.

    ``type`` may also be given by name (``"topic"``, ``"broker"``, ``"group"``,
    ``"broker_logger"``, ``"client_metrics"``, any case) or number, as the
    peers' ``ConfigResource("topic", name)`` does; anything else is a
    ValueError naming the types. ``name``: a str (a broker id may be an int)."""

    type: ConfigResourceType
    name: str

    def __post_init__(self) -> None:
        kind = self.type
        if not isinstance(kind, ConfigResourceType):
            found = None
            if isinstance(kind, str):
                found = ConfigResourceType.__members__.get(
                    kind.strip().upper().replace("-", "_").replace(" ", "_")
                )
            elif isinstance(kind, int) and not isinstance(kind, bool):
                found = next((t for t in ConfigResourceType if t.value == kind), None)
            if found is None or found is ConfigResourceType.UNKNOWN:
                names = ", ".join(repr(t.name.lower()) for t in ConfigResourceType if t.value)
                raise ValueError(
                    f"ConfigResource type {kind!r} is not a config resource type: "
                    f"one of {names} (or a ConfigResourceType)"
                )
            object.__setattr__(self, "type", found)
        if isinstance(self.name, int) and not isinstance(self.name, bool):
            object.__setattr__(self, "name", str(self.name))
        if not isinstance(self.name, str):
            raise TypeError(f"ConfigResource name must be a str, not {type(self.name).__name__}")

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        """The configuration of topic ``name``."""
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str) -> ConfigResource:
        """The configuration of broker ``node_id`` (``""``: the cluster-wide default)."""
        return cls(ConfigResourceType.BROKER, str(node_id))

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        """The configuration of group ``group_id`` (consumer and share groups)."""
        return cls(ConfigResourceType.GROUP, group_id)

    def __str__(self) -> str:
        return f"{self.type.name.lower()} {self.name!r}"


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool = False
    source: ConfigSource = ConfigSource.UNKNOWN
    is_sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        """Is the value the broker's default (not set for this resource)?"""
        return self.source == ConfigSource.DEFAULT_CONFIG


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class AlterConfigOp:
    """One incremental change: ``AlterConfigOp("retention.ms", "1000")`` sets a value.

    A value that is not a str (``1000``, ``True``) is sent as Kafka writes it
    (``"1000"``, ``"true"``); ``op`` may be given by name (``"delete"``)."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"AlterConfigOp name must be a non-empty str, not {self.name!r}")
        if self.value is not None and not isinstance(self.value, str):
            object.__setattr__(self, "value", config_value_text(self.value))
        if not isinstance(self.op, AlterConfigOpType):
            found = (
                AlterConfigOpType.__members__.get(self.op.upper())
                if isinstance(self.op, str)
                else None
            )
            if found is None:
                try:
                    found = AlterConfigOpType(self.op)
                except ValueError:
                    raise ValueError(
                        f"AlterConfigOp op {self.op!r}: one of 'set', 'delete', 'append', "
                        "'subtract' (or an AlterConfigOpType)"
                    ) from None
            object.__setattr__(self, "op", found)


def config_value_text(value: object) -> str:
    """A config value as Kafka writes it: ``True`` -> ``"true"``, a list ->
    ``"a,b"``, anything else ``str(value)``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(config_value_text(v) for v in value)
    return str(value)


def alter_config_ops(resource: object, changes: object) -> list[AlterConfigOp]:
    """The ops of one resource in ``incremental_alter_configs``: AlterConfigOps,
    or a mapping ``{name: value}`` (a value sets it, None deletes it), or
    ``(name, value)`` pairs; anything else is a TypeError naming the resource."""
    from collections.abc import Iterable, Mapping

    if isinstance(changes, Mapping):
        return [
            AlterConfigOp(name, None, AlterConfigOpType.DELETE)
            if value is None
            else AlterConfigOp(name, value)
            for name, value in changes.items()
        ]
    if isinstance(changes, AlterConfigOp):
        return [changes]
    if isinstance(changes, Iterable) and not isinstance(changes, (str, bytes)):
        out = []
        for item in changes:
            if isinstance(item, AlterConfigOp):
                out.append(item)
            elif isinstance(item, tuple) and len(item) == 2:
                name, value = item
                out.append(
                    AlterConfigOp(name, None, AlterConfigOpType.DELETE)
                    if value is None
                    else AlterConfigOp(name, value)
                )
            else:
                raise TypeError(
                    f"incremental_alter_configs: the changes of {resource} hold {item!r}: "
                    "give AlterConfigOps, (name, value) pairs or a {name: value} dict"
                )
        return out
    raise TypeError(
        f"incremental_alter_configs: the changes of {resource} must be AlterConfigOps, "
        f"(name, value) pairs or a {{name: value}} dict, not {type(changes).__name__}"
    )


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class AclBinding:
    """An ACL: ``principal`` may (or may not) do ``operation`` on a resource from ``host``."""

    resource_type: ResourceType
    resource_name: str
    principal: str
    operation: AclOperation
    permission_type: AclPermissionType = AclPermissionType.ALLOW
    host: str = "*"
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True)
class AclBindingFilter:
    """Matches ACLs; ``None`` fields (and the ANY enum values) match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    principal: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY
    host: str | None = None
    pattern_type: PatternType = PatternType.ANY


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str = ""
    #: "classic", "consumer" (KIP-848), "share", "streams"; "" from brokers
    #: older than ListGroups v5 (Kafka 3.8), which do not say.
    type: str = ""


#: The two kinds of group :meth:`kpax.Admin.describe_groups` describes.
CLASSIC = "classic"
CONSUMER = "consumer"
#: The kind :meth:`kpax.Admin.describe_share_groups` describes (KIP-932).
SHARE = "share"


@dataclass(frozen=True)
class MemberDescription:
    """One member of a group.

    ``assignment`` is what the member owns now. The fields after it are filled
    for members of consumer (KIP-848) groups only, and are None in classic
    groups: the partitions the group's assignor wants the member to own
    (``target_assignment``; it differs from ``assignment`` while the member
    reconciles), its epoch, what it subscribed to (topic names, or the regex of
    ``subscribe(pattern=...)``), its rack, and ``upgraded``: True for a member
    speaking the consumer protocol, False for a classic-protocol member that
    joined the consumer group (None when the broker does not say, before
    ConsumerGroupDescribe v1). ``subscribed_topics`` is also filled for classic
    members of a group whose protocol type is "consumer", from their join
    metadata."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: tuple[TopicPartition, ...] = ()
    target_assignment: tuple[TopicPartition, ...] | None = None
    member_epoch: int | None = None
    subscribed_topics: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    rack: str | None = None
    upgraded: bool | None = None


@dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator describes it.

    ``type`` is ``"classic"`` (JoinGroup/SyncGroup; described with
    DescribeGroups) or ``"consumer"`` (KIP-848, ``group_protocol="consumer"``;
    described with ConsumerGroupDescribe). ``state`` is the coordinator's name
    for it: classic groups are Empty, PreparingRebalance, CompletingRebalance,
    Stable or Dead; consumer groups Empty, Assigning, Reconciling, Stable or
    Dead. For a consumer group ``protocol_type`` is "consumer" and ``protocol``
    the server-side assignor ("uniform", "range"); for a classic group they are
    what its members joined with (for Java-style consumers: "consumer" and the
    chosen assignor; "" and "" for a group that only stores offsets).
    ``group_epoch`` and ``assignment_epoch`` are the consumer group's epochs
    (None for classic groups)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()
    type: str = CLASSIC
    coordinator: int = -1
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def assignor(self) -> str:
        """The partition assignor: the consumer group's server-side one, or the
        one a classic group's consumers agreed on ("" for other protocol types)."""
        return self.protocol if self.protocol_type == CONSUMER else ""

    @property
    def is_simple_consumer_group(self) -> bool:
        """A classic group with no protocol type: it only stores offsets (committed
        by consumers that assign partitions themselves, or by an admin)."""
        return self.type == CLASSIC and not self.protocol_type

    @property
    def is_empty(self) -> bool:
        """No members (Empty or Dead): its offsets may be altered from outside."""
        return not self.members and self.state in ("Empty", "Dead")


@dataclass(frozen=True)
class ShareMemberDescription:
    """One member of a share group (KIP-932): what it subscribed to and the
    partitions the coordinator assigned it (members of a share group may share
    partitions)."""

    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    subscribed_topics: tuple[str, ...] = ()
    assignment: tuple[TopicPartition, ...] = ()
    rack: str | None = None


@dataclass(frozen=True)
class ShareGroupDescription:
    """A share group as its coordinator describes it (ShareGroupDescribe).

    ``state`` is Empty, Stable or Dead; ``group_epoch`` is bumped by every
    change of membership or subscriptions, ``assignment_epoch`` is the epoch of
    the group's current assignment (equal once it has been computed for the
    latest change); ``assignor`` is the broker's assignor ("simple")."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMemberDescription, ...] = ()
    assignor: str = ""
    coordinator: int = -1

    @property
    def is_empty(self) -> bool:
        """No members: its offsets may be altered or deleted from outside."""
        return not self.members


@dataclass(frozen=True)
class SharePartitionOffset:
    """Where a share group stands on one partition (DescribeShareGroupOffsets).

    ``start_offset`` is the share-partition start offset: the records before it
    are done with (acknowledged, released for good or archived). ``lag`` is the
    number of records from there to the end of the partition the group has yet
    to finish, as the broker counts it (KIP-1226); None when the broker does
    not say (DescribeShareGroupOffsets before v1) or does not know.
    ``leader_epoch`` is the partition's leader epoch, None when unknown."""

    start_offset: int
    leader_epoch: int | None = None
    lag: int | None = None


class ScramMechanism(enum.IntEnum):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @classmethod
    def parse(cls, name: str | ScramMechanism) -> ScramMechanism:
        if isinstance(name, ScramMechanism):
            return name
        return cls[name.upper().replace("-", "_")]


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """A user's SCRAM credential to set (its repr hides the password)."""

    user: str
    mechanism: ScramMechanism
    password: str
    iterations: int = 4096
    salt: bytes | None = None

    __repr__ = dataclass_repr


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: ScramMechanism


@dataclass(frozen=True)
class UserScramCredentials:
    user: str
    credentials: tuple[ScramCredentialInfo, ...] = field(default_factory=tuple)
