"""What a share worker's end accepts and releases (implicit acknowledgement), on a real
broker: an exception leaving the docs' loop (iteration, poll, asyncio) and a plain
close after a loop. The records a worker moved past are accepted; the record in its
hand, the last poll's records and everything acquired but not handed out come back
at once (released, delivery count 2), well before their 30 s locks end."""

from __future__ import annotations

import asyncio

import pytest

import kpax
from kpax.structs import TopicPartition
from tests.integration.share_helpers import new_topic, produce, read_until, share_group

pytestmark = [pytest.mark.integration, pytest.mark.kafka4]

#: Records in the one batch each test produces (offsets 0-9).
BATCH = 10


class Crash(Exception):
    """The application's own failure while processing a record."""


@pytest.fixture()
def admin(kafka):  # type: ignore[no-untyped-def]
    with kpax.Admin(kafka.bootstrap) as a:
        yield a


@pytest.fixture()
def setup(kafka, admin):  # type: ignore[no-untyped-def]
    """A topic holding one batch of BATCH records and a share group reading it from the
    start with the default 30 s lock: (topic, group)."""
    topic = new_topic(admin, 1)
    group, lock = share_group(admin)
    assert lock == 30000
    with kpax.Producer(kafka.bootstrap, linger_ms=1000) as p:
        for i in range(BATCH):
            p.send(topic, b"%d" % i, partition=0)
        p.flush()  # one batch: a share fetch acquires all BATCH records at once
    return topic, group


def next_member_gets(bootstrap: str, topic: str, group: str) -> list[tuple[int, int]]:
    """What a new member of ``group`` is given now, up to a sentinel produced after the
    batch: ``(offset, delivery_count)`` in offset order (a record still locked would
    come only after 30 s, so it is missing here)."""
    produce(bootstrap, topic, [b"sentinel"], partition=0)
    with kpax.ShareConsumer(bootstrap, group_id=group) as c:
        c.subscribe([topic])
        got = read_until(c, lambda got: any(r.value == b"sentinel" for r in got), timeout=20)
        assert c.commit() == {TopicPartition(topic, 0): None}
    return sorted((r.offset, r.delivery_count) for r in got if r.value != b"sentinel")


def back(offsets: range) -> list[tuple[int, int]]:
    return [(o, 2) for o in offsets]


def test_crash_in_the_docs_loop_releases_the_record_in_hand_and_the_rest(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    processed: list[int] = []

    def worker_main() -> None:  # the loop of docs/share-groups.md
        with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
            worker.subscribe([topic])
            for record in worker:
                if record.offset == 2:
                    raise Crash(record.offset)
                processed.append(record.offset)

    with pytest.raises(Crash):
        worker_main()
    assert processed == [0, 1]
    # 0 and 1 were processed: accepted, never again; 2 (in hand) and 3-9 (never
    # handed out) are released: another member gets them at once
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(2, BATCH))


def test_crash_in_a_poll_loop_releases_the_last_poll(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    processed: list[int] = []

    def worker_main() -> None:
        with kpax.ShareConsumer(kafka.bootstrap, group_id=group, max_poll_records=1) as worker:
            worker.subscribe([topic])
            while True:
                for record in worker.poll(1.0):
                    if record.offset == 2:
                        raise Crash(record.offset)
                    processed.append(record.offset)

    with pytest.raises(Crash):
        worker_main()
    assert processed == [0, 1]
    # 0 and 1: accepted by the polls after them; 2 (the last poll's) and 3-9 released
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(2, BATCH))


def test_crash_in_a_poll_loop_cannot_tell_which_of_a_poll_was_processed(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup

    def worker_main() -> None:
        with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
            worker.subscribe([topic])
            while True:
                records = worker.poll(1.0)
                for record in records:
                    if record.offset == 2:
                        raise Crash(len(records))

    with pytest.raises(Crash):
        worker_main()
    # the whole last poll comes back (0 and 1 a second time: at least once, as in Java)
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(BATCH))


def test_crash_in_the_asyncio_loop_releases_the_record_in_hand_and_the_rest(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    processed: list[int] = []

    async def main() -> None:
        async with kpax.aio.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
            worker.subscribe([topic])
            async for record in worker:
                if record.offset == 2:
                    raise Crash(record.offset)
                processed.append(record.offset)

    with pytest.raises(Crash):
        asyncio.run(main())
    assert processed == [0, 1]
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(2, BATCH))


def test_close_after_a_loop_accepts_what_the_loop_moved_past(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    processed: list[int] = []
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
        worker.subscribe([topic])
        for record in worker:
            if record.offset == 5:  # not for this worker: leave it to the others
                break
            processed.append(record.offset)
    assert processed == [0, 1, 2, 3, 4]
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(5, BATCH))


def test_a_poll_after_leaving_the_loop_returns_what_it_never_handed_out(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
        worker.subscribe([topic])
        for record in worker:
            if record.offset == 3:
                break
        rest = worker.poll(5.0)  # accepts 0-3: the loop handed them out
        assert [(r.offset, r.delivery_count) for r in rest] == [(o, 1) for o in range(4, BATCH)]
        assert worker.commit() == {TopicPartition(topic, 0): None}
    assert next_member_gets(kafka.bootstrap, topic, group) == []


def test_close_after_an_asyncio_loop_accepts_what_the_loop_moved_past(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup

    async def main() -> list[int]:
        processed: list[int] = []
        async with kpax.aio.ShareConsumer(kafka.bootstrap, group_id=group) as worker:
            worker.subscribe([topic])
            async for record in worker:
                if record.offset == 5:
                    break
                processed.append(record.offset)
        return processed

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(5, BATCH))


def test_close_after_a_poll_loop_releases_the_last_poll_unless_committed(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group, max_poll_records=4) as worker:
        worker.subscribe([topic])
        got = read_until(worker, lambda got: len(got) >= 8)  # polls of 0-3 and 4-7
    assert [r.offset for r in got] == list(range(8))
    # 0-3 accepted by the second poll; 4-7 (the last poll, never followed by a poll or
    # a commit) released by close, as Java's KafkaShareConsumer does; 8-9 never handed out
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(4, BATCH))


def test_commit_then_close_accepts_the_last_poll(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group, max_poll_records=4) as worker:
        worker.subscribe([topic])
        got = read_until(worker, lambda got: len(got) >= 8)
        assert worker.commit() == {TopicPartition(topic, 0): None}
    assert [r.offset for r in got] == list(range(8))
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(8, BATCH))


def test_explicit_mode_close_accepts_only_what_was_acknowledged(kafka, setup) -> None:  # type: ignore[no-untyped-def]
    topic, group = setup

    def worker_main() -> None:
        with kpax.ShareConsumer(
            kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
        ) as worker:
            worker.subscribe([topic])
            for record in worker:
                if record.offset == 2:
                    raise Crash(record.offset)
                worker.acknowledge(record, kpax.AcknowledgeType.ACCEPT)

    with pytest.raises(Crash):
        worker_main()
    assert next_member_gets(kafka.bootstrap, topic, group) == back(range(2, BATCH))
