"""A Kafka broker that misbehaves, for the hostile-broker tests.

Role: :class:`HostileServer` listens on 127.0.0.1 (an ephemeral port), one
thread per connection, and answers ApiVersions (and, unless told otherwise,
Metadata: itself as broker 1, leader of partition 0 of every topic asked for)
with real responses encoded by the generated message classes. The first
request of any other API on a connection gets one misbehaviour (:data:`MODES`):

- ``huge``: the size prefix 0x7fffffff (2 GiB) and 64 bytes, connection kept open;
- ``wrong_id``: a whole response frame under another correlation id;
- ``truncated``: a size of 1000, then 10 bytes (the right correlation id), kept open;
- ``garbage``: the right size and correlation id around random bytes;
- ``silent``: nothing, ever (requests are read; the connection stays open).

The server counts connections opened and closed by the client
(:meth:`HostileServer.wait_all_closed`).

``python -m tests.hostile_server --report`` runs every client against every
mode, each in a fresh interpreter, and prints the time to the error, the
error and the peak RSS growth (ru_maxrss).

Imports: kpax.proto.messages, kpax.proto.header (tests.unit.bytewire for
decoding requests).
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import uuid
from collections.abc import Iterable
from typing import Any

from kpax.proto.header import response_header_version
from kpax.proto.messages import (
    REQUESTS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from tests.unit.bytewire import decode_request

MODES = ("huge", "wrong_id", "truncated", "garbage", "silent")
CLIENTS = (
    "producer",  # idempotent (the default): InitProducerId is its first request of its own
    "producer-no-idempotence",  # Produce is
    "consumer",
    "admin",
    "aio-producer",
    "aio-consumer",
    "aio-admin",
)
API_VERSIONS = ApiVersionsRequest.API_KEY
METADATA = MetadataRequest.API_KEY
MR = MetadataResponse


def _frame(correlation_id: int, body: bytes, header_version: int) -> bytes:
    head = struct.pack(">i", correlation_id) + (b"\x00" if header_version >= 1 else b"")
    return struct.pack(">i", len(head) + len(body)) + head + body


def _api_versions() -> Any:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=key, min_version=cls.MIN_VERSION, max_version=cls.MAX_VERSION
            )
            for key, cls in sorted(REQUESTS.items())
        ],
        throttle_time_ms=0,
    )


class HostileServer:
    """See the module docstring. ``answers``: the api keys answered properly
    (ApiVersions always is)."""

    def __init__(self, mode: str, answers: Iterable[int] = (API_VERSIONS, METADATA)) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        self.mode = mode
        self.answers = frozenset(answers) | {API_VERSIONS}
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port: int = self._sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._lock = threading.Condition()
        self.opened = 0
        self.closed = 0
        #: API names of the requests that got the misbehaviour.
        self.misbehaved: list[str] = []
        self._conns: list[socket.socket] = []
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name="hostile-accept", daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped = True
        try:  # wakes the accept() blocked in the serving thread (close alone does not)
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join(5)

    def wait_all_closed(self, timeout: float = 10.0) -> bool:
        """True once every connection the client opened was closed by it."""
        with self._lock:
            return self._lock.wait_for(lambda: self.closed == self.opened, timeout)

    # ------------------------------------------------------------ serving

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.opened += 1
                self._conns.append(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name="hostile-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                got = read_request(conn)
                if got is None:
                    return
                key, version, cid, request = got
                if key in self.answers:
                    conn.sendall(self._answer(key, version, cid, request))
                    continue
                with self._lock:
                    self.misbehaved.append(REQUESTS[key].API_NAME)
                reply = self._misbehave(key, version, cid)
                if reply:
                    conn.sendall(reply)
                # keep the connection open: the client must fail on the bytes
                while conn.recv(65536):
                    pass
                return
        except OSError:
            return
        finally:
            conn.close()
            with self._lock:
                self.closed += 1
                self._lock.notify_all()

    def _answer(self, key: int, version: int, cid: int, request: Any) -> bytes:
        if key == API_VERSIONS:
            response = _api_versions()
        else:
            names = [t.name for t in request.topics] if request.topics is not None else ["hostile"]
            response = self._metadata(names)
        body = bytes(response.encode(version))
        return _frame(cid, body, response_header_version(key, version))

    def _metadata(self, topics: list[str]) -> Any:
        return MR(
            brokers=[MR.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id="hostile",
            controller_id=1,
            topics=[
                MR.MetadataResponseTopic(
                    name=name,
                    topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),  # Produce v13 needs it
                    partitions=[
                        MR.MetadataResponsePartition(
                            partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                        )
                    ],
                )
                for name in topics
            ],
        )

    def _misbehave(self, key: int, version: int, cid: int) -> bytes:
        header = response_header_version(key, version)
        if self.mode == "huge":
            return b"\x7f\xff\xff\xff" + bytes(64)
        if self.mode == "wrong_id":
            return _frame(cid + 1000, bytes(64), header)
        if self.mode == "truncated":
            return struct.pack(">ii", 1000, cid) + bytes(6)
        if self.mode == "garbage":
            return _frame(cid, random.Random(7).randbytes(512), header)
        return b""  # silent


def read_request(conn: socket.socket) -> tuple[int, int, int, Any] | None:
    """The next request frame from ``conn``, decoded (api key, version, correlation
    id, request); None at the end of the stream."""
    head = _read(conn, 4)
    if head is None:
        return None
    body = _read(conn, struct.unpack(">i", head)[0])
    if body is None:
        return None
    return decode_request(head + body)


def _read(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


# ------------------------------------------------------------ probing a client


def run_client(
    client: str, address: str, timeout_ms: int = 2000, api_timeout_ms: int = 4000
) -> dict[str, Any]:
    """Run one client (:data:`CLIENTS`) against ``address`` until it fails:
    the producers send one record and flush, the consumer is assigned a
    partition, polls twice and asks its position, the admin lists topics.
    Returns the error (type, message, whether a KafkaError), the seconds it
    took, the threads named kpax-* it started that are left after close and (asyncio clients) the
    tasks still pending after close. ``timeout_ms`` is the request timeout
    (and the producer's delivery timeout), ``api_timeout_ms`` the consumer's
    and admin's default_api_timeout_ms."""
    import asyncio
    import time

    import kpax

    opts: dict[str, Any] = {"request_timeout_ms": timeout_ms}
    tp = kpax.TopicPartition("hostile", 0)
    out: dict[str, Any] = {"client": client, "error": None, "pending_tasks": []}
    # (threads an earlier test left behind are not this client's)
    earlier = {t for t in threading.enumerate() if t.name.startswith("kpax-")}
    started = time.monotonic()

    def failed(exc: BaseException) -> None:
        out["seconds"] = round(time.monotonic() - started, 3)
        out["error"] = [type(exc).__name__, str(exc), isinstance(exc, kpax.KafkaError)]

    if client.startswith("producer"):
        if client == "producer-no-idempotence":
            opts["enable_idempotence"] = False
        p = kpax.Producer(address, linger_ms=0, delivery_timeout_ms=timeout_ms, **opts)
        try:
            fut = p.send("hostile", b"v")
            p.flush(30)
            fut.result(30)
        except Exception as exc:
            failed(exc)
        finally:
            p.close(10)
    elif client == "consumer":
        c = kpax.Consumer(address, default_api_timeout_ms=api_timeout_ms, **opts)
        try:
            c.assign([tp])
            for _ in range(2):  # a protocol error is raised by poll
                c.poll(timeout=0.5)
            c.position(tp)  # no answer: a timeout (poll only logs it, as Java's does)
        except Exception as exc:
            failed(exc)
        finally:
            c.close()
    elif client == "admin":
        try:  # the sync Admin connects at construction
            with kpax.Admin(address, default_api_timeout_ms=api_timeout_ms, **opts) as a:
                a.list_topics()
        except Exception as exc:
            failed(exc)
    elif client.startswith("aio-"):

        async def main() -> None:
            kind = client[4:]
            try:
                if kind == "producer":
                    async with kpax.aio.Producer(
                        address, linger_ms=0, delivery_timeout_ms=timeout_ms, **opts
                    ) as ap:
                        fut = await ap.send("hostile", b"v")
                        await asyncio.wait_for(fut, 30)
                elif kind == "consumer":
                    async with kpax.aio.Consumer(
                        address, default_api_timeout_ms=api_timeout_ms, **opts
                    ) as ac:
                        await ac.assign([tp])
                        for _ in range(2):
                            await ac.poll(timeout=0.5)
                        await ac.position(tp)
                else:
                    async with kpax.aio.Admin(
                        address, default_api_timeout_ms=api_timeout_ms, **opts
                    ) as aa:
                        await aa.list_topics()
            except Exception as exc:
                failed(exc)
            await asyncio.sleep(0)
            me = asyncio.current_task()
            out["pending_tasks"] = [
                repr(t) for t in asyncio.all_tasks() if t is not me and not t.done()
            ]

        asyncio.run(main())
    else:
        raise ValueError(f"unknown client {client!r}")
    if out["error"] is None:
        out["seconds"] = round(time.monotonic() - started, 3)
    out["threads"] = [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("kpax-") and t not in earlier and t.is_alive()
    ]
    return out


def answers_for(client: str) -> tuple[int, ...]:
    """What the server answers for ``client`` to reach its first request of
    its own: the admin's is Metadata itself."""
    return (API_VERSIONS,) if client.endswith("admin") else (API_VERSIONS, METADATA)


def probe(client: str, mode: str) -> dict[str, Any]:
    """One client against a fresh server in ``mode``, in this process, with the
    peak RSS (ru_maxrss) growth over the run in bytes: run it in a fresh
    interpreter (``--probe``) for a figure of its own."""
    import resource

    import kpax  # noqa: F401  (loaded before the baseline)

    with HostileServer(mode, answers_for(client)) as server:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = run_client(client, server.address)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["all_closed"] = server.wait_all_closed(5)
        out["connections"] = server.opened
        out["address"] = server.address
    out["mode"] = mode
    out["rss_growth"] = (after - before) * 1024  # ru_maxrss is in KiB on Linux
    out["peak_rss"] = after * 1024
    return out


def probe_subprocess(client: str, mode: str) -> dict[str, Any]:
    """:func:`probe` in a fresh interpreter (``python -m tests.hostile_server --probe``)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "tests.hostile_server", "--probe", client, mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        check=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _main(argv: list[str]) -> int:
    import json
    import logging

    logging.disable(logging.WARNING)  # the clients' warnings: the report says it all
    if argv[:1] == ["--probe"] and len(argv) == 3:
        print(json.dumps(probe(argv[1], argv[2])))
        return 0
    if argv == ["--report"]:
        print(f"{'client':<13} {'mode':<10} {'seconds':>7} {'peak RSS':>9} {'growth':>7}  error")
        for mode in MODES:
            for client in CLIENTS:
                r = probe_subprocess(client, mode)
                error = r["error"][0] + ": " + r["error"][1] if r["error"] else "NONE"
                print(
                    f"{client:<13} {mode:<10} {r['seconds']:>7.2f} "
                    f"{r['peak_rss'] / 2**20:>7.1f}MB {r['rss_growth'] / 2**20:>5.1f}MB  {error}"
                )
        return 0
    print("usage: python -m tests.hostile_server --report | --probe CLIENT MODE")
    return 2


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
