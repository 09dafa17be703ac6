"""The classic member's join rounds against FakeKafka: a round that fails in any
way is tried again (the member's machine, kpax.consumer.classic_state, makes a
join due again whatever ended the round)."""

from __future__ import annotations

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
