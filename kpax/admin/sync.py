"""``kpax.Admin``: the blocking face of :class:`kpax.admin.client.AsyncAdmin`.

Role: a thin wrapper. The admin's asyncio core runs on its own
:class:`~kpax.loop_thread.LoopThread`; each method hands the coroutine over
and waits (bounded by the call's timeout plus a margin). Safe to use from
several threads at once; closing stops the thread; a call after close raises
:class:`ClientClosedError`.

Imports: kpax.admin.client, kpax.admin.types, kpax.loop_thread, kpax.structs.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kpax.admin.client import AsyncAdmin
from kpax.admin.types import (
    AclBinding,
    AclBindingFilter,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    GroupDescription,
    GroupListing,
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
)
from kpax.loop_thread import LoopThread
from kpax.proto.errors import ClientClosedError
from kpax.structs import (
    BatchResult,
    ClusterDescription,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicDescription,
    TopicPartition,
)

T = TypeVar("T")


class Admin:
    """``kpax.Admin("host:9092")``: create and delete topics, describe the
    cluster, configs, offsets, groups, ACLs and SCRAM users. A context manager."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        self._admin = AsyncAdmin(bootstrap_servers, **config)  # validates options first
        self._thread = LoopThread("kpax-admin")
        self._closed = False
        self._margin = 5.0 + self._admin.config["request_timeout_ms"] / 1000
        try:
            self._run(self._admin.start(), None)
        except BaseException:
            self._thread.run(self._admin.close(), 5.0)
            self._thread.stop()
            raise

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        if self._closed:
            coro.close()
            raise ClientClosedError("the admin client is closed")
        limit = (timeout if timeout is not None else self._admin._timeout) + self._margin
        return self._thread.run(coro, limit, what="admin call")

    def metrics(self) -> dict[str, float]:
        """``{metric-name: value}``: see :meth:`AsyncAdmin.metrics` and
        docs/observability.md."""
        return self._admin.metrics()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._thread.run(self._admin.close(), 10.0, what="admin close")
        finally:
            self._thread.stop()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def aio(self) -> AsyncAdmin:
        """The asyncio core (for use on this client's own loop only)."""
        return self._admin

    # The methods below mirror AsyncAdmin one to one; see its docstrings.

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        return self._run(self._admin.describe_cluster(timeout=timeout), timeout)

    def list_topics(self, *, internal: bool = False, timeout: float | None = None) -> list[str]:
        return self._run(self._admin.list_topics(internal=internal, timeout=timeout), timeout)

    def describe_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, TopicDescription]:
        return self._run(self._admin.describe_topics(list(topics), timeout=timeout), timeout)

    def create_topics(
        self,
        topics: Iterable[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        return self._run(
            self._admin.create_topics(list(topics), validate_only=validate_only, timeout=timeout),
            timeout,
        )

    def delete_topics(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        return self._run(self._admin.delete_topics(list(topics), timeout=timeout), timeout)

    def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        return self._run(
            self._admin.create_partitions(
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
            self._admin.describe_configs(
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
            self._admin.incremental_alter_configs(
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
            self._admin.list_offsets(dict(specs), isolation_level=isolation_level, timeout=timeout),
            timeout,
        )

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> BatchResult[TopicPartition, int]:
        return self._run(self._admin.delete_records(dict(before), timeout=timeout), timeout)

    def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout: float | None = None,
    ) -> list[GroupListing]:
        return self._run(
            self._admin.list_groups(states=states, types=types, timeout=timeout), timeout
        )

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, GroupDescription]:
        return self._run(self._admin.describe_groups(list(group_ids), timeout=timeout), timeout)

    def delete_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> BatchResult[str, None]:
        return self._run(self._admin.delete_groups(list(group_ids), timeout=timeout), timeout)

    def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._run(
            self._admin.list_group_offsets(
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
            self._admin.alter_group_offsets(group_id, dict(offsets), timeout=timeout), timeout
        )

    def delete_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout: float | None = None,
    ) -> BatchResult[TopicPartition, None]:
        return self._run(
            self._admin.delete_group_offsets(group_id, list(partitions), timeout=timeout), timeout
        )

    def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout: float | None = None
    ) -> list[AclBinding]:
        return self._run(self._admin.describe_acls(acl_filter, timeout=timeout), timeout)

    def create_acls(
        self, acls: Iterable[AclBinding], *, timeout: float | None = None
    ) -> BatchResult[AclBinding, None]:
        return self._run(self._admin.create_acls(list(acls), timeout=timeout), timeout)

    def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float | None = None
    ) -> BatchResult[AclBindingFilter, list[AclBinding]]:
        return self._run(self._admin.delete_acls(list(filters), timeout=timeout), timeout)

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> BatchResult[str, UserScramCredentials]:
        return self._run(
            self._admin.describe_user_scram_credentials(users, timeout=timeout), timeout
        )

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        return self._run(
            self._admin.alter_user_scram_credentials(list(alterations), timeout=timeout), timeout
        )
