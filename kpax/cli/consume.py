"""`kpax consume TOPIC` and `kpax tail TOPIC`: read records to stdout.

Role: without ``--group``, assign the chosen partitions and seek to
``--from``; with ``--group``, join it (``--from earliest|latest`` applies
where the group has no committed offset) and commit what was printed on
exit (and every few seconds). A group member waits for the group to give it
partitions for as long as that takes, as kafka-console-consumer does (a
member that crashed holds its partitions until its session times out; other
members may hold them all), saying so on stderr once a wait passes
``_WAIT_NOTE`` seconds; ``--timeout`` does not bound that wait. Without
``--follow`` the run ends at the end offsets seen at the start (or
``--to``); ``--count`` stops after N records.
Ctrl-C and a closed pipe stop cleanly: output flushed, offsets committed,
group left. ``tail`` prints the last ``-n`` records (by timestamp across the
chosen partitions), then exits or follows.

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from operator import attrgetter
from typing import Any

import kpax
from kpax.cli import common, formats
from kpax.cli.errors import CommandError, UsageError, interrupted_status
from kpax.cli.output import Progress, note, rate_summary
from kpax.cli.settings import Settings
from kpax.cli.timespec import Spec, parse_spec

TP = kpax.TopicPartition
_PART = attrgetter("partition")
_OFF = attrgetter("offset")
_VALUE = attrgetter("value")
_COMMIT_EVERY = 5.0
#: Seconds a group member goes without partitions before it says it waits.
_WAIT_NOTE = 5.0


def _separator(text: str) -> bytes:
    return text.encode().decode("unicode_escape").encode("latin-1")


def run(args: argparse.Namespace, settings: Settings, *, tail: bool = False) -> int:
    if tail:
        if args.lines < 0:
            raise UsageError(f"bad -n {args.lines}: must be >= 0")
        start = Spec("from_end", args.lines)
        stop: Spec | None = None
        group = None
    else:
        if getattr(args, "share_group", None):
            if args.group:
                raise UsageError("--group and --share-group do not go together")
            from kpax.cli import share

            return share.run(args, settings, _writer(args))
        start = parse_spec(args.from_, what="--from")
        stop = parse_spec(args.to, what="--to") if args.to else None
        group = args.group
        if args.count is not None and args.count < 0:
            raise UsageError(f"bad --count {args.count}: must be >= 0")
        if group and args.partition:
            raise UsageError("--partition and --group do not go together (the group assigns)")
        if group and start.kind not in ("earliest", "latest"):
            raise UsageError(
                "with --group, --from is earliest or latest (where the group has no "
                "committed offset); move a group's offsets with `kpax rollback`"
            )
    writer = _writer(args)
    isolation = getattr(args, "isolation", "read_uncommitted")
    with common.admin(settings) as adm:
        parts = common.pick_partitions(
            common.topic_partitions(adm, args.topic, settings), args.partition, args.topic
        )
        tps = [TP(args.topic, p) for p in parts]
        _, latest = common.earliest_latest(adm, tps, settings.timeout, isolation)
        begin = None if group else common.resolve_spec(adm, tps, start, settings.timeout)
        if stop is not None:
            end: dict[TP, int] | None = common.resolve_spec(adm, tps, stop, settings.timeout)
        elif args.follow:
            end = None
        else:
            end = latest
    conf: dict[str, Any] = {
        **settings.conn,
        "auto_offset_reset": start.kind if group else "earliest",
        "enable_auto_commit": False,
        "isolation_level": isolation,
        "max_poll_records": 10000,
        "default_api_timeout_ms": int(settings.timeout * 1000),
    }
    if group:
        conf["group_id"] = group
    conf.update(settings.extra)
    session = _Session(args, writer, end, tail=tail)
    with kpax.Consumer(**conf) as consumer:
        session.consumer = consumer
        if group:
            consumer.subscribe([args.topic])  # the loop waits for the assignment
        else:
            assert begin is not None
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, begin[tp])
            if end is not None:
                session.done = {tp for tp in tps if begin[tp] >= end[tp]}
            session.owned = set(tps)
        return session.loop(group)


def _writer(args: argparse.Namespace) -> formats.Writer:
    return formats.Writer(
        sys.stdout.buffer,
        args.format,
        args.key_separator.encode() if getattr(args, "key_separator", None) else None,
        _separator(getattr(args, "separator", "\\n")),
    )


def _last_offsets(recs: list[Any], one_partition: bool) -> dict[int, int]:
    """The last offset of each partition among ``recs`` (a partition's records are in
    offset order, so with one partition it is the last record's)."""
    if not recs:
        return {}
    if one_partition:
        last = recs[-1]
        return {last.partition: last.offset}
    return dict(zip(map(_PART, recs), map(_OFF, recs), strict=False))


class _Session:
    def __init__(
        self,
        args: argparse.Namespace,
        writer: formats.Writer,
        end: dict[TP, int] | None,
        tail: bool,
    ) -> None:
        self.args = args
        self.writer = writer
        self.end = end
        self.tail = tail
        self.limit: int | None = None if tail else args.count
        self.consumer: kpax.Consumer | None = None
        self.done: set[TP] = set()
        self.owned: set[TP] = set()
        self.last: dict[TP, int] = {}  # last printed offset per partition (for commits)
        self.count = 0
        self.nbytes = 0
        self.buffered: list[Any] = []  # tail: records before the end
        self.summary = not args.quiet and sys.stderr.isatty() and not tail

    def finished(self) -> bool:
        if self.limit is not None and self.count >= self.limit:
            return True
        return self.end is not None and bool(self.owned) and self.owned <= self.done

    def loop(self, group: str | None) -> int:
        c = self.consumer
        assert c is not None
        topic = self.args.topic
        end = self.end
        progress = Progress("consuming", self.limit, enabled=None if not self.args.quiet else False)
        started = time.monotonic()
        next_commit = started + _COMMIT_EVERY
        status = 0
        interrupted = False
        unassigned_since: float | None = None  # group: since when this member has none
        told_waiting = False
        try:
            while not self.finished():
                if group:
                    self.owned = {tp for tp in c.assignment() if tp.topic == topic}
                    if self.owned:
                        unassigned_since, told_waiting = None, False
                    elif unassigned_since is None:
                        unassigned_since = time.monotonic()
                    elif not told_waiting and time.monotonic() - unassigned_since > _WAIT_NOTE:
                        told_waiting = True  # once per wait
                        if not self.args.quiet:
                            progress.done()
                            note(
                                f"kpax consume: waiting for group {group!r} to assign partitions "
                                f"of {topic!r} to this member (Ctrl-C to stop): other members "
                                "hold them, or one that stopped without leaving the group, "
                                "until its session times out"
                            )
                    if end is not None:
                        self.done |= {tp for tp in self.owned if end.get(tp, 0) <= 0}
                    if self.finished():
                        break
                recs = c.poll(0.5)
                if recs:
                    self._handle(recs)
                    progress.update(self.count)
                elif end is not None:
                    for tp in self.owned - self.done:
                        if c.position(tp) >= end[tp]:
                            self.done.add(tp)
                if group and time.monotonic() >= next_commit:
                    self._commit(final=False)
                    next_commit = time.monotonic() + _COMMIT_EVERY
            if self.tail and self.buffered:
                self._flush_tail()
                if self.args.follow:
                    self.tail = False
                    self.end = None
                    return self.loop(group)
        except KeyboardInterrupt as exc:
            status = interrupted_status(exc)
            interrupted = True
        except BrokenPipeError:
            _silence_stdout()
            status = 0
        finally:
            progress.done()
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                _silence_stdout()
            if group:
                self._commit(final=True)
        if interrupted:
            note(f"kpax consume: interrupted after {self.count:,} records")
        elif self.summary:
            where = f"from {topic!r}"
            note(
                rate_summary("consumed", self.count, self.nbytes, time.monotonic() - started, where)
            )
        return status

    def _handle(self, recs: list[Any]) -> None:
        end = self.end
        one = len(self.owned) == 1
        lastoff = _last_offsets(recs, one)
        topic = self.args.topic
        if end is not None:
            over = {p for p, off in lastoff.items() if off >= end[TP(topic, p)]}
            if over:
                recs = [
                    r
                    for r in recs
                    if r.partition not in over or r.offset < end[TP(topic, r.partition)]
                ]
                lastoff = _last_offsets(recs, one)
        if self.limit is not None and self.count + len(recs) > self.limit:
            recs = recs[: self.limit - self.count]
            lastoff = _last_offsets(recs, one)
        if not recs:
            return
        for p, off in lastoff.items():
            tp = TP(topic, p)
            self.last[tp] = off
            if end is not None and off + 1 >= end[tp]:
                self.done.add(tp)
        self.count += len(recs)
        if self.tail:
            self.buffered.extend(recs)
            return
        if self.summary:
            self.nbytes += sum(map(len, filter(None, map(_VALUE, recs))))
        self.writer.write(recs)

    def _flush_tail(self) -> None:
        recs = sorted(self.buffered, key=lambda r: (r.timestamp, r.partition, r.offset))
        n = self.args.lines
        self.writer.write(recs[-n:] if n else [])
        self.buffered = []

    def _commit(self, final: bool) -> None:
        c = self.consumer
        assert c is not None
        if not self.last:
            return
        offsets = {tp: off + 1 for tp, off in self.last.items()}
        try:
            c.commit(offsets)
        except (kpax.CommitFailedError, kpax.RebalanceInProgressCommitError) as exc:
            if final:
                note(f"kpax consume: could not commit offsets of group {self.args.group!r}: {exc}")
        except kpax.KafkaError as exc:
            if final:
                raise CommandError(f"commit offsets of group {self.args.group!r}: {exc}") from None


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
