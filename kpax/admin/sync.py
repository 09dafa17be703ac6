"""``kpax.Admin``: the blocking face of :class:`kpax.admin.client.AsyncAdmin`.

Role: a thin wrapper. The admin's asyncio core runs on its own
:class:`~kpax.loop_thread.LoopThread`; each method hands the coroutine over
and waits (bounded by the call's timeout plus a margin). Safe to use from
several threads at once; closing stops the thread; a call after close raises
:class:`ClientClosedError`.

Imports: kpax.admin.base, kpax.admin.client, kpax.admin.types, kpax.sync_face, kpax.structs,
kpax.peer_methods.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kpax.admin.base import AdminConfig
from kpax.admin.client import AsyncAdmin
from kpax.admin.types import (
    AclBinding,
    AclBindingFilter,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    ShareGroupDescription,
    SharePartitionOffset,
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
)
from kpax.peer_methods import ADMIN, PeerHints
from kpax.structs import (
    BatchResult,
    ClusterDescription,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicDescription,
    TopicPartition,
)
from kpax.sync_face import SyncFace

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)


class Admin(PeerHints, SyncFace):
    """``kpax.Admin("host:9092")``: create and delete topics, describe the
    cluster, configs, offsets, groups (share groups too), ACLs and SCRAM users.
    A context manager."""

    _peer_methods = ADMIN

    _call_what = "admin call"
    _closed_text = "the admin client is closed"
    _client_name = "kpax.Admin"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[AdminConfig],
    ) -> None:
        core = self._core = AsyncAdmin(bootstrap_servers, **config)  # validates options first
        margin = 5.0 + core.config["request_timeout_ms"] / 1000
        super().__init__("kpax-admin", core._timeout, margin)
        self._start(core.start(), core._timeout + margin, "admin call", core.close, 5.0)

    def metrics(self) -> dict[str, float]:
        """``{metric-name: value}``: see :meth:`AsyncAdmin.metrics` and
        docs/observability.md."""
        return self._core.metrics()

    def close(self) -> None:
        """Close the connections and stop the I/O thread (at most 10 s); later calls raise
        ClientClosedError.
        """
        self._close_once(self._core.close(), 10.0, "admin close")

    def _unreferenced_close(self) -> Coroutine[Any, Any, Any]:
        return self._core.close()

    @property
    def aio(self) -> AsyncAdmin:
        """The asyncio core (for use on this client's own loop only)."""
        return self._core

    # The methods below mirror AsyncAdmin one to one; see its docstrings.

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """Cluster id, controller, brokers.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.describe_cluster(timeout=timeout), timeout)

    def list_topics(self, *, internal: bool = False, timeout: float | None = None) -> list[str]:
        """Names of every topic (internal ones like __consumer_offsets only if asked).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.list_topics(internal=internal, timeout=timeout), timeout)

    def describe_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of each topic.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.describe_topics(_names(topics), timeout=timeout), timeout)

    def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Create topics (a bare name takes the broker's default partitions and
        replication). Each result is None on success; a topic that already
        exists fails with ``TopicAlreadyExistsError``, for that topic only.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.create_topics(list(topics), validate_only=validate_only, timeout=timeout),
            timeout,
        )

    def delete_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete topics by name (per-topic results).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.delete_topics(_names(topics), timeout=timeout), timeout)

    def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Grow topics to ``new_totals[topic]`` partitions.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.create_partitions(
                dict(new_totals), validate_only=validate_only, timeout=timeout
            ),
            timeout,
        )

    def describe_configs(
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
        ``share.delivery.count.limit`` and ``share.isolation.level``.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.describe_configs(
                list(resources),
                keys=keys,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
                timeout=timeout,
            ),
            timeout,
        )

    def incremental_alter_configs(
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

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.incremental_alter_configs(
                dict(changes), validate_only=validate_only, timeout=timeout
            ),
            timeout,
        )

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, str | int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, OffsetAndTimestamp]:
        """Offsets by ``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a
        timestamp in ms (the first offset at or after it; -1 when none).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.list_offsets(dict(specs), isolation_level=isolation_level, timeout=timeout),
            timeout,
        )

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> BatchResult[TopicPartition, int]:
        """Delete records below ``before[tp]`` (-1: up to the high watermark);
        each result is the partition's new low watermark.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.delete_records(dict(before), timeout=timeout), timeout)

    def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> list[GroupListing]:
        """Every group on every broker (optionally filtered by state and type:
        ``types=["share"]`` lists the share groups, ``"consumer"``, ``"classic"``
        and ``"streams"`` the others; a type filter needs Kafka 3.8+).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.list_groups(states=states, types=types, timeout=timeout), timeout
        )

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, GroupDescription]:
        """Type (classic or consumer), state, assignor and members (with their
        assigned partitions) of each group.

        As the Java admin client does, each group is first asked for with
        ConsumerGroupDescribe (KIP-848 groups); when its coordinator says the
        group is not a consumer group (GROUP_ID_NOT_FOUND) or does not speak
        that API, DescribeGroups describes it as a classic group. A group that
        is neither (unknown, or of another type such as share or streams)
        fails with :class:`~kpax.errors.GroupIdNotFoundError` naming the group
        and the coordinator, with the broker's answers to both requests
        (:meth:`describe_share_groups` describes share groups).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.describe_groups(_names(group_ids), timeout=timeout), timeout)

    def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete empty groups (a group with members fails with NonEmptyGroupError).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.delete_groups(_names(group_ids), timeout=timeout), timeout)

    def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all partitions, or those asked for;
        a partition with no committed offset is left out).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.list_group_offsets(
                group_id,
                list(partitions) if partitions is not None else None,
                require_stable=require_stable,
                timeout=timeout,
            ),
            timeout,
        )

    def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Set the group's committed offsets (the group must have no active members).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.alter_group_offsets(group_id, dict(offsets), timeout=timeout), timeout
        )

    def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Forget the group's committed offsets of ``partitions`` (not subscribed ones).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.delete_group_offsets(group_id, list(partitions), timeout=timeout), timeout
        )

    def describe_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, ShareGroupDescription]:
        """State, epochs and members of each share group: each member's client,
        the topics it subscribed to and the partitions assigned to it
        (ShareGroupDescribe, to the group's coordinator).

        An unknown group fails with :class:`~kpax.errors.GroupIdNotFoundError`
        naming it; so does a group of another type, the broker saying it is
        "not a share group" (:meth:`describe_groups` describes those). A broker
        without share groups (before Kafka 4.1) fails with
        :class:`~kpax.errors.UnsupportedApiError` naming the API.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.describe_share_groups(_names(group_ids), timeout=timeout), timeout
        )

    def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Delete empty share groups and their state (DeleteGroups, which deletes a
        group of any type): a group with members fails with NonEmptyGroupError,
        an unknown one with GroupIdNotFoundError, each naming the group.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.delete_share_groups(_names(group_ids), timeout=timeout), timeout
        )

    def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset | None]:
        """The share group's start offset (and lag) on each partition it has
        state for, or on ``partitions``: None for a partition where it has none
        yet (no member has read it since the group began or its offsets were
        deleted). An unknown group has no state: ``{}``, or None for each
        partition asked for; a partition that does not exist fails with
        :class:`~kpax.errors.UnknownTopicOrPartitionError` naming it.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.list_share_group_offsets(
                group_id,
                list(partitions) if partitions is not None else None,
                timeout=timeout,
            ),
            timeout,
        )

    def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        """Set the share group's start offsets: its members go on reading each
        partition from there. The group must have no members (else each
        partition fails with NonEmptyGroupError saying so); a group that does
        not exist yet is created, as a share group.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.alter_share_group_offsets(group_id, dict(offsets), timeout=timeout), timeout
        )

    def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        """Forget the share group's state on every partition of ``topics``: the
        next member to read one starts as a new group would
        (``share.auto.offset.reset``). The group must have no members.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.delete_share_group_offsets(group_id, _names(topics), timeout=timeout),
            timeout,
        )

    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        """ACLs matching the filter (all ACLs by default).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.describe_acls(acl_filter, timeout=timeout), timeout)

    def create_acls(
        self, acls: Iterable[AclBinding], *, timeout: float | None = None
    ) -> BatchResult[AclBinding, None]:
        """Create ACLs (per-ACL results).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.create_acls(list(acls), timeout=timeout), timeout)

    def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
    ) -> BatchResult[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching each filter; each result lists what was deleted.

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(self._core.delete_acls(list(filters), timeout=timeout), timeout)

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> BatchResult[str, UserScramCredentials]:
        """The SCRAM mechanisms and iteration counts of each user (all users by default).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.describe_user_scram_credentials(users, timeout=timeout), timeout
        )

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Create, update or delete SCRAM credentials (the password is salted and
        hashed here; only the salted password travels).

        Blocks until done: at most ``timeout`` (the client's default when None).
        """
        return self._run(
            self._core.alter_user_scram_credentials(list(alterations), timeout=timeout), timeout
        )


def _names(names: Iterable[str]) -> list[str]:
    """A list of names; a bare name is one name, never its letters."""
    return [names] if isinstance(names, str) else list(names)
