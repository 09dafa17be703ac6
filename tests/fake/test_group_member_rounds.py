"""The classic member's join rounds against FakeKafka: a round that fails in any
way is tried again (the member's machine, kpax.consumer.classic_state, makes a
join due again whatever ended the round)."""

from __future__ import annotations

import pytest

import kpax
from tests.wait import eventually


def test_a_join_round_that_gets_no_answer_is_tried_again(fake_kafka) -> None:
    """JoinGroup's connection drops for longer than the API timeout: the round
    fails with no answer to read an error code from, and the member joins again
    once the coordinator answers (it used to wait for a wake-up that never came,
    outside the group, reading nothing)."""
    fake_kafka.create_topic("t", 2)
    # each round's JoinGroup is retried every 50 ms for 1 s: 60 drops fail a round or two
    fault = fake_kafka.inject("JoinGroup", drop="before", times=60)
    with kpax.Consumer(
        fake_kafka.bootstrap,
        group_id="g-rounds",
        default_api_timeout_ms=1000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=50,
    ) as c:
        c.subscribe(["t"])
        eventually(lambda: fault.hits == 60, timeout=30)
        assert c.wait_for_assignment(timeout=20) == {
            kpax.TopicPartition("t", 0),
            kpax.TopicPartition("t", 1),
        }


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_member_out_for_a_late_poll_rejoins_at_its_next_poll(fake_kafka, protocol) -> None:
    """No poll within max_poll_interval_ms: the member leaves (a commit is refused:
    not in the group), and the next poll -- on the application's thread -- brings
    it back into the group with its partitions."""
    fake_kafka.create_topic("t", 2)
    with kpax.Consumer(
        fake_kafka.bootstrap,
        group_id=f"g-late-{protocol}",
        group_protocol=protocol,
        enable_auto_commit=False,
        max_poll_interval_ms=1000,
        heartbeat_interval_ms=100,
    ) as c:
        c.subscribe(["t"])
        both = {kpax.TopicPartition("t", 0), kpax.TopicPartition("t", 1)}
        assert c.wait_for_assignment(timeout=20) == both

        def refused() -> bool:
            try:
                c.commit({kpax.TopicPartition("t", 0): 0})
            except kpax.CommitFailedError:
                return True
            return False

        eventually(refused, timeout=20)  # out of the group: no poll for 1 s
        c.poll(0.1)  # rejoins
        eventually(lambda: c.wait_for_assignment(timeout=5) == both, timeout=20)
        c.commit({kpax.TopicPartition("t", 0): 0})  # in the group again
