"""The check `tools/python_versions.py` runs with each Python: kpax from its wheel works.

Run by the interpreter of a venv that has only the kpax wheel and its runtime
dependencies installed, from outside the source tree, it checks that

- kpax is imported from that venv (not from a source tree on ``sys.path``);
- both C extensions were built into the wheel and are loaded
  (``kpax.proto.accel.speedups``, ``kpax.producer.fastpath.sendpath``);
- every kpax module imports, but those that need an optional package that is
  not installed (pyspark, opentelemetry, pytest...: the extras);
- a produce/consume round trip against the broker at ``--bootstrap`` gets every
  record back: the sync clients (zstd and gzip batches, three partitions) and the
  asyncio ones.

It prints one line saying so, or fails with what went wrong (exit 1).

Imports: kpax (the installed wheel) and the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import pkgutil
import sys
import time
import uuid
from pathlib import Path

RECORDS = 2000


def _check_installed() -> list[str]:
    import kpax
    from kpax.producer.fastpath import sendpath
    from kpax.proto.accel import speedups

    prefix = Path(sys.prefix).resolve()
    where = Path(kpax.__file__).resolve()
    if prefix not in where.parents:
        raise SystemExit(f"kpax was imported from {where}, not from the venv {prefix}")
    loaded = []
    for name, module in (("kpax.proto._speedups", speedups), ("kpax.producer._sendpath", sendpath)):
        if module is None:
            raise SystemExit(f"the C extension {name} is not loaded (not built into the wheel?)")
        tag = f"cpython-{sys.version_info[0]}{sys.version_info[1]}"
        if tag not in Path(module.__file__ or "").name:
            raise SystemExit(f"{name} is {module.__file__}, not built for {tag}")
        loaded.append(name)
    return loaded


def _import_everything() -> tuple[int, list[str]]:
    """Import every kpax module; (how many, the optional packages that were missing)."""
    import kpax

    imported, missing = 0, set()
    for info in pkgutil.walk_packages(kpax.__path__, "kpax."):
        if info.name.endswith("__main__"):
            continue  # runs the command
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            if not top or top == "kpax":
                raise
            missing.add(top)
            continue
        imported += 1
    return imported, sorted(missing)


def _sync_round_trip(bootstrap: str) -> int:
    import kpax

    topic = f"py{sys.version_info[0]}{sys.version_info[1]}-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(bootstrap) as admin:
        admin.create_topics([kpax.NewTopic(topic, num_partitions=3, replication_factor=1)])
    sent = {b"v-%d" % i for i in range(RECORDS)}
    for codec in ("zstd", "gzip"):
        with kpax.Producer(bootstrap, compression_type=codec, linger_ms=5) as producer:
            for i, value in enumerate(sorted(sent)):
                producer.send(topic, value + codec.encode(), key=b"k%d" % (i % 10))
            producer.flush(timeout=30)
    want = {v + c for v in sent for c in (b"zstd", b"gzip")}
    got: list[bytes] = []
    with kpax.Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([kpax.TopicPartition(topic, p) for p in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < len(want) and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(timeout=1.0) if r.value is not None]
    if sorted(got) != sorted(want):
        raise SystemExit(f"sync round trip on {topic}: sent {len(want)}, read {len(got)} back")
    return len(got)


async def _async_round_trip(bootstrap: str) -> int:
    import kpax

    topic = f"aio-{uuid.uuid4().hex[:8]}"
    values = [b"a-%d" % i for i in range(100)]
    async with kpax.aio.Producer(bootstrap) as producer:
        for value in values:
            await producer.send_and_wait(topic, value)
    got: list[bytes] = []
    async with kpax.aio.Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        assigned = consumer.assign([kpax.TopicPartition(topic, 0)])
        if inspect.isawaitable(assigned):  # a coroutine in kpax 0.1
            await assigned
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [r.value for r in await consumer.poll(timeout=1.0) if r.value is not None]
    if got != values:
        raise SystemExit(f"asyncio round trip on {topic}: sent {len(values)}, read {len(got)}")
    return len(got)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port of a PLAINTEXT listener")
    args = parser.parse_args(argv)
    started = time.monotonic()
    loaded = _check_installed()
    imported, missing = _import_everything()
    records = _sync_round_trip(args.bootstrap)
    records += asyncio.run(_async_round_trip(args.bootstrap))
    import kpax

    print(
        f"Python {sys.version.split()[0]}: kpax {kpax.__version__} from its wheel, "
        f"{' and '.join(loaded)} loaded, {imported} modules imported (without "
        f"{', '.join(missing) or 'nothing'}), {records} records produced and consumed back "
        f"in {time.monotonic() - started:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
