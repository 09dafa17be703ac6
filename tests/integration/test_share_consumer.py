"""kpax.ShareConsumer on a real broker: members sharing partitions, acknowledgement
types, lock timeouts, delivery limits, close and misuse (KIP-932 share groups)."""

from __future__ import annotations

import asyncio
import collections
import threading
import time

import pytest

import kpax
from kpax import AcknowledgeType
from kpax.errors import IllegalStateError
from kpax.structs import TopicPartition
from tests.integration.share_helpers import (
    SHORT_LOCK_MS,
    new_topic,
    produce,
    read_until,
    share_group,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka4]


@pytest.fixture()
def admin(kafka):  # type: ignore[no-untyped-def]
    with kpax.Admin(kafka.bootstrap) as a:
        yield a


def values(n: int, start: int = 0) -> list[bytes]:
    return [b"%d" % i for i in range(start, start + n)]


def test_three_members_share_one_partition(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    total = 3000
    produce(kafka.bootstrap, topic, values(total))
    accepted: dict[int, list[int]] = {}
    lock = threading.Lock()
    seen: collections.Counter[int] = collections.Counter()
    errors: list[BaseException] = []
    done = threading.Event()

    def member(i: int) -> None:
        try:
            with kpax.ShareConsumer(kafka.bootstrap, group_id=group, max_poll_records=50) as c:
                c.subscribe([topic])
                mine = accepted.setdefault(i, [])
                deadline = time.monotonic() + 90
                while not done.is_set() and time.monotonic() < deadline:
                    recs = c.poll(0.2)
                    if recs:
                        time.sleep(0.02)  # the work a worker does per batch
                    with lock:
                        for r in recs:
                            seen[r.offset] += 1
                            mine.append(r.offset)
                        if len(seen) >= total:
                            done.set()
                c.commit()
        except BaseException as exc:
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert set(seen) == set(range(total))
    assert max(seen.values()) == 1, [o for o, n in seen.items() if n > 1][:10]
    busy = [i for i, offs in accepted.items() if offs]
    assert len(busy) >= 2, {i: len(o) for i, o in accepted.items()}


def test_release_redelivers_and_reject_never_again(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, values(10))
    with kpax.ShareConsumer(
        kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        c.subscribe([topic])
        first = read_until(c, lambda got: len(got) >= 10)
        assert all(r.delivery_count == 1 for r in first)
        for r in first:
            kind = {3: AcknowledgeType.RELEASE, 4: AcknowledgeType.REJECT}.get(
                r.offset, AcknowledgeType.ACCEPT
            )
            c.acknowledge(r, kind)
        again = read_until(c, lambda got: any(r.offset == 3 for r in got))
        assert [(r.offset, r.delivery_count) for r in again] == [(3, 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        # offset 4 was rejected: a later record arrives, offset 4 never again
        produce(kafka.bootstrap, topic, [b"sentinel"])
        later = read_until(c, lambda got: any(r.value == b"sentinel" for r in got))
        for r in later:
            c.acknowledge(r)
        assert 4 not in {r.offset for r in later}
        assert c.commit() == {TopicPartition(topic, 0): None}


def test_lock_timeout_redelivers_to_another_member_then_delivery_limit_archives(
    kafka, admin
) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, lock_ms = share_group(admin, lock_ms=SHORT_LOCK_MS, delivery_limit=2)
    produce(kafka.bootstrap, topic, values(5))
    explicit = {"share_acknowledgement_mode": "explicit"}
    with (
        kpax.ShareConsumer(kafka.bootstrap, group_id=group, **explicit) as holder,
        kpax.ShareConsumer(kafka.bootstrap, group_id=group, **explicit) as other,
    ):
        holder.subscribe([topic])
        held = read_until(holder, lambda got: len(got) >= 5)  # and never acknowledged
        assert {r.delivery_count for r in held} == {1}
        t0 = time.monotonic()
        other.subscribe([topic])
        second = read_until(other, lambda got: len(got) >= 5, timeout=lock_ms / 1000 + 60)
        assert time.monotonic() - t0 >= lock_ms / 1000 * 0.5
        assert sorted(r.offset for r in second) == [0, 1, 2, 3, 4]
        assert {r.delivery_count for r in second} == {2}
        for r in second:
            other.acknowledge(r, AcknowledgeType.RELEASE)
        other.commit()
        # released at the delivery limit (2): archived, not delivered a third time
        produce(kafka.bootstrap, topic, [b"sentinel"])
        rest = read_until(other, lambda got: any(r.value == b"sentinel" for r in got))
        assert [r.value for r in rest] == [b"sentinel"]
        other.acknowledge(rest[0])


def test_renew_extends_the_lock(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, lock_ms = share_group(admin, lock_ms=SHORT_LOCK_MS)
    lock = lock_ms / 1000
    produce(kafka.bootstrap, topic, [b"slow"])
    explicit = {"share_acknowledgement_mode": "explicit"}
    with (
        kpax.ShareConsumer(kafka.bootstrap, group_id=group, **explicit) as worker,
        kpax.ShareConsumer(kafka.bootstrap, group_id=group, **explicit) as other,
    ):
        worker.subscribe([topic])
        (rec,) = read_until(worker, lambda got: len(got) >= 1)
        other.subscribe([topic])
        # hold it for three lock durations, renewing twice per lock duration
        end = time.monotonic() + 3 * lock
        while time.monotonic() < end:
            worker.acknowledge(rec, AcknowledgeType.RENEW)
            assert worker.commit()[TopicPartition(topic, 0)] is None
            stolen = other.poll(lock / 2)
            assert stolen == [], stolen
        worker.acknowledge(rec, AcknowledgeType.ACCEPT)
        assert worker.commit() == {TopicPartition(topic, 0): None}
        assert other.poll(lock * 1.5) == []


def test_close_releases_at_once(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)  # the default lock: 30 s
    produce(kafka.bootstrap, topic, values(20))
    first = kpax.ShareConsumer(
        kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    )
    first.subscribe([topic])
    held = read_until(first, lambda got: len(got) >= 20)
    first.close()
    t0 = time.monotonic()
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as second:
        second.subscribe([topic])
        again = read_until(second, lambda got: len(got) >= 20, timeout=25)
    assert time.monotonic() - t0 < 25  # well before the 30 s lock would end
    assert sorted(r.offset for r in again) == sorted(r.offset for r in held)
    assert {r.delivery_count for r in again} == {2}


def test_implicit_mode_accepts_on_next_poll_and_commit(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, values(100))
    results: list[tuple[dict[TopicPartition, set[int]], BaseException | None]] = []
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group, max_poll_records=10) as c:
        threads: set[int] = set()

        def on_acks(offs: dict[TopicPartition, set[int]], err: BaseException | None) -> None:
            threads.add(threading.get_ident())
            results.append((offs, err))

        c.set_acknowledgement_commit_callback(on_acks)
        c.subscribe([topic])
        got = read_until(c, lambda got: len(got) >= 100)
        with pytest.raises(IllegalStateError, match="explicit"):
            c.acknowledge(got[0])
        assert c.commit() == {TopicPartition(topic, 0): None}
    assert sorted(r.offset for r in got) == list(range(100))
    assert threads == {threading.get_ident()}  # run on the application's thread
    acked = set().union(*(o.get(TopicPartition(topic, 0), set()) for o, e in results if e is None))
    assert acked == set(range(100))
    # all accepted: a new member of the group gets nothing of them
    produce(kafka.bootstrap, topic, [b"sentinel"])
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as c2:
        c2.subscribe([topic])
        later = read_until(c2, lambda got: any(r.value == b"sentinel" for r in got))
    assert [r.value for r in later] == [b"sentinel"]


def test_explicit_mode_misuse_is_refused(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, values(3))
    with kpax.ShareConsumer(
        kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        with pytest.raises(IllegalStateError, match="not subscribed"):
            c.poll(0)
        c.subscribe([topic])
        got = read_until(c, lambda got: len(got) >= 3)
        c.acknowledge(got[0])
        with pytest.raises(IllegalStateError, match="already acknowledged"):
            c.acknowledge(got[0])
        with pytest.raises(IllegalStateError, match="2 records the last poll returned"):
            c.poll(0)
        with pytest.raises(IllegalStateError, match="not returned by a poll"):
            c.acknowledge(topic, 0, 999)
        with pytest.raises(ValueError, match="unknown acknowledge type"):
            c.acknowledge(got[1], "later")
        # a bool is not partition 0, and a record is a record a poll returned
        with pytest.raises(TypeError, match="partition must be an int, got bool False"):
            c.acknowledge(topic, False, got[1].offset, "release")
        with pytest.raises(TypeError, match="offset must be an int, got bool True"):
            c.acknowledge(topic, 0, True, "release")
        with pytest.raises(TypeError, match="got record=dict"):
            c.acknowledge(got[1]._asdict(), "release")  # type: ignore[arg-type]
        c.acknowledge(topic, 0, got[1].offset, "release")
        c.acknowledge(got[2], AcknowledgeType.REJECT)
        again = read_until(c, lambda got: len(got) >= 1)
        assert [(r.offset, r.delivery_count) for r in again] == [(got[1].offset, 2)]
        c.acknowledge(again[0])
    with pytest.raises(kpax.ConfigError, match="group_id"):
        kpax.ShareConsumer(kafka.bootstrap)
    with pytest.raises(kpax.ConfigError, match="share_acknowledgement_mode"):
        kpax.ShareConsumer(kafka.bootstrap, group_id="g", share_acknowledgement_mode="auto")


def test_unknown_topic_then_created(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    group, _ = share_group(admin)
    topic = f"share-later-{time.monotonic_ns()}"
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group) as c:
        c.subscribe([topic])
        assert c.poll(1.0) == []  # no such topic yet: nothing, and no error
        admin.create_topics([kpax.NewTopic(topic, 2, 1)]).raise_for_errors()
        produce(kafka.bootstrap, topic, values(10), partition=1)
        got = read_until(c, lambda got: len(got) >= 10)
    assert sorted(r.value for r in got) == sorted(values(10))
    assert {r.partition for r in got} == {1}


def test_many_partitions_keyed_headers_and_deserializers(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 6)
    group, _ = share_group(admin)
    with kpax.Producer(kafka.bootstrap, compression_type="lz4") as p:
        for i in range(600):
            p.send(topic, b"v%d" % i, key=b"k%d" % (i % 17), headers=[("h", b"%d" % i)])
        p.flush()
    with kpax.ShareConsumer(
        kafka.bootstrap,
        group_id=group,
        key_deserializer=bytes.decode,
        value_deserializer=bytes.decode,
    ) as c:
        c.subscribe(topic)
        got = read_until(c, lambda got: len(got) >= 600)
        assert c.acquisition_lock_timeout_ms() == 30000
    assert len({(r.partition, r.offset) for r in got}) == 600
    assert {r.value for r in got} == {f"v{i}" for i in range(600)}
    for r in got:
        assert r.headers == (("h", r.value[1:].encode()),)
        assert r.key.startswith("k")


def test_asyncio_share_consumer(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, values(50))

    async def main() -> list[kpax.ShareConsumerRecord]:
        async with kpax.aio.ShareConsumer(
            kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
        ) as c:
            await c.subscribe([topic])  # awaitable, as aio.Consumer.subscribe (plain too)
            got: list[kpax.ShareConsumerRecord] = []
            deadline = time.monotonic() + 60
            while len(got) < 50 and time.monotonic() < deadline:
                recs = await c.poll(0.5)
                for r in recs:
                    c.acknowledge(r, AcknowledgeType.ACCEPT)
                got.extend(recs)
            assert await c.commit() == {TopicPartition(topic, 0): None}
            return got

    got = asyncio.run(main())
    assert sorted(r.offset for r in got) == list(range(50))


def test_record_limit_acquires_at_most_max_poll_records_per_fetch(kafka, admin) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(admin, 1)
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, values(100))  # a few batches of many records
    with kpax.ShareConsumer(
        kafka.bootstrap, group_id=group, share_acquire_mode="record_limit", max_poll_records=10
    ) as c:
        c.subscribe([topic])
        got = read_until(c, lambda got: len(got) >= 100)
        fetcher = c.aio.fetcher
        assert fetcher is not None
        fetches = fetcher.fetches
    assert sorted(r.offset for r in got) == list(range(100))
    assert fetches >= 10  # at most 10 records acquired per ShareFetch
