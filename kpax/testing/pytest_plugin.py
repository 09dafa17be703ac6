"""pytest plugin, opt-in: real Kafka fixtures.

A project turns it on with ``pytest_plugins = ["kpax.testing.pytest_plugin"]`` in
its top-level conftest.py, or ``pytest -p kpax.testing.pytest_plugin``; installing
kpax alone registers nothing (no ``pytest11`` entry point).

Fixtures:

- ``kafka`` (session, lazy): one broker with PLAINTEXT, SASL_PLAINTEXT (PLAIN,
  SCRAM-SHA-256/512, users in ``kafka.sasl_users``) and SSL (``kafka.ssl_cafile``)
  listeners, auto-create topics on. Backend per `kpax.testing.select_backend`.
- ``kafka_cluster3`` (session, lazy): three local brokers (node ids 1..3) that
  tests may kill, restart, pause and resume. Always the local JVM backend.
  Tests using it get the ``multibroker`` marker automatically.
- ``kafka_factory`` (module): ``kafka_factory(brokers=1, *, sasl=False, ssl=False,
  config=None) -> KafkaCluster`` for a broker with special settings, e.g.
  ``kafka_factory(config={"auto.create.topics.enable": "false"})``; stopped at
  the end of the module.
- ``fake_kafka`` (function): a :class:`kpax.testing.FakeKafka` -- an in-process
  Kafka on 127.0.0.1, no JVM, started in milliseconds -- stopped after the test.
  One broker by default; more with ``@pytest.mark.parametrize("fake_kafka", [3],
  indirect=True)`` (a broker count, or a dict of ``FakeKafka`` keyword
  arguments) or the marker ``@pytest.mark.fake_kafka(brokers=3, config={...})``.
  A request the fake failed to handle (a bug of the fake) fails the test.
- ``topic`` (function): ``topic(partitions=1, *, replication_factor=1,
  config=None, cluster=None) -> str`` creates a topic with a random name on
  *cluster* (default: the ``kafka`` fixture) and waits until every partition has
  a leader.

Marker ``kafka4``: the test needs a Kafka 4.0+ broker (KIP-848 consumer groups,
transactions v2, the 4.0 timestamp bounds) and is skipped, saying so, when
``KPAX_KAFKA_VERSION`` picks an older one (the broker matrix runs the suite on
3.9.2 too).

When a test that used a broker fails, the last lines of each broker's log are
added to its report ("kafka broker log" section). A test that asks the
cluster for what it cannot do (``NotAvailableHere``: pause a broker of a
shared ``KPAX_TEST_BOOTSTRAP`` cluster, a listener it was not described with)
is reported as skipped, saying why; ``kafka_factory`` skips at once there,
since a shared cluster cannot stand in for brokers of the test's own.

Imports: pytest, kpax.testing.errors and the standard library at import time;
kpax.testing's backends, kpax.testing.fake and kpax (the client, for
``kpax.Admin``) lazily inside the fixtures.
A project that opts in imports this module at every pytest start, on any OS: it
must stay cheap (a few ms) and import nothing platform-specific
(tests/unit/test_import_portable.py checks).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from kpax.testing.errors import NotAvailableHere

if TYPE_CHECKING:
    from kpax.testing.base import KafkaCluster
    from kpax.testing.fake import FakeKafka
    from kpax.testing.local import LocalCluster

__all__ = ["TopicFactory"]

TopicFactory = Callable[..., str]

_BROKER_FIXTURES = ("kafka", "kafka_cluster3", "kafka_factory")
# fixture name -> clusters it made (for log tails in failure reports)
_clusters: dict[str, list[KafkaCluster]] = {name: [] for name in _BROKER_FIXTURES}


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "slow: long-running test (still runs in make test)",
        "multibroker: needs a cluster of several brokers",
        "kafka4: needs Kafka 4.0+ behaviour (KIP-848 consumer groups, transactions v2, "
        "timestamp bounds); skipped when the suite's brokers are an older pinned version",
        "fake_kafka(**kwargs): keyword arguments of the fake_kafka fixture's FakeKafka "
        "(brokers=3, config={...}, topics={...}, seed=...)",
    ):
        config.addinivalue_line("markers", line)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("kafka4") is None:
        return
    if os.environ.get("KPAX_TEST_BOOTSTRAP"):
        return  # a running cluster of unknown version: let the test find out
    from kpax.testing.jars import is_kafka4, kafka_version

    version = kafka_version()
    if not is_kafka4(version):
        pytest.skip(
            "needs Kafka 4.0+ behaviour (KIP-848 consumer groups, transactions v2 or the "
            f"timestamp bounds); the suite's brokers are Kafka {version}"
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "kafka_cluster3" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.multibroker)


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    """The session's broker: PLAINTEXT + SASL_PLAINTEXT + SSL, auto-create topics on."""
    from kpax.testing.backends import start_kafka

    cluster = start_kafka(1, sasl=True, ssl=True)
    _clusters["kafka"].append(cluster)
    try:
        yield cluster
    finally:
        cluster.stop()
        _clusters["kafka"].remove(cluster)


@pytest.fixture(scope="session")
def kafka_cluster3() -> Iterator[LocalCluster]:
    """Three local brokers (node ids 1..3), for failure tests."""
    from kpax.testing.local import LocalCluster

    cluster = LocalCluster(3).start()
    _clusters["kafka_cluster3"].append(cluster)
    try:
        yield cluster
    finally:
        cluster.stop()
        _clusters["kafka_cluster3"].remove(cluster)


@pytest.fixture
def fake_kafka(request: pytest.FixtureRequest) -> Iterator[FakeKafka]:
    """An in-process Kafka (kpax.testing.FakeKafka), one broker unless parametrized."""
    from kpax.testing.fake import FakeKafka

    kwargs: dict[str, Any] = {}
    marker = request.node.get_closest_marker("fake_kafka")
    if marker is not None:
        kwargs.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, int):
        kwargs["brokers"] = param
    elif isinstance(param, dict):
        kwargs.update(param)
    with FakeKafka(**kwargs) as fake:
        yield fake
        errors = fake.call(lambda cluster: list(cluster.errors))
    if errors:
        pytest.fail("the fake Kafka failed to handle requests:\n" + "\n".join(errors))


@pytest.fixture(scope="module")
def kafka_factory() -> Iterator[Callable[..., KafkaCluster]]:
    """Start extra brokers with special settings; all are stopped after the module."""
    made: list[KafkaCluster] = []

    def factory(
        brokers: int = 1,
        *,
        sasl: bool = False,
        ssl: bool = False,
        config: dict[str, Any] | None = None,
    ) -> KafkaCluster:
        from kpax.testing.backends import select_backend, start_kafka

        if select_backend() == "existing":
            # A test asking for brokers of its own stops, kills, pauses or
            # reconfigures them: a shared cluster cannot stand in.
            pytest.skip(
                "needs Kafka brokers of its own; KPAX_TEST_BOOTSTRAP points at a shared cluster"
            )

        cluster = start_kafka(brokers, sasl=sasl, ssl=ssl, config=config)
        made.append(cluster)
        _clusters["kafka_factory"].append(cluster)
        return cluster

    try:
        yield factory
    finally:
        for cluster in made:
            cluster.stop()
            _clusters["kafka_factory"].remove(cluster)


def create_topic(
    cluster: KafkaCluster,
    partitions: int = 1,
    *,
    replication_factor: int = 1,
    config: dict[str, str] | None = None,
    name: str | None = None,
    timeout: float = 30.0,
) -> str:
    """Create a topic with ``kpax.Admin`` (random name unless given) and wait
    until every partition has a leader."""
    import uuid

    import kpax  # the client under test; imported here so kpax.testing stays importable alone

    name = name or f"t-{uuid.uuid4().hex[:12]}"
    with kpax.Admin(cluster.bootstrap) as admin:
        admin.create_topics(
            [
                kpax.NewTopic(
                    name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=config or {},
                )
            ],
            timeout=timeout,
        ).raise_for_errors()
        deadline = time.monotonic() + timeout
        while True:
            described = admin.describe_topics([name], timeout=timeout)
            if name in described.succeeded:
                parts = described[name].partitions
                if len(parts) == partitions and all(p.leader >= 0 for p in parts):
                    return name
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"topic {name} on {cluster.bootstrap}: no leaders after {timeout}s"
                )
            time.sleep(0.05)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> TopicFactory:
    """Factory: ``topic(partitions=1, *, replication_factor=1, config=None, cluster=None)``."""

    def make(
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
        cluster: KafkaCluster | None = None,
    ) -> str:
        target = cluster if cluster is not None else request.getfixturevalue("kafka")
        return create_topic(
            target, partitions, replication_factor=replication_factor, config=config
        )

    return make


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(NotAvailableHere):
        # What the cluster at hand cannot do (an existing cluster cannot pause a
        # broker): the test is skipped, saying why, not failed.
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")
        return
    if not report.failed:
        return
    used = getattr(item, "fixturenames", ())
    for name in _BROKER_FIXTURES:
        if name not in used:
            continue
        for cluster in _clusters[name]:
            try:
                tail = cluster.log_tail(None, 30)
            except Exception as exc:
                tail = f"(log unavailable: {exc})"
            if tail.strip():
                report.sections.append((f"kafka broker log ({name}, {cluster!r})", tail))
