"""kpax's consumer rebalances in the background, so the group can give a
partition to another member while the application still works on records it
polled. Their offsets must then not be committed: neither in a transaction
(``group_metadata()`` gives the generation the records were handed out under,
and the broker refuses it) nor by ``commit(offsets)`` (refused: the partition is
no longer this member's). The other member's committed offset stays where it
is. (The real-broker twins, in tests/integration/test_transactions.py and
tests/integration/test_consumer_group.py, run the same checks on Kafka.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

import kpax
import kpax.errors
from kpax import TopicPartition as TP
from tests.wait import eventually


def _poll_some(consumer: kpax.Consumer) -> list[kpax.ConsumerRecord]:
    got: list[kpax.ConsumerRecord] = []

    def step() -> bool:
        got.extend(consumer.poll(timeout=0.1))
        return bool(got)

    eventually(step, timeout=20)
    return got


@contextlib.contextmanager
def rebalanced_while_processing(
    bootstrap: str, src: str, group_id: str
) -> Iterator[tuple[kpax.Consumer, kpax.Consumer, list[kpax.ConsumerRecord], TP]]:
    """Member a polls records of ``src`` (2 partitions, both a's), then b joins and
    a rebalances in the background (it does not poll): yields (a, b, a's records,
    the partition b took)."""
    with kpax.Producer(bootstrap) as p:
        for i in range(8):
            p.send(src, b"v%d" % i, partition=i % 2)
    group = {
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "heartbeat_interval_ms": 50,
        "partition_assignment_strategy": ["range"],
    }
    with kpax.Consumer(bootstrap, **group) as a:
        a.subscribe([src])
        eventually(lambda: len(a.wait_for_assignment(timeout=20)) == 2, timeout=20)
        records = _poll_some(a)
        with kpax.Consumer(bootstrap, **group) as b:
            b.subscribe([src])
            eventually(lambda: len(b.wait_for_assignment(timeout=20)) == 1, timeout=20)
            eventually(lambda: len(a.assignment()) == 1, timeout=20)
            taken = next(iter(b.assignment()))
            yield a, b, records, taken


def check_transaction_fenced(bootstrap: str, src: str, group_id: str) -> None:
    with rebalanced_while_processing(bootstrap, src, group_id) as (a, b, records, taken):
        handed_out = a.group_metadata()
        with kpax.Producer(bootstrap, transactional_id=f"{group_id}-a") as p:
            p.init_transactions()
            p.begin_transaction()
            for r in records:
                p.send(src, r.value, partition=0)
            offsets = {TP(r.topic, r.partition): r.offset + 1 for r in records}
            offsets.setdefault(taken, 4)
            with pytest.raises(kpax.KafkaError) as failed:
                p.send_offsets_to_transaction(offsets, a.group_metadata())
                p.commit_transaction()
            assert isinstance(failed.value, kpax.errors.IllegalGenerationError)
            assert "the group rebalanced" in str(failed.value)
            p.abort_transaction()
        assert b.committed([taken])[taken] is None  # nothing committed for b's partition
        # the generation a's records went out under, not the one a is in now
        assert a.group_metadata() == handed_out


def check_commit_refused(bootstrap: str, src: str, group_id: str) -> None:
    with rebalanced_while_processing(bootstrap, src, group_id) as (a, b, records, taken):
        offsets = {TP(r.topic, r.partition): r.offset + 1 for r in records}
        offsets.setdefault(taken, 4)
        with pytest.raises(kpax.CommitFailedError, match=f"{taken.topic}-{taken.partition}"):
            a.commit(offsets)
        assert b.committed([taken])[taken] is None
        kept = next(iter(a.assignment()))
        a.commit({kept: offsets.get(kept, 0)})  # a's own partition: committed
        assert a.committed([kept])[kept] is not None


def test_a_rebalance_while_processing_fences_the_transactions_offsets(fake_kafka):
    fake_kafka.create_topic("src", 2)
    check_transaction_fenced(fake_kafka.bootstrap, "src", "app")


def test_a_rebalance_while_processing_refuses_commits_of_partitions_given_away(fake_kafka):
    fake_kafka.create_topic("src", 2)
    check_commit_refused(fake_kafka.bootstrap, "src", "app")


def test_a_commit_waiting_behind_another_keeps_the_generation_it_was_chosen_under(fake_kafka):
    """Commits go out one at a time. One queued behind a commit that retries (the
    coordinator loading) while the group rebalances must carry the generation its
    offsets were chosen under, so the broker refuses it for a partition given
    away meanwhile -- not the newer one, which it would accept."""
    fake_kafka.create_topic("src", 2)
    with kpax.Producer(fake_kafka.bootstrap) as p:
        for i in range(8):
            p.send("src", b"v%d" % i, partition=i % 2)
    group = {
        "group_id": "app",
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "heartbeat_interval_ms": 50,
        "retry_backoff_ms": 20,
        "partition_assignment_strategy": ["range"],
    }
    with kpax.Consumer(fake_kafka.bootstrap, **group) as a:
        a.subscribe(["src"])
        eventually(lambda: len(a.wait_for_assignment(timeout=20)) == 2, timeout=20)
        _poll_some(a)
        both = [TP("src", 0), TP("src", 1)]
        loading = fake_kafka.inject(
            "OffsetCommit", error="COORDINATOR_LOAD_IN_PROGRESS", times=None
        )
        first = a.commit_async(dict.fromkeys(both, 1))
        eventually(lambda: loading.hits >= 1, timeout=20)
        second = a.commit_async(dict.fromkeys(both, 3))  # waits for the first
        with kpax.Consumer(fake_kafka.bootstrap, **group) as b:
            b.subscribe(["src"])
            eventually(lambda: len(b.wait_for_assignment(timeout=20)) == 1, timeout=20)
            eventually(lambda: len(a.assignment()) == 1, timeout=20)
            taken = next(iter(b.assignment()))
            loading.remove()
            for f in (first, second):
                f.result(30)  # (a failed commit_async is logged, as its callback is None)
            assert b.committed([taken])[taken] is None
