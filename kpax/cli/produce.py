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


class _Delivery:
    """Tracks futures (one per record, or one per ``send_many`` block) until done,
    oldest first; counts failed records and keeps the first error."""

    def __init__(self) -> None:
        self.pending: deque[kpax.RecordFuture | kpax.BulkFuture] = deque()
        #: Records covered by the futures still pending.
        self.pending_records = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def add(self, fut: kpax.RecordFuture | kpax.BulkFuture) -> None:
        self.pending.append(fut)
        self.pending_records += fut.count if isinstance(fut, kpax.BulkFuture) else 1

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

    def _check(self, f: kpax.RecordFuture | kpax.BulkFuture) -> bool:
        if isinstance(f, kpax.BulkFuture):
            self.pending_records -= f.count
            failed = f.failed_count
        else:
            self.pending_records -= 1
            failed = int(f.failed())
        if failed:
            self.failed += failed
            if self.first_error is None:
                self.first_error = f.exception(0)
        return False


def _split_keys(
    lines: list[bytes], key_sep: bytes, fixed_key: bytes | None
) -> tuple[list[bytes], list[bytes | None]]:
    """``KEY<sep>VALUE`` lines as values and keys (no separator: the whole line
    is the value, the key ``fixed_key``)."""
    values: list[bytes] = []
    keys: list[bytes | None] = []
    add_v, add_k = values.append, keys.append
    for line in lines:
        k, sep, v = line.partition(key_sep)
        if sep:
            add_k(k)
            add_v(v)
        else:
            add_k(fixed_key)
            add_v(k)
    return values, keys


def _send_raw(  # noqa: PLR0917
    args: argparse.Namespace,
    producer: kpax.Producer,
    track: _Delivery,
    progress: Progress,
    fixed_key: bytes | None,
    key_sep: bytes | None,
) -> tuple[int, int]:
    """The fast path: raw lines, read in blocks, split in C, each block handed
    to ``send_many`` (no Python object per record)."""
    stream = args.stream
    read = getattr(stream, "read1", stream.read)  # read1: what a pipe has now, <= 1 MiB
    topic, part = args.topic, args.partition
    headers = args.fixed_headers
    send_many = producer.send_many
    count = nbytes = 0
    rest = b""
    try:
        while True:
            block = read(1 << 20)
            if block:
                data = rest + block if rest else block
                lines = data.split(b"\n")
                rest = lines.pop()
                size = len(data) - len(rest) - len(lines)  # the lines' bytes
            elif rest:  # a last line without a newline
                lines, rest, size = [rest], b"", len(rest)
            else:
                break
            if not lines:
                continue
            keys: list[bytes | None] | None
            if key_sep is not None:
                values, keys = _split_keys(lines, key_sep, fixed_key)
            else:
                values = lines
                keys = None if fixed_key is None else [fixed_key] * len(lines)
            track.add(send_many(topic, values, keys, partition=part, headers=headers))
            count += len(values)
            if keys is not None and key_sep is not None:  # separators are not sent
                size = sum(map(len, values)) + sum(len(k) for k in keys if k is not None)
            elif fixed_key is not None:
                size += len(fixed_key) * len(values)
            nbytes += size
            track.prune()
            progress.update(count)
    except KeyboardInterrupt:
        args.sent_before_interrupt = count
        raise
    return count, nbytes


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
        records = iter(())  # _send_raw reads the stream itself
    elif args.format == "json":
        records = formats.read_json(stream, bad, args.skip_bad, len(parts))
    else:
        records = formats.read_msgpack(stream, bad, args.skip_bad, len(parts))
    try:
        with kpax.Producer(**conf) as producer:
            return _send_all(producer, args, records, fixed_key, key_sep, bad, settings)
    finally:
        if args.file:
            stream.close()


def _send_all(  # noqa: PLR0917
    producer: kpax.Producer,
    args: argparse.Namespace,
    records: Iterator[formats.InRecord],
    fixed_key: bytes | None,
    key_sep: bytes | None,
    bad: list[str],
    settings: Settings,
) -> int:
    topic = args.topic
    send = producer.send
    track = _Delivery()
    count = nbytes = 0
    progress = Progress("producing", enabled=None if not args.quiet else False)
    start = time.monotonic()
    interrupted = False
    try:
        try:
            if args.format == "raw" and args.value is None:
                count, nbytes = _send_raw(args, producer, track, progress, fixed_key, key_sep)
            for rec in records:
                key = rec.key if rec.key is not None else fixed_key
                part = rec.partition if rec.partition is not None else args.partition
                track.add(
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
    ok = count - track.failed - track.pending_records
    for msg in bad[:5]:
        note(f"kpax produce: skipped {msg}")
    if len(bad) > 5:
        note(f"kpax produce: skipped {len(bad) - 5} more bad records")
    if interrupted:
        note(f"kpax produce: interrupted: {ok:,} of {count:,} records delivered to {topic!r}")
        return 130
    if track.failed or track.pending_records:
        err = track.first_error or (
            f"{track.pending_records:,} not acknowledged in {settings.timeout:g}s"
        )
        raise CommandError(
            f"produce to {topic!r}: {track.failed + track.pending_records:,} of {count:,} "
            f"records failed: {err}"
        )
    if not args.quiet:
        note(rate_summary("produced", count, nbytes, elapsed, f"to {topic!r}"))
    return 0
