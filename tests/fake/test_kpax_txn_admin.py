"""kpax's transactions and admin through FakeKafka: read_committed hides
aborted records, offsets committed in a transaction, fencing; topics, partitions,
configs, offsets and groups administered."""

from __future__ import annotations

import time

import pytest

import kpax
from kpax import TopicPartition as TP
from kpax.proto.records import decode_batches
from tests.wait import eventually


def _read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    tps = [TP(topic, p) for p in range(partitions)]
    out: list[bytes] = []
    with kpax.Consumer(bootstrap, isolation_level=isolation) as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        deadline = time.monotonic() + 10
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            out.extend(r.value for r in c.poll(timeout=0.2))
    return sorted(out)


@pytest.mark.parametrize("tv", ["1", "2"])
def test_read_committed_hides_aborted(fake_kafka, tv):
    fake_kafka.call(lambda c: c.state.config.update({"transaction.version": tv}))
    fake_kafka.create_topic("tx", 2)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id="tid") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send("tx", b"c%d" % i, partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send("tx", b"a%d" % i, partition=i % 2)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send("tx", b"last", partition=0)
        p.commit_transaction()
    assert _read(fake_kafka.bootstrap, "tx", 2, "read_committed") == sorted(
        [b"c%d" % i for i in range(6)] + [b"last"]
    )
    everything = _read(fake_kafka.bootstrap, "tx", 2, "read_uncommitted")
    assert sum(v.startswith(b"a") for v in everything) == 4
    # three markers in partition 0: commit, abort, commit
    data = fake_kafka.call(lambda c: [b.data for b in c.partition("tx", 0).log.batches])
    markers = [b for d in data for b in decode_batches(d) if b.is_control]
    assert [next(iter(m)).type for m in markers] == [1, 0, 1]


def test_open_transaction_holds_the_last_stable_offset(fake_kafka):
    fake_kafka.create_topic("lso", 1)
    tp = TP("lso", 0)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id="t-lso") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("lso", b"pending", partition=0)
        p.flush()
        with kpax.Consumer(fake_kafka.bootstrap, isolation_level="read_committed") as c:
            assert c.end_offsets([tp]) == {tp: 0}
        with kpax.Consumer(fake_kafka.bootstrap) as c:
            assert c.end_offsets([tp]) == {tp: 1}
        p.commit_transaction()
    with kpax.Consumer(fake_kafka.bootstrap, isolation_level="read_committed") as c:
        assert c.end_offsets([tp]) == {tp: 2}  # the record and the marker


def test_offsets_in_a_transaction(fake_kafka):
    fake_kafka.create_topic("src", 1)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id="t-off") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("src", b"x", partition=0)
        p.send_offsets_to_transaction(
            {TP("src", 0): kpax.OffsetAndMetadata(7, "m")}, kpax.ConsumerGroupMetadata("cg")
        )
        assert fake_kafka.committed("cg") == {}
        p.commit_transaction()
    assert fake_kafka.committed("cg") == {("src", 0): 7}


def test_zombie_is_fenced(fake_kafka):
    fake_kafka.create_topic("z", 1)
    old = kpax.Producer(fake_kafka.bootstrap, transactional_id="tz")
    new = kpax.Producer(fake_kafka.bootstrap, transactional_id="tz")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("z", b"old", partition=0)
        old.flush()
        new.init_transactions()  # aborts the old one's transaction, bumps the epoch
        with pytest.raises(kpax.KafkaError):
            old.send("z", b"late", partition=0).result(10)
            old.commit_transaction()
    finally:
        old.close(5)
        new.close(5)
    assert _read(fake_kafka.bootstrap, "z", 1, "read_committed") == []


def test_admin_topics_and_configs(fake_kafka):
    with kpax.Admin(fake_kafka.bootstrap) as admin:
        admin.create_topics(
            [
                kpax.NewTopic(
                    "adm", num_partitions=2, replication_factor=1, configs={"retention.ms": "1000"}
                )
            ]
        ).raise_for_errors()
        assert "adm" in admin.list_topics()
        described = admin.describe_topics(["adm"])
        assert len(described["adm"].partitions) == 2
        admin.create_partitions({"adm": 3}).raise_for_errors()
        assert fake_kafka.topics()["adm"] == 3
        res = kpax.ConfigResource(kpax.ConfigResourceType.TOPIC, "adm")
        configs = admin.describe_configs([res])[res]
        assert configs["retention.ms"].value == "1000"
        assert configs["cleanup.policy"].value == "delete"
        admin.incremental_alter_configs(
            {res: [kpax.AlterConfigOp("retention.ms", "5000")]}
        ).raise_for_errors()
        assert admin.describe_configs([res])[res]["retention.ms"].value == "5000"
        result = admin.create_topics([kpax.NewTopic("adm", num_partitions=1)])
        with pytest.raises(kpax.KafkaError):
            result.raise_for_errors()
        admin.delete_topics(["adm"]).raise_for_errors()
        assert "adm" not in admin.list_topics()
        assert admin.describe_cluster().cluster_id


def test_admin_offsets_and_groups(fake_kafka):
    fake_kafka.create_topic("o", 1)
    with kpax.Producer(fake_kafka.bootstrap) as p:
        for i in range(10):
            p.send("o", b"%d" % i, partition=0)
    tp = TP("o", 0)
    with kpax.Consumer(fake_kafka.bootstrap, group_id="og", enable_auto_commit=False) as c:
        c.assign([tp])
        c.commit({tp: kpax.OffsetAndMetadata(4, "")})
    with kpax.Admin(fake_kafka.bootstrap) as admin:
        offs = admin.list_offsets({tp: "latest"})
        assert offs[tp].offset == 10
        offs = admin.list_offsets({tp: "earliest"})
        assert offs[tp].offset == 0
        admin.delete_records({tp: 3}).raise_for_errors()
        assert admin.list_offsets({tp: "earliest"})[tp].offset == 3
        assert admin.list_group_offsets("og")[tp].offset == 4
        assert "og" in {g.group_id for g in admin.list_groups()}
        admin.delete_groups(["og"]).raise_for_errors()
        eventually(lambda: "og" not in {g.group_id for g in admin.list_groups()}, 5)


def test_a_send_outside_a_transaction_says_to_begin_one(fake_kafka) -> None:
    fake_kafka.create_topic("tx-hint", 1)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id="hint") as p:
        with pytest.raises(kpax.IllegalStateError, match=r"init_transactions\(\) first"):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(kpax.IllegalStateError, match=r"begin_transaction\(\) first"):
            p.send("tx-hint", b"x")


@pytest.mark.parametrize("tv", ["1", "2"])
def test_a_commit_that_timed_out_is_called_again_and_completes(fake_kafka, tv):
    """As in the Java client: commit_transaction() that timed out (EndTxn slow to
    answer) may be called again, and it finishes the same transaction (it was an
    IllegalStateError, "the producer is committing", and the producer was stuck)."""
    fake_kafka.call(lambda c: c.state.config.update({"transaction.version": tv}))
    fake_kafka.create_topic("slow-end", 1)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id=f"t-slow-{tv}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("slow-end", b"once", partition=0)
        slow = fake_kafka.inject("EndTxn", delay_ms=3000)
        with pytest.raises(kpax.KafkaTimeoutError):
            p.commit_transaction(timeout=0.5)
        eventually(lambda: slow.hits == 1, timeout=10)
        p.commit_transaction(timeout=30)
        p.begin_transaction()  # the producer goes on
        p.send("slow-end", b"twice", partition=0)
        p.commit_transaction()
    assert _read(fake_kafka.bootstrap, "slow-end", 1, "read_committed") == [b"once", b"twice"]


@pytest.mark.fake_kafka(brokers=3)
def test_broker_configs_go_to_each_broker_at_once(fake_kafka):
    """describe_configs of three brokers sends each broker its own request (the
    ToNode route), all at once: three slow brokers cost one delay, not three."""
    with kpax.Admin(fake_kafka.bootstrap) as admin:
        ids = [b.node_id for b in admin.describe_cluster().brokers]
        assert len(ids) == 3
        faults = {
            i: fake_kafka.inject("DescribeConfigs", delay_ms=1500, broker=i, times=None)
            for i in ids
        }
        resources = [kpax.ConfigResource(kpax.ConfigResourceType.BROKER, str(i)) for i in ids]
        started = time.monotonic()
        result = admin.describe_configs(resources)
        took = time.monotonic() - started
        result.raise_for_errors()
        assert all(result[r] for r in resources)
        assert {i: f.hits for i, f in faults.items()} == dict.fromkeys(ids, 1)
        assert took < 3.5, f"three brokers answered one after another ({took:.1f}s)"


@pytest.mark.parametrize("tv", ["1", "2"])
def test_after_a_failed_batch_the_aborted_transaction_leaves_no_sequence_gap(fake_kafka, tv):
    """A batch of a transaction that failed without an answer (its connection
    dropped before the broker applied it, until its delivery timeout) took
    sequence numbers the broker never saw, and the producer cannot know it.
    Aborting must start the next transaction clean (KIP-360: the abort bumps the
    epoch, so sequences restart), else every later batch to the partition fails
    with OUT_OF_ORDER_SEQUENCE_NUMBER and every transaction aborts (seen in the
    transaction simulation, seed 167). Transactions v2 bump the epoch at every
    EndTxn anyway."""
    fake_kafka.call(lambda c: c.state.config.update({"transaction.version": tv}))
    fake_kafka.create_topic("gap", 1)
    with kpax.Producer(
        fake_kafka.bootstrap,
        transactional_id=f"t-gap-{tv}",
        linger_ms=0,
        request_timeout_ms=500,
        delivery_timeout_ms=1500,
        retry_backoff_ms=50,
    ) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("gap", b"before", partition=0).result(10)
        lost = fake_kafka.inject("Produce", drop="before", times=None)
        with pytest.raises(kpax.KafkaError):
            p.send("gap", b"lost", partition=0).result(10)
        lost.remove()
        with pytest.raises(kpax.KafkaError):
            p.commit_transaction()  # only abort is left
        p.abort_transaction()
        for i in range(3):
            p.begin_transaction()
            p.send("gap", b"after-%d" % i, partition=0)
            p.commit_transaction(timeout=10)
    assert _read(fake_kafka.bootstrap, "gap", 1, "read_committed") == sorted(
        [b"after-0", b"after-1", b"after-2"]
    )


@pytest.mark.parametrize("tv", ["1", "2"])
def test_a_transaction_whose_first_batch_was_refused_is_aborted_and_the_next_commits(
    fake_kafka, tv
):
    """The first batch of a transaction refused (nothing added to it on the
    broker), after an earlier committed transaction: the abort succeeds and the
    next transaction commits, as on a Kafka 4 broker (transactions v2: the
    coordinator ends it with an epoch bump; FakeKafka answered INVALID_TXN_STATE)."""
    fake_kafka.call(lambda c: c.state.config.update({"transaction.version": tv}))
    fake_kafka.create_topic("refused", 1)
    with kpax.Producer(fake_kafka.bootstrap, transactional_id=f"t-ref-{tv}", linger_ms=0) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("refused", b"first", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        fake_kafka.inject("Produce", error="MESSAGE_TOO_LARGE", times=1)
        with pytest.raises(kpax.KafkaError, match="MESSAGE_TOO_LARGE"):
            p.send("refused", b"refused", partition=0).result(10)
        p.abort_transaction()
        p.begin_transaction()
        p.send("refused", b"next", partition=0)
        p.commit_transaction()
    assert _read(fake_kafka.bootstrap, "refused", 1, "read_committed") == [b"first", b"next"]
