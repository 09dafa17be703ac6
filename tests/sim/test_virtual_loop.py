"""The virtual-time loop and its in-memory network (kpax.testing.sim): time moves only
when the loop is idle, bytes arrive in order after the link's delay, a stuck loop
says so instead of hanging, faults cut connections."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from kpax.testing.sim import SimulationDeadlock, SimulationLivelock, VirtualTimeLoop


class Upper(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data.upper())


def run(coro_fn, *args):  # type: ignore[no-untyped-def]
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro_fn(*args))
    finally:
        loop.close()


def test_sleeping_an_hour_takes_no_wall_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        return loop.time()

    started = time.monotonic()
    assert run(main) == pytest.approx(3600)
    assert time.monotonic() - started < 1.0


def test_bytes_arrive_in_order_after_the_link_delay() -> None:
    async def main() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        loop.listen("broker", 9092, Upper)
        rng = random.Random(7)
        loop.network.set_delay("broker", 9092, lambda: rng.uniform(0.0, 0.2))
        reader, writer = await asyncio.open_connection("broker", 9092)
        started = loop.time()
        for i in range(200):
            writer.write(b"x%03d;" % i)
        data = await reader.readexactly(200 * 5)
        return data, loop.time() - started

    data, took = run(main)
    assert data == b"".join(b"X%03d;" % i for i in range(200))
    assert 0 < took <= 0.4 + 1e-9


def test_a_stuck_simulation_raises_instead_of_hanging() -> None:
    async def main() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimulationDeadlock, match=r"stuck at t=0\.000s"):
        run(main)


def test_a_busy_loop_at_one_instant_raises_instead_of_spinning() -> None:
    async def main() -> None:
        def again() -> None:
            asyncio.get_running_loop().call_soon(again)

        again()
        await asyncio.sleep(1)  # never: the clock cannot move while something is ready

    with pytest.raises(SimulationLivelock, match=r"at t=0\.000000 with callbacks"):
        run(main)


def test_long_chains_of_callbacks_at_one_instant_are_not_a_livelock() -> None:
    async def main() -> int:
        for _ in range(10_000):
            await asyncio.sleep(0)
        await asyncio.sleep(1)
        return 1

    assert run(main) == 1


def test_an_address_nobody_listens_on_is_refused() -> None:
    async def main() -> None:
        await asyncio.open_connection("nowhere", 1)

    with pytest.raises(ConnectionRefusedError):
        run(main)


def test_a_cut_resets_both_ends_and_new_connections_are_refused_after_unlisten() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        loop.listen("broker", 9092, Upper)
        reader, writer = await asyncio.open_connection("broker", 9092)
        writer.write(b"abc")
        assert await reader.readexactly(3) == b"ABC"
        assert loop.network.cut("broker", 9092) == 1
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await reader.readexactly(1)
        loop.unlisten("broker", 9092)
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("broker", 9092)

    run(main)


def test_an_orderly_close_delivers_what_is_in_transit_then_eof() -> None:
    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        loop.listen("broker", 9092, Upper)
        loop.network.set_delay("broker", 9092, 1.0)
        reader, writer = await asyncio.open_connection("broker", 9092)
        writer.write(b"last words")
        data = await reader.readexactly(10)
        writer.close()
        assert await reader.read() == b""
        return data

    assert run(main) == b"LAST WORDS"


def test_the_same_seed_gives_the_same_run() -> None:
    def trace(seed: int) -> list[tuple[float, int]]:
        async def main() -> list[tuple[float, int]]:
            loop = asyncio.get_running_loop()
            assert isinstance(loop, VirtualTimeLoop)
            rng = random.Random(seed)
            loop.listen("b", 1, Upper)
            loop.network.set_delay("b", 1, lambda: rng.uniform(0, 0.05))
            seen: list[tuple[float, int]] = []

            async def client(i: int) -> None:
                r, w = await asyncio.open_connection("b", 1)
                for _ in range(5):
                    w.write(b"%d" % i)
                    await r.readexactly(len(b"%d" % i))
                    seen.append((loop.time(), i))
                    await asyncio.sleep(rng.uniform(0, 0.01))

            await asyncio.gather(*(client(i) for i in range(10)))
            return seen

        return run(main)

    assert trace(3) == trace(3)
    assert trace(3) != trace(4)
