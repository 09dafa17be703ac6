"""kpax.testing.fake: an in-process Kafka that serves the real wire protocol from memory.

Role: the package of :class:`FakeKafka` (also ``kpax.testing.FakeKafka``), for
kpax's own tests and for users' tests: no JVM, starts in milliseconds. Two
layers:

- a **sans-I/O core**, :class:`FakeCluster` (:mod:`.cluster`): the cluster's
  state and its request handling with no socket, no thread, no clock: request
  frames in, response frames out (or pending answers), ``tick(now_ms)`` for
  time, one seeded ``random.Random`` for every random choice, so the same inputs
  give the same bytes. :class:`FakeConnection` (:mod:`.connection`) is its
  byte-stream seam: a transport calls ``receive(data, now_ms)`` and
  ``data_to_send()``. A seeded simulation drives it through an in-memory
  transport in virtual time.
- the **TCP face**, :class:`FakeKafka` (:mod:`.server`): each broker on
  127.0.0.1, an asyncio loop on a background thread; any Kafka client connects.

What it serves, module by module: :mod:`.metadata` (ApiVersions, Metadata,
FindCoordinator, DescribeCluster), :mod:`.produce`, :mod:`.fetch` (with fetch
sessions and long polls), :mod:`.partition_offsets` (ListOffsets,
OffsetForLeaderEpoch, DeleteRecords), :mod:`.admin` (topics and configs),
:mod:`.commits` (committed offsets), :mod:`.groups` + :mod:`.group_api`
(classic groups), :mod:`.consumer_groups` + :mod:`.assignors` (KIP-848),
:mod:`.txn` + :mod:`.txn_api` (idempotent and transactional producers),
:mod:`.share_groups` + :mod:`.share_fetch` (KIP-932 share groups); the
state in :mod:`.state`, :mod:`.log` and :mod:`.producers`; faults in
:mod:`.faults`. docs/testing.md has the user's guide.

Imports: kpax.testing.fake.{cluster,connection,faults,server}.
"""

from __future__ import annotations

from kpax.testing.fake.cluster import FakeCluster
from kpax.testing.fake.connection import FakeConnection
from kpax.testing.fake.faults import Fault
from kpax.testing.fake.server import FakeKafka

__all__ = ["FakeCluster", "FakeConnection", "FakeKafka", "Fault"]
