"""The asyncio admin client (``kpax.aio.Admin``): topics, configs, offsets, groups, ACLs, users.

Role: turn admin calls into requests routed to the right broker (controller
for topic changes, partition leaders for offsets and record deletion, group
coordinators for group operations, the named broker for broker configs),
retry retriable failures with backoff until ``default_api_timeout_ms``, and
return per-item results (:class:`~kpax.structs.BatchResult`): one failing
topic does not hide the others' outcome.

``AsyncAdmin`` is the public class and its lifecycle (start, close, metrics);
the operations live in one mixin per domain, each deriving from
:class:`~kpax.admin.base.AdminBase` (options, cluster, request path):

* kpax.admin.cluster -- describe_cluster
* kpax.admin.topics -- list, describe, create and delete topics; create partitions
* kpax.admin.configs -- describe and incrementally alter configs
* kpax.admin.offsets -- list_offsets, delete_records (leader-routed)
* kpax.admin.groups -- list, describe and delete groups; a group's offsets
* kpax.admin.share_groups -- describe and delete share groups (KIP-932); their offsets
* kpax.admin.acls -- describe, create and delete ACLs
* kpax.admin.users -- SCRAM credentials

An admin client belongs to the event loop that started it (a call from
another loop is an IllegalStateError: its cluster checks, kpax.event_loops),
is unusable in a child of fork() (kpax.forks) and warns (ResourceWarning)
when collected unclosed.

Imports: kpax.admin.base, kpax.admin.cluster, kpax.admin.topics, kpax.admin.configs,
kpax.admin.offsets, kpax.admin.groups, kpax.admin.share_groups, kpax.admin.acls,
kpax.admin.users, kpax.forks and the standard library, kpax.peer_methods.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kpax.admin.acls import AclAdmin
from kpax.admin.base import ADMIN_OPTIONS, AdminBase, AdminConfig
from kpax.admin.cluster import ClusterAdmin
from kpax.admin.configs import ConfigAdmin
from kpax.admin.groups import GroupAdmin
from kpax.admin.offsets import OFFSET_SPECS, OffsetAdmin
from kpax.admin.share_groups import ShareGroupAdmin
from kpax.admin.topics import TopicAdmin
from kpax.admin.users import UserAdmin
from kpax.forks import forked_error
from kpax.forks import track as track_fork
from kpax.peer_methods import ADMIN, PeerHints

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

__all__ = ["ADMIN_OPTIONS", "OFFSET_SPECS", "AsyncAdmin"]


class AsyncAdmin(
    PeerHints,
    ClusterAdmin,
    TopicAdmin,
    ConfigAdmin,
    OffsetAdmin,
    GroupAdmin,
    ShareGroupAdmin,
    AclAdmin,
    UserAdmin,
    AdminBase,
):
    """``kpax.aio.Admin``: ``async with AsyncAdmin("host:9092") as admin: ...``."""

    _peer_methods = ADMIN

    _client_name = "kpax.aio.Admin"
    #: Set on an admin client inherited through fork() (kpax.forks).
    _forked = False

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[AdminConfig],
    ) -> None:
        super().__init__(bootstrap_servers, **config)
        self.cluster.client_name = self._client_name
        self._started = self._closed = False
        track_fork(self)

    async def start(self) -> AsyncAdmin:
        """Connect to the cluster (bootstrap, first metadata); ``async with`` calls it. Returns the
        admin client.
        """
        try:
            await self.cluster.start()
        except BaseException:
            # ``async with`` does not call close() when start fails: a bootstrap
            # connection that answered with bytes it could not decode stays open.
            await self.cluster.close()
            raise
        self._started = True
        return self

    async def close(self) -> None:
        """Close the connections (on the event loop that started the client:
        IllegalStateError from another loop)."""
        await self.cluster.close()
        self._closed = True

    def _after_fork(self) -> None:
        """In a child of fork() (kpax.forks): every call refuses (a method bound
        before the fork included: its cluster is unusable)."""
        self.cluster.unusable = forked_error(self, "a call")

    def __del__(self) -> None:
        if self.__dict__.get("_started") and not self._closed and not self._forked:
            warnings.warn(
                f"unclosed {self._client_name}: await close() (or use `async with`) "
                "before its event loop ends",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )

    def metrics(self) -> dict[str, float]:
        """The Java admin client's metrics that apply, as ``{name: value}``
        (requests, responses, bytes, ``request-latency-avg``, ``connection-count``...;
        see docs/observability.md). Safe to call from any thread."""
        out: dict[str, float] = {}
        if self._metrics is not None and self._conn_metrics is not None:
            self._conn_metrics.snapshot(out, self._metrics.clock())
        return out

    async def __aenter__(self) -> AsyncAdmin:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
