"""Authorization failures reach the consumer's caller as clear errors naming
the topic or group (a broker with StandardAuthorizer; user alice over SASL)."""

from __future__ import annotations

import uuid

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.admin import AclBinding, AclOperation, ResourceType
from tests.integration.test_consumer import produce
from tests.wait import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(kafka_factory):
    return kafka_factory(
        sasl=True,
        config={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    )


def _alice(cluster, **kw) -> kpax.Consumer:
    return kpax.Consumer(
        cluster.listener("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=cluster.sasl_users["alice"],
        default_api_timeout_ms=5000,
        auto_offset_reset="earliest",
        **kw,
    )


def _wait_for_acls(cluster, *topics: str) -> None:
    """ACLs reach the authorizer through the metadata log: wait until alice may
    see ``topics``."""

    def visible() -> bool:
        with _alice(cluster) as c:
            try:
                return all(c.partitions_for_topic(t) for t in topics)
            except kpax.KafkaError:
                return False

    eventually(visible, timeout=30)


def test_topic_and_group_authorization_failures(secured):
    names = [f"auth-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    none, describe_only, readable = names
    with kpax.Admin(secured.bootstrap) as a:
        a.create_topics([kpax.NewTopic(n, 1, 1) for n in names]).raise_for_errors()
        a.create_acls(
            [
                AclBinding(ResourceType.TOPIC, describe_only, "User:alice", AclOperation.DESCRIBE),
                AclBinding(ResourceType.TOPIC, readable, "User:alice", AclOperation.READ),
            ]
        ).raise_for_errors()
    for n in names:
        produce(secured.bootstrap, n, 5)
    _wait_for_acls(secured, describe_only, readable)
    with _alice(secured) as c:
        with pytest.raises(kpax.errors.TopicAuthorizationFailedError, match=none):
            c.assign([TP(none, 0)])
        c.assign([TP(describe_only, 0)])
        with pytest.raises(
            kpax.errors.TopicAuthorizationFailedError, match=f"partition {describe_only}-0"
        ):
            for _ in range(20):
                c.poll(0.5)
        c.assign([TP(readable, 0)])
        got = []
        for _ in range(20):
            got += c.poll(0.5)
            if len(got) == 5:
                break
        assert len(got) == 5
    group = "noacl-" + uuid.uuid4().hex[:6]
    with _alice(secured, group_id=group) as c:
        c.subscribe([readable])
        with pytest.raises(kpax.errors.GroupAuthorizationFailedError, match=group):
            for _ in range(20):
                c.poll(0.5)
