"""`kpax produce TOPIC`: records from stdin, a file or ``--value`` into a topic.

Role: read input in the chosen format (raw lines, JSON lines, msgpack), send
each record with kpax.Producer, flush, and report records, bytes and rate on
stderr. Delivery failures are counted and the first one reported (exit 1);
Ctrl-C flushes what was sent (bounded by ``--timeout``) and says how much.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Iterator
from typing import IO, Any

import kpax
from kpax.cli import common, formats
from kpax.cli.errors import CommandError, UsageError
from kpax.cli.output import Progress, note, rate_summary
from kpax.cli.settings import Settings

_PRUNE_EVERY = 8192


def _raw_records(
    stream: IO[bytes], key_sep: bytes | None, headers: Any, partition: int | None
) -> Iterator[formats.InRecord]:
    for raw in stream:
        value = raw[:-1] if raw.endswith(b"\n") else raw
        key = None
        if key_sep is not None:
            k, sep, v = value.partition(key_sep)
            if sep:
                key, value = k, v
        yield formats.InRecord(value, key, headers, partition)


class _Delivery:
    """Tracks futures until done (oldest first); counts failures, keeps the first error."""

    def __init__(self) -> None:
        self.pending: deque[kpax.RecordFuture] = deque()
        self.failed = 0
        self.first_error: BaseException | None = None

    def prune(self, everything: bool = False) -> None:
        """Drop done futures from the front (all done ones with ``everything``):
        records complete roughly in send order, so this is O(1) per record."""
        pending = self.pending
        while pending and pending[0].done():
            self._check(pending.popleft())
        if everything:
            rest = [f for f in pending if not f.done() or self._check(f)]
            pending.clear()
            pending.extend(rest)

    def _check(self, f: kpax.RecordFuture) -> bool:
        if f.failed():
            self.failed += 1
            if self.first_error is None:
                self.first_error = f.exception(0)
        return False


def _send_raw(
    args: argparse.Namespace, send: Any, track: _Delivery, progress: Progress, key: bytes | None
) -> tuple[int, int]:
    """The fast path: raw lines, read in blocks and split in C."""
    stream = args.stream
    read = getattr(stream, "read1", stream.read)  # read1: what a pipe has now, <= 1 MiB
    topic, part = args.topic, args.partition
    headers = args.fixed_headers
    count = nbytes = 0
    append = track.pending.append
    klen = len(key or b"")
    rest = b""
    try:
        while True:
            block = read(1 << 20)
            if not block:
                break
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            nbytes += sum(map(len, lines))
            for value in lines:
                append(send(topic, value, key, partition=part, headers=headers))
                count += 1
            track.prune()
            progress.update(count)
        if rest:  # a last line without a newline
            append(send(topic, rest, key, partition=part, headers=headers))
            count += 1
            nbytes += len(rest)
    except KeyboardInterrupt:
        args.sent_before_interrupt = count
        raise
    return count, nbytes + klen * count


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.value is not None and args.file:
        raise UsageError("give --value or --file, not both")
    if args.format != "raw" and (args.key_separator or args.value is not None):
        raise UsageError("--key-separator and --value go with --format raw")
    headers: formats.Headers | None = [
        (k, v.encode()) for k, v in common.kv_pairs(args.header, "--header")
    ] or None
    key_sep = args.key_separator.encode() if args.key_separator else None
    fixed_key = args.key.encode() if args.key is not None else None
    with common.admin(settings) as adm:
        parts = common.topic_partitions(adm, args.topic, settings)
    if args.partition is not None:
        common.pick_partitions(parts, [args.partition], args.topic)
    conf: dict[str, Any] = {
        **settings.conn,
        "acks": args.acks,
        "compression_type": args.compression,
        "allow_auto_create_topics": False,
        "max_block_ms": int(settings.timeout * 1000),
        # librdkafka's (kcat's) default batch size: fewer, larger batches; also
        # fewer GIL hand-offs (the sync producer yields once per new batch)
        "batch_size": 1_000_000,
        "linger_ms": 5,
    }
    conf.update(settings.extra)
    try:
        conf["acks"] = int(conf["acks"])
    except (TypeError, ValueError):
        pass
    stream: IO[bytes]
    if args.file:
        try:
            stream = open(args.file, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"cannot read --file {args.file!r}: {exc.strerror}") from None
    else:
        stream = sys.stdin.buffer
    args.stream, args.fixed_headers = stream, headers
    bad: list[str] = []
    records: Iterator[formats.InRecord]
    if args.value is not None:
        records = iter([formats.InRecord(args.value.encode(), None, headers, args.partition)])
    elif args.format == "raw":
        records = _raw_records(stream, key_sep, headers, args.partition)
    elif args.format == "json":
        records = formats.read_json(stream, bad, args.skip_bad)
    else:
        records = formats.read_msgpack(stream, bad, args.skip_bad)
    try:
        with kpax.Producer(**conf) as producer:
            return _send_all(producer, args, records, fixed_key, bad, settings)
    finally:
        if args.file:
            stream.close()


def _send_all(  # noqa: PLR0917
    producer: kpax.Producer,
    args: argparse.Namespace,
    records: Iterator[formats.InRecord],
    fixed_key: bytes | None,
    bad: list[str],
    settings: Settings,
) -> int:
    topic = args.topic
    send = producer.send
    track = _Delivery()
    pending = track.pending
    count = nbytes = 0
    progress = Progress("producing", enabled=None if not args.quiet else False)
    start = time.monotonic()
    interrupted = False
    try:
        try:
            if args.format == "raw" and args.value is None and not args.key_separator:
                count, nbytes = _send_raw(args, send, track, progress, fixed_key)
                records = iter(())
            for rec in records:
                key = rec.key if rec.key is not None else fixed_key
                part = rec.partition if rec.partition is not None else args.partition
                pending.append(
                    send(
                        topic,
                        rec.value,
                        key,
                        partition=part,
                        timestamp=rec.timestamp,
                        headers=rec.headers,
                    )
                )
                count += 1
                nbytes += len(rec.value or b"") + len(key or b"")
                if count % _PRUNE_EVERY == 0:
                    track.prune()
                    progress.update(count)
        except KeyboardInterrupt:
            interrupted = True
            count = max(count, getattr(args, "sent_before_interrupt", 0))
        except formats.BadInput as exc:
            # stop at the bad record, deliver what came before it
            producer.flush(settings.timeout)
            track.prune(everything=True)
            progress.done()
            note(f"kpax produce: {exc}; {count - track.failed:,} earlier records produced")
            return 1
        try:
            producer.flush(settings.timeout)
        except kpax.KafkaTimeoutError:
            pass
        except KeyboardInterrupt:
            interrupted = True
    finally:
        progress.done()
    track.prune(everything=True)
    elapsed = time.monotonic() - start
    ok = count - track.failed - len(track.pending)
    for msg in bad[:5]:
        note(f"kpax produce: skipped {msg}")
    if len(bad) > 5:
        note(f"kpax produce: skipped {len(bad) - 5} more bad records")
    if interrupted:
        note(f"kpax produce: interrupted: {ok:,} of {count:,} records delivered to {topic!r}")
        return 130
    if track.failed or track.pending:
        err = track.first_error or f"{len(track.pending)} not acknowledged in {settings.timeout:g}s"
        raise CommandError(
            f"produce to {topic!r}: {track.failed + len(track.pending):,} of {count:,} records "
            f"failed: {err}"
        )
    if not args.quiet:
        note(rate_summary("produced", count, nbytes, elapsed, f"to {topic!r}"))
    return 0
