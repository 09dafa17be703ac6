"""``kpax.Admin``: the blocking face of :class:`kpax.admin.client.AsyncAdmin`.

Role: a thin wrapper. The admin's asyncio core runs on its own
:class:`~kpax.loop_thread.LoopThread`; each method hands the coroutine over
and waits (bounded by the call's timeout plus a margin). Safe to use from
several threads at once; closing stops the thread; a call after close raises
:class:`ClientClosedError`.

Imports: kpax.admin.client, kpax.admin.types, kpax.sync_face, kpax.structs.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any

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


class Admin(SyncFace):
    """``kpax.Admin("host:9092")``: create and delete topics, describe the
    cluster, configs, offsets, groups (share groups too), ACLs and SCRAM users.
    A context manager."""

    _call_what = "admin call"
    _closed_text = "the admin client is closed"
    _client_name = "kpax.Admin"

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        core = self._core = AsyncAdmin(bootstrap_servers, **config)  # validates options first
        margin = 5.0 + core.config["request_timeout_ms"] / 1000
        super().__init__("kpax-admin", core.timeout, margin)
        self._start(core.start(), core.timeout + margin, "admin call", core.close, 5.0)

    def metrics(self) -> dict[str, float]:
        """``{metric-name: value}``: see :meth:`AsyncAdmin.metrics` and
        docs/observability.md."""
        return self._core.metrics()

    def close(self) -> None:
        self._close_once(self._core.close(), 10.0, "admin close")

    def _unreferenced_close(self) -> Coroutine[Any, Any, Any]:
        return self._core.close()

    @property
    def aio(self) -> AsyncAdmin:
        """The asyncio core (for use on this client's own loop only)."""
        return self._core

    # The methods below mirror AsyncAdmin one to one; see its docstrings.

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        return self._run(self._core.describe_cluster(timeout=timeout), timeout)

    def list_topics(self, *, internal: bool = False, timeout: float | None = None) -> list[str]:
        return self._run(self._core.list_topics(internal=internal, timeout=timeout), timeout)

    def describe_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, TopicDescription]:
        return self._run(self._core.describe_topics(list(topics), timeout=timeout), timeout)

    def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        return self._run(
            self._core.create_topics(list(topics), validate_only=validate_only, timeout=timeout),
            timeout,
        )

    def delete_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        return self._run(self._core.delete_topics(list(topics), timeout=timeout), timeout)

    def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
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
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[ConfigResource, None]:
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
        return self._run(
            self._core.list_offsets(dict(specs), isolation_level=isolation_level, timeout=timeout),
            timeout,
        )

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> BatchResult[TopicPartition, int]:
        return self._run(self._core.delete_records(dict(before), timeout=timeout), timeout)

    def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> list[GroupListing]:
        return self._run(
            self._core.list_groups(states=states, types=types, timeout=timeout), timeout
        )

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, GroupDescription]:
        return self._run(self._core.describe_groups(list(group_ids), timeout=timeout), timeout)

    def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        return self._run(self._core.delete_groups(list(group_ids), timeout=timeout), timeout)

    def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
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
        return self._run(
            self._core.delete_group_offsets(group_id, list(partitions), timeout=timeout), timeout
        )

    def describe_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, ShareGroupDescription]:
        return self._run(
            self._core.describe_share_groups(list(group_ids), timeout=timeout), timeout
        )

    def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        return self._run(self._core.delete_share_groups(list(group_ids), timeout=timeout), timeout)

    def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset | None]:
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
        return self._run(
            self._core.alter_share_group_offsets(group_id, dict(offsets), timeout=timeout), timeout
        )

    def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        return self._run(
            self._core.delete_share_group_offsets(group_id, list(topics), timeout=timeout), timeout
        )

    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        return self._run(self._core.describe_acls(acl_filter, timeout=timeout), timeout)

    def create_acls(
        self, acls: Iterable[AclBinding], *, timeout: float | None = None
    ) -> BatchResult[AclBinding, None]:
        return self._run(self._core.create_acls(list(acls), timeout=timeout), timeout)

    def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
    ) -> BatchResult[AclBindingFilter, list[AclBinding]]:
        return self._run(self._core.delete_acls(list(filters), timeout=timeout), timeout)

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> BatchResult[str, UserScramCredentials]:
        return self._run(
            self._core.describe_user_scram_credentials(users, timeout=timeout), timeout
        )

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        return self._run(
            self._core.alter_user_scram_credentials(list(alterations), timeout=timeout), timeout
        )
