"""`kpax produce TOPIC`: records from stdin, a file or ``--value`` into a topic.

Role: read input in the chosen format (raw lines, JSON lines, msgpack), send
each record with kpax.Producer, close it, and report records, bytes and rate
on stderr. The end of the input, a malformed record or Ctrl-C stops reading
(a record too large for the producer or the topic does not: it fails, and
the run goes on); the producer then gets ``--timeout`` seconds (from the
Ctrl-C, if any) to deliver what it was given (``close(timeout)``; a second
Ctrl-C stops the wait), and only then are records counted: acknowledged,
failed (the first error said), and of unknown outcome (not acknowledged in
time, so possibly written).
Anything but all acknowledged exits 1 (130 after Ctrl-C, 143 after SIGTERM).

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import deque
from collections.abc import Iterator
from typing import IO, Any

import kpax
from kpax.cli import common, formats
from kpax.cli.errors import CommandError, Interrupted, UsageError, interrupted_status
from kpax.cli.output import Progress, note, rate_summary
from kpax.cli.settings import Settings
from kpax.errors import MessageTooLargeError

_PRUNE_EVERY = 8192


class _Delivery:
    """Tracks futures (one per record, or one per ``send_many`` block) until done,
    oldest first; counts records acknowledged, failed (the broker or the client
    refused them), never sent (the producer closed before sending them: not
    written) and of unknown outcome (not acknowledged when the producer closed or
    timed out: they may have been written), and keeps the first error."""

    def __init__(self) -> None:
        self.pending: deque[kpax.RecordFuture | kpax.BulkFuture] = deque()
        #: Records covered by the futures still pending.
        self.pending_records = 0
        self.failed = 0
        self.unknown = 0
        self.unsent = 0
        #: Why records were never sent (the producer's close error says it).
        self.unsent_error: BaseException | None = None
        self.first_error: BaseException | None = None

    def add(self, fut: kpax.RecordFuture | kpax.BulkFuture) -> None:
        self.pending.append(fut)
        self.pending_records += fut.count if isinstance(fut, kpax.BulkFuture) else 1

    def refused(self, where: str, exc: MessageTooLargeError) -> None:
        """A record the producer refused to send (larger than ``max_request_size``):
        failed, as one the broker refuses (larger than the topic's max.message.bytes)."""
        self.failed += 1
        if self.first_error is None:
            self.first_error = _Refused(f"{where}: {exc}")

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
            err = f.exception(0)
            if isinstance(err, kpax.ClientClosedError) and not err.outcome_unknown:
                self.unsent += failed
                if self.unsent_error is None:
                    self.unsent_error = err
            elif isinstance(err, _UNKNOWN_OUTCOME):
                self.unknown += failed
            else:
                self.failed += failed
                if self.first_error is None:
                    self.first_error = err
        return False

    def outcome(self, count: int) -> tuple[int, int]:
        """(acknowledged, unknown) of ``count`` records handed to the producer, once
        it is closed: futures still pending (an abandoned close) are unknown."""
        self.prune(everything=True)
        unknown = self.unknown + self.pending_records
        return count - self.failed - self.unsent - unknown, unknown


class _Refused(Exception):
    """Why the producer refused a record (which one, and the producer's error)."""


#: Failures after which a record may still have been written: the producer
#: closed before an acknowledgement came (records it had sent), or a timeout
#: (delivery_timeout_ms, or buffer memory full in the middle of a ``send_many``).
#: The count is conservative: some timed-out records were never sent.
_UNKNOWN_OUTCOME = (kpax.ClientClosedError, kpax.KafkaTimeoutError)


class _Interrupt:
    """SIGINT/SIGTERM while a run reads and sends records.

    While input is read (``armed``) the signal raises KeyboardInterrupt at once
    (a read on an open pipe would block). While records are handed to the
    producer it is only noted and raised by :meth:`check` after the call: an
    interrupt inside ``send``/``send_many`` could leave records buffered (so
    sent) without a future, never counted. ``at`` is when the first came, and
    the first signal's number sets the exit status (130 for SIGINT, 143 for
    SIGTERM).
    """

    def __init__(self) -> None:
        self.armed = True
        self.pending = False
        self.at: float | None = None
        self.signum: int = signal.SIGINT
        self._saved: dict[int, Any] = {}

    def __call__(self, signum: int, frame: object) -> None:
        if self.at is None:
            self.at = time.monotonic()
            self.signum = signum
        if self.armed:
            raise Interrupted(self.signum)
        self.pending = True

    def check(self) -> None:
        """Raise the interrupt noted while records were handed over, if any."""
        if self.pending:
            self.pending = False
            raise Interrupted(self.signum)

    def reading(self) -> None:
        """Input is read next: a signal from now on raises at once (one noted
        before raises now)."""
        self.armed = True
        self.check()

    def __enter__(self) -> _Interrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


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


class _Run:
    """What a produce run handed to the producer: records, bytes."""

    def __init__(self) -> None:
        self.count = 0
        self.nbytes = 0


def _send_raw(  # noqa: PLR0917
    args: argparse.Namespace,
    producer: kpax.Producer,
    track: _Delivery,
    progress: Progress,
    fixed_key: bytes | None,
    key_sep: bytes | None,
    run: _Run,
    intr: _Interrupt,
) -> None:
    """The fast path: raw lines, read in blocks, split in C, each block handed
    to ``send_many`` (no Python object per record)."""
    stream = args.stream
    read = getattr(stream, "read1", stream.read)  # read1: what a pipe has now, <= 1 MiB
    topic, part = args.topic, args.partition
    headers = args.fixed_headers
    send_many = producer.send_many
    rest = b""
    while True:
        intr.reading()
        try:
            block = read(1 << 20)
        finally:
            intr.armed = False
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
        try:
            track.add(send_many(topic, values, keys, partition=part, headers=headers))
        except MessageTooLargeError:
            # a line over max_request_size: nothing of the block was sent
            _send_around_too_large(producer, args, values, keys, track, run.count + 1)
        except kpax.KafkaTimeoutError:
            # buffer memory stayed full: part of the block may be buffered (and
            # sent) without a future; count all of it as of unknown outcome
            track.unknown += len(values)
            raise
        finally:
            run.count += len(values)
        if keys is not None and key_sep is not None:  # separators are not sent
            size = sum(map(len, values)) + sum(len(k) for k in keys if k is not None)
        elif fixed_key is not None:
            size += len(fixed_key) * len(values)
        run.nbytes += size
        track.prune()
        progress.update(run.count)
        intr.check()


def _send_around_too_large(  # noqa: PLR0917
    producer: kpax.Producer,
    args: argparse.Namespace,
    values: list[bytes],
    keys: list[bytes | None] | None,
    track: _Delivery,
    first_line: int,
) -> None:
    """Send a block of lines ``send_many`` refused whole because a line in it is
    over ``max_request_size``: in halves, left to right (so in line order), down
    to the lines that are too large, each counted failed and not written, as a
    line over the topic's max.message.bytes is (the broker refuses it, the rest
    is written). Only a block with such a line comes here: no cost otherwise."""
    topic, part, headers = args.topic, args.partition, args.fixed_headers
    todo = [(0, len(values))]
    while todo:
        lo, hi = todo.pop()
        ks = None if keys is None else keys[lo:hi]
        try:
            if hi - lo == 1:
                k = None if ks is None else ks[0]
                track.add(producer.send(topic, values[lo], k, partition=part, headers=headers))
            else:
                track.add(
                    producer.send_many(topic, values[lo:hi], ks, partition=part, headers=headers)
                )
        except MessageTooLargeError as exc:
            if hi - lo == 1:
                track.refused(f"line {first_line + lo}", exc)
            else:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]  # the first half next
        except kpax.KafkaTimeoutError:
            # buffer memory stayed full: as for a whole block in _send_raw, this
            # part and the rest are of unknown outcome
            track.unknown += hi - lo + sum(h - lo_ for lo_, h in todo)
            raise


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
        # fewer GIL hand-offs (the sync producer hands over once per new batch)
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
        producer = kpax.Producer(**conf)
        try:
            return _send_all(producer, args, records, fixed_key, key_sep, bad, settings)
        finally:
            producer.close(0)  # closed by _send_all unless it failed: do not wait then
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
    """Send every record, then close the producer within ``--timeout`` and report
    what the broker acknowledged (counted after the close, never before)."""
    track = _Delivery()
    run = _Run()
    progress = Progress("producing", enabled=None if not args.quiet else False)
    start = time.monotonic()
    stopped: BaseException | None = None  # what ended the run early
    with _Interrupt() as intr:
        try:
            if args.format == "raw" and args.value is None:
                _send_raw(args, producer, track, progress, fixed_key, key_sep, run, intr)
            else:
                _send_records(args, producer, track, progress, records, fixed_key, bad, run, intr)
        except KeyboardInterrupt as exc:
            stopped = exc
        except (formats.BadInput, kpax.KafkaError) as exc:
            stopped = exc  # deliver what came before it, then report
        # Deliver what was handed over, within --timeout of the end of the input
        # (or of the Ctrl-C); a (second) Ctrl-C stops waiting.
        deadline = (intr.at if intr.at is not None else time.monotonic()) + settings.timeout
        waited = f"within --timeout {settings.timeout:g}s"
        try:
            intr.armed = True
            intr.pending = False  # one noted while send() refused: not a second Ctrl-C
            producer.close(max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt as exc:
            stopped = stopped or exc
            waited = "when Ctrl-C stopped the wait"
        finally:
            progress.done()
    acked, unknown = track.outcome(run.count)
    return _report(args, run, track, (acked, unknown, waited), bad, stopped, start)


def _send_records(  # noqa: PLR0917
    args: argparse.Namespace,
    producer: kpax.Producer,
    track: _Delivery,
    progress: Progress,
    records: Iterator[formats.InRecord],
    fixed_key: bytes | None,
    bad: list[str],
    run: _Run,
    intr: _Interrupt,
) -> None:
    """JSON / msgpack records (or one ``--value``), one ``send`` each. A record
    the producer refuses as malformed (a bad partition or timestamp) is bad
    input: skipped with ``--skip-bad``, else the run stops at it. One over
    ``max_request_size`` is failed and the run goes on, as for raw lines and
    for records the broker refuses as too large."""
    topic = args.topic
    send = producer.send
    it = iter(records)
    while True:
        intr.reading()
        try:
            rec = next(it)
        except StopIteration:
            return
        finally:
            intr.armed = False
        key = rec.key if rec.key is not None else fixed_key
        part = rec.partition if rec.partition is not None else args.partition
        try:
            fut = send(
                topic, rec.value, key, partition=part, timestamp=rec.timestamp, headers=rec.headers
            )
        except MessageTooLargeError as exc:
            track.refused(rec.where or "record", exc)
            run.count += 1
            intr.check()
            continue
        except (TypeError, ValueError) as exc:
            msg = f"{rec.where or 'record'}: {exc}"
            if not args.skip_bad:
                raise formats.BadInput(msg) from None
            bad.append(msg)
            intr.check()
            continue
        track.add(fut)
        run.count += 1
        run.nbytes += len(rec.value or b"") + len(key or b"")
        if run.count % _PRUNE_EVERY == 0:
            track.prune()
            progress.update(run.count)
        intr.check()


def _report(  # noqa: PLR0917
    args: argparse.Namespace,
    run: _Run,
    track: _Delivery,
    outcome_: tuple[int, int, str],
    bad: list[str],
    stopped: BaseException | None,
    start: float,
) -> int:
    """The summary (exit 0), or the outcome in the interrupt note (130, 143 after
    SIGTERM) or the error (1): acknowledged of handed over, failed, unknown."""
    topic = args.topic
    acked, unknown, waited = outcome_
    for msg in bad[:5]:
        note(f"kpax produce: skipped {msg}")
    if len(bad) > 5:
        note(f"kpax produce: skipped {len(bad) - 5} more bad records")
    outcome = f"{acked:,} of {run.count:,} records acknowledged by {topic!r}"
    if track.failed:
        outcome += f"; {track.failed:,} failed: {track.first_error}"
    if track.unsent:
        outcome += f"; {track.unsent:,} not sent {waited}, so not written: {track.unsent_error}"
    if unknown:
        outcome += (
            f"; {unknown:,} not acknowledged {waited}: outcome unknown "
            "(they may have been written: check the topic before sending them again)"
        )
    if isinstance(stopped, KeyboardInterrupt):
        note(f"kpax produce: interrupted: {outcome}")
        return interrupted_status(stopped)
    if stopped is not None:
        # one line: what stopped the run, then what became of the records before it
        raise CommandError(f"{stopped}; {outcome}")
    if track.failed or track.unsent or unknown:
        raise CommandError(f"produce to {topic!r}: {outcome}")
    if not args.quiet:
        elapsed = time.monotonic() - start
        note(rate_summary("produced", run.count, run.nbytes, elapsed, f"to {topic!r}"))
    return 0
