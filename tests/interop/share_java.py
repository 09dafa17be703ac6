"""Apache Kafka's KafkaShareConsumer as a share-group member next to kpax's (KIP-932 interop).

tests/java/share/ShareConsume.java is compiled once per source and classpath with
``kpax.testing.compile_java`` (javac, else ECJ) against ``kpax.testing.classpath()``
into ``<kpax cache>/java-helpers/ShareConsume-<hash>/`` (an atomic rename, so
concurrent test processes never see half a build), then run as a subprocess::

    from tests.interop.share_java import start_share_consume

    with start_share_consume(kafka.bootstrap, "g1", topic, earliest=True) as member:
        member.wait_subscribed()
        lines = member.wait_for(100, timeout=60)    # ShareLine(partition, offset, ...)
    # leaving the block writes "stop" to its stdin and waits for a clean close

The member acknowledges implicitly (every record ACCEPTed), commits the
acknowledgements after each poll and prints one line per record the broker
took: ``partition offset delivery_count value_hex``; the handle parses them
into :class:`ShareLine` as they come (a reader thread per pipe). It stops on
``stop()`` (a "stop" line on its stdin; also when this process dies and the pipe
closes), or on its own after ``idle_seconds`` without records or ``max_records``
records (then ``wait()``). ``earliest=True`` sets the group config
``share.auto.offset.reset=earliest`` with the Java Admin before subscribing.

``python -m tests.interop.share_java`` checks the whole path against a fresh
local broker (or ``KPAX_TEST_BOOTSTRAP``): records produced with
``kpax.Producer`` come back from the Java member, each once, delivery count 1.

Imports: kpax (Producer, Admin, testing), the standard library.
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kpax.testing.jars import cache_dir, classpath, kafka_version
from kpax.testing.javac import compile_java, java_executable

__all__ = [
    "JAVA_SRC",
    "ShareConsume",
    "ShareLine",
    "compile_share_consume",
    "parse_line",
    "share_consume_argv",
    "start_share_consume",
]

JAVA_SRC = Path(__file__).resolve().parent.parent / "java" / "share" / "ShareConsume.java"
MAIN_CLASS = "ShareConsume"
#: Quick-start JVM flags: a test member, not a benchmark.
JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")


@dataclass(frozen=True)
class ShareLine:
    """One record the Java member accepted."""

    partition: int
    offset: int
    delivery_count: int
    value: bytes | None


def parse_line(line: str) -> ShareLine | None:
    """``partition offset delivery_count value_hex`` -> ShareLine (None if it is not one)."""
    parts = line.split()
    if len(parts) == 3:  # an empty value prints as nothing after the last space
        parts.append("")
    if len(parts) != 4:
        return None
    try:
        value = None if parts[3] == "-" else bytes.fromhex(parts[3])
        return ShareLine(int(parts[0]), int(parts[1]), int(parts[2]), value)
    except ValueError:
        return None


def compile_share_consume(version: str | None = None) -> tuple[Path, str]:
    """The compiled ShareConsume (its classes directory) and the Kafka classpath it runs on.

    Compiled once per (source, classpath) into the kpax cache; later calls are free."""
    cp = classpath(kafka_version(version))
    digest = hashlib.sha256(JAVA_SRC.read_bytes() + b"\0" + cp.encode()).hexdigest()[:16]
    target = cache_dir() / "java-helpers" / f"{MAIN_CLASS}-{digest}"
    if (target / f"{MAIN_CLASS}.class").is_file():
        return target, cp
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{MAIN_CLASS}-", dir=target.parent))
    try:
        compile_java([JAVA_SRC], cp, staging)
        try:
            staging.rename(target)
        except OSError:  # another process got there first: its build is the same
            if not (target / f"{MAIN_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target, cp


def share_consume_argv(
    bootstrap: str,
    group: str,
    topic: str,
    *,
    earliest: bool = False,
    idle_seconds: float | None = None,
    max_records: int | None = None,
    stop_file: str | os.PathLike[str] | None = None,
    poll_ms: int | None = None,
    properties: Mapping[str, str] | None = None,
    version: str | None = None,
) -> list[str]:
    """The ``java ... ShareConsume`` command (with ``--stdin``: the handle stops it that way)."""
    classes, cp = compile_share_consume(version)
    argv = [
        java_executable(), *JVM_OPTS, "-cp", f"{classes}{os.pathsep}{cp}", MAIN_CLASS,
        bootstrap, group, topic, "--stdin",
    ]  # fmt: skip
    if earliest:
        argv.append("--earliest")
    if idle_seconds is not None:
        argv += ["--idle-seconds", str(idle_seconds)]
    if max_records is not None:
        argv += ["--max-records", str(max_records)]
    if stop_file is not None:
        argv += ["--stop-file", str(stop_file)]
    if poll_ms is not None:
        argv += ["--poll-ms", str(poll_ms)]
    for key, value in (properties or {}).items():
        argv += ["--property", f"{key}={value}"]
    return argv


class ShareConsume:
    """A running ShareConsume member: its accepted records as they arrive, and its end."""

    def __init__(self, argv: Iterable[str]) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self.lines: list[ShareLine] = []  # every accepted record so far, in arrival order
        self.other_stdout: list[str] = []  # stdout lines that are not record lines
        self._stderr: deque[str] = deque(maxlen=400)
        self._cond = threading.Condition()
        self._events: queue.Queue[str] = queue.Queue()
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._readers:
            t.start()

    # ---------------------------------------------------------------- pipes
    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            rec = parse_line(line)
            with self._cond:
                if rec is None:
                    self.other_stdout.append(line)
                else:
                    self.lines.append(rec)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.rstrip("\n")
            with self._cond:
                self._stderr.append(line)
                self._cond.notify_all()
            if line in ("subscribed", "closed") or line.startswith("stopping: "):
                self._events.put(line)

    @property
    def stderr(self) -> str:
        """The last 400 lines of the member's stderr (progress, logging, errors)."""
        with self._cond:
            return "\n".join(self._stderr)

    def _failure(self, what: str) -> str:
        code = self.proc.poll()
        state = "running" if code is None else f"exited {code}"
        return f"ShareConsume {what} ({state}); stderr:\n{self.stderr[-3000:]}"

    # ---------------------------------------------------------------- waiting
    def wait_subscribed(self, timeout: float = 60.0) -> None:
        """Wait until the member has subscribed (its group config set first if ``earliest``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while "subscribed" not in self._stderr:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(self._failure(f"did not subscribe within {timeout:g}s"))
                self._cond.wait(min(left, 0.2))

    def wait_for(self, count: int, timeout: float = 60.0) -> list[ShareLine]:
        """Wait until at least ``count`` records were accepted; all accepted so far."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.lines) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        self._failure(f"accepted {len(self.lines)} of {count} records")
                    )
                if self.proc.poll() is not None and not self._readers[0].is_alive():
                    raise RuntimeError(
                        self._failure(f"ended after {len(self.lines)} of {count} records")
                    )
                self._cond.wait(min(left, 0.2))
            return list(self.lines)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the member to end on its own (idle or record count); its exit status."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(self._failure(f"still running after {timeout:g}s")) from None
        for t in self._readers:
            t.join(10)
        return code

    def stop(self, timeout: float = 60.0) -> int:
        """Ask the member to stop (a "stop" line on stdin), wait for its clean close; its
        exit status. Killed if it does not end within ``timeout`` (then TimeoutError)."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.stdin.close()
            except OSError:  # already gone
                pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise TimeoutError(self._failure(f"did not stop within {timeout:g}s")) from None
        for t in self._readers:
            t.join(10)
        return code

    def __enter__(self) -> ShareConsume:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            try:
                self.stop()
            except TimeoutError:
                if exc is None:
                    raise


def start_share_consume(
    bootstrap: str,
    group: str,
    topic: str,
    *,
    earliest: bool = False,
    idle_seconds: float | None = None,
    max_records: int | None = None,
    stop_file: str | os.PathLike[str] | None = None,
    poll_ms: int | None = None,
    properties: Mapping[str, str] | None = None,
    version: str | None = None,
) -> ShareConsume:
    """Compile (once) and start a ShareConsume member of share group ``group`` on ``topic``."""
    return ShareConsume(
        share_consume_argv(
            bootstrap, group, topic, earliest=earliest, idle_seconds=idle_seconds,
            max_records=max_records, stop_file=stop_file, poll_ms=poll_ms,
            properties=properties, version=version,
        )
    )  # fmt: skip


# ------------------------------------------------------------------ self-check


def _self_check(bootstrap: str, records: int = 300, partitions: int = 3) -> None:
    import kpax

    topic = f"share-java-{uuid.uuid4().hex[:8]}"
    group = f"share-java-{uuid.uuid4().hex[:8]}"
    with kpax.Admin(bootstrap) as admin:
        admin.create_topics([kpax.NewTopic(topic, partitions, 1)]).raise_for_errors()
    sent = [f"v-{i}".encode() for i in range(records)]
    with kpax.Producer(bootstrap) as producer:
        for p in range(partitions):
            producer.send_many(topic, sent[p::partitions], partition=p)
        producer.flush()
    t0 = time.monotonic()
    with start_share_consume(bootstrap, group, topic, earliest=True) as member:
        member.wait_subscribed()
        lines = member.wait_for(records, timeout=120)
        took = time.monotonic() - t0
        code = member.stop()
    got = sorted(line.value or b"" for line in lines)
    assert code == 0, member.stderr
    assert got == sorted(sent), f"{len(got)} records back of {len(sent)}"
    assert len({(x.partition, x.offset) for x in lines}) == records
    assert all(x.delivery_count == 1 for x in lines), "a record was delivered twice"
    print(f"ok: the Java share consumer accepted all {records} records in {took:.1f}s")
    print("first lines:", *[f"{x.partition} {x.offset} {x.delivery_count}" for x in lines[:3]])


def main() -> int:
    bootstrap = os.environ.get("KPAX_TEST_BOOTSTRAP")
    if bootstrap:
        _self_check(bootstrap)
        return 0
    from kpax.testing import start_kafka

    cluster = start_kafka(brokers=1)
    try:
        _self_check(cluster.bootstrap)
    except BaseException:
        print(cluster.log_tail(n=60), file=sys.stderr)
        raise
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
