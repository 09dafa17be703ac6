"""kpax.aio on any asyncio event loop: the representative asyncio round trips
run on the standard library's loop and on uvloop (the loop uvicorn and
FastAPI use when it is installed; its transports are not
``asyncio.Transport`` subclasses).

The bodies are the asyncio tests of their home modules (produce and read
back, a consumer group member, admin calls, transactions, a share consumer),
each run here on a fresh loop of each kind; TLS and SASL connections get
their own round trips. The sync faces run their I/O loop from the event loop
policy, so one test installs uvloop's policy for them.

A client belongs to the loop that started it: used or closed from another
loop (a second ``asyncio.run``, another thread's loop) it raises
IllegalStateError at once, where it used to hang (a producer's close never
returned, a consumer's waited its whole timeout)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop  # (the dev extra's, where it is built: not on Windows)

import kpax
from tests.integration.share_helpers import new_topic, produce, share_group
from tests.integration.test_admin import test_async_admin as _admin
from tests.integration.test_consumer import test_asyncio_consumer as _consumer
from tests.integration.test_consumer_group import test_asyncio_group_member as _group_member
from tests.integration.test_producer import test_asyncio_producer as _producer
from tests.integration.test_transactions import _tid
from tests.wait import eventually

pytestmark = pytest.mark.integration

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """``run(coro)``: run ``coro`` to the end on a new loop of the kind the
    test is parametrized with (the loop is closed after)."""
    new_loop = LOOPS[request.param]

    def run_on(coro: Coroutine[Any, Any, Any]) -> Any:
        loop = new_loop()
        try:
            asyncio.set_event_loop(loop)
            return loop.run_until_complete(coro)
        finally:
            asyncio.set_event_loop(None)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    run_on.kind = request.param  # type: ignore[attr-defined]
    return run_on


def test_producer_round_trip(run, kafka, topic):
    run(_producer(kafka, topic))


def test_consumer_assign_poll_seek_iterate(run, kafka, topic):
    run(_consumer(kafka, topic))


def test_consumer_group_member(run, kafka, topic):
    run(_group_member(kafka, topic))


def test_admin_calls(run, kafka):
    run(_admin(kafka))


def test_transactions(run, kafka, topic):
    name = topic()

    async def main() -> None:
        async with kpax.aio.Producer(kafka.bootstrap, transactional_id=_tid()) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send(name, b"aborted")
            await producer.abort_transaction()
            producer.begin_transaction()
            await producer.send(name, b"committed")
            await producer.commit_transaction()

    run(main())
    tp = kpax.TopicPartition(name, 0)
    got: list[bytes] = []
    with kpax.Consumer(
        kafka.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
    ) as c:
        c.assign([tp])
        # (the commit marker is written after EndTxn is answered: wait for it)
        eventually(lambda: got.extend(r.value for r in c.poll(0.2)) or got)
    assert got == [b"committed"]


def test_share_consumer(run, kafka):
    with kpax.Admin(kafka.bootstrap) as admin:
        name = new_topic(admin, 1)
        group, _ = share_group(admin)
    produce(kafka.bootstrap, name, [b"%d" % i for i in range(20)])

    async def main() -> list[int]:
        async with kpax.aio.ShareConsumer(kafka.bootstrap, group_id=group) as c:
            c.subscribe([name])
            got: list[int] = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while len(got) < 20 and loop.time() < deadline:
                got.extend(r.offset for r in await c.poll(0.5))
            return sorted(got)

    assert run(main()) == list(range(20))


def test_tls_connection(run, kafka, topic):
    name = topic()

    async def main() -> int:
        async with kpax.aio.Producer(
            kafka.listener("SSL"), security_protocol="SSL", ssl_cafile=kafka.ssl_cafile
        ) as p:
            meta = await p.send_and_wait(name, b"over tls")
        return meta.offset

    assert run(main()) == 0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_connection(run, kafka, mechanism):
    user, password = next(iter(kafka.sasl_users.items()))

    async def main() -> str:
        async with kpax.aio.Admin(
            kafka.listener("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
        ) as admin:
            return (await admin.describe_cluster()).cluster_id

    assert run(main())


def test_sync_faces_under_the_uvloop_policy(kafka, topic):
    """``uvloop.install()`` (or a policy set by a framework) makes every new
    event loop a uvloop one: the sync faces' I/O threads run on it too."""
    name = topic()
    old = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        with kpax.Admin(kafka.bootstrap) as admin:
            assert admin.describe_cluster().cluster_id
        with kpax.Producer(kafka.bootstrap) as p:
            assert p.send(name, b"v").result(30).offset == 0
        with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
            assert isinstance(c._thread.loop, uvloop.Loop)
            c.assign([kpax.TopicPartition(name, 0)])
            got: list[bytes] = []
            for _ in range(100):
                got.extend(r.value for r in c.poll(0.2))
                if got:
                    break
            assert got == [b"v"]
    finally:
        asyncio.set_event_loop_policy(old)


# ---------------------------------------------------------------- one client, one loop

CLIENTS: dict[str, Callable[[str], Any]] = {
    "producer": lambda b: kpax.aio.Producer(b, linger_ms=60000),
    "consumer": kpax.aio.Consumer,
    "admin": kpax.aio.Admin,
    "share consumer": lambda b: kpax.aio.ShareConsumer(b, group_id="loops"),
}


async def _started(kind: str, bootstrap: str, topic: str) -> Any:
    client = CLIENTS[kind](bootstrap)
    await client.start()
    if kind == "producer":
        await client.send(topic, b"held")  # (buffered: linger_ms)
    return client


async def _call(kind: str, client: Any, topic: str) -> Any:
    if kind == "producer":
        return await client.flush(5)
    if kind == "consumer":
        return await client.poll(0.1)
    if kind == "admin":
        return await client.describe_cluster()
    return await client.unsubscribe()


def _refused_at_once(coro: Coroutine[Any, Any, Any], state: str) -> None:
    async def main() -> None:
        started = asyncio.get_running_loop().time()
        with pytest.raises(kpax.IllegalStateError, match="from another event loop") as info:
            await asyncio.wait_for(coro, 10)  # (a hang fails as a timeout)
        assert asyncio.get_running_loop().time() - started < 2.0
        assert state in str(info.value)

    asyncio.run(main())


@pytest.mark.parametrize("kind", list(CLIENTS))
def test_a_client_used_from_a_second_asyncio_run_is_refused_at_once(kafka, topic, kind):
    t = topic()
    client = asyncio.run(_started(kind, kafka.bootstrap, t))  # its loop is closed after
    _refused_at_once(_call(kind, client, t), "which is closed")
    _refused_at_once(client.close(), "which is closed")


@pytest.mark.parametrize("kind", list(CLIENTS))
def test_a_client_closed_from_another_threads_loop_is_refused_then_closes_on_its_own(
    kafka, topic, kind
):
    t = topic()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        client = asyncio.run_coroutine_threadsafe(_started(kind, kafka.bootstrap, t), loop).result(
            30
        )
        _refused_at_once(_call(kind, client, t), "running in another thread")
        _refused_at_once(client.close(), "running in another thread")
        # on its own loop it closes as usual (the producer delivers what it held)
        asyncio.run_coroutine_threadsafe(client.close(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    if kind == "producer":
        with kpax.Consumer(kafka.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([kpax.TopicPartition(t, 0)])
            got: list[bytes] = []
            eventually(lambda: got.extend(r.value for r in c.poll(0.2)) or got)
        assert got == [b"held"]
