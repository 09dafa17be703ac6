"""`kpax consume TOPIC --share-group G`: read records as a member of a share group.

Role: joins share group G (KIP-932) and prints the records the group gives
this member; several `kpax consume --share-group G` (or any other share
consumers of G) split the records between them, record by record. Every
record is acknowledged once it is printed: accepted, or with ``--ack
release`` / ``--ack reject`` released or rejected (to test how an
application treats poison records); records received but not printed (past
``--count``, or at Ctrl-C) are released for other members. Without
``--follow`` the run ends after ``--idle`` seconds with no record (default
5) or ``--count`` records. Ctrl-C and a closed pipe stop cleanly: what was
printed is acknowledged, the rest released, the group left. Where a new
share group starts reading is the group's ``share.auto.offset.reset``
config (latest unless set: ``kpax groups config G --set
share.auto.offset.reset=earliest``, or the admin API's
``incremental_alter_configs`` on ``ConfigResourceType.GROUP``).

Imports: the public kpax API, kpax.cli.*, the standard library.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import kpax
from kpax.cli import formats
from kpax.cli.errors import UsageError, interrupted_status
from kpax.cli.output import Progress, note, rate_summary
from kpax.cli.settings import Settings

__all__ = ["run"]


def run(args: argparse.Namespace, settings: Settings, writer: formats.Writer) -> int:
    """Consume ``args.topic`` in share group ``args.share_group`` (see the module docstring)."""
    group = args.share_group
    if args.partition:
        raise UsageError("--partition and --share-group do not go together (the group assigns)")
    if args.from_ != "earliest" or args.to:
        raise UsageError(
            "--from and --to do not apply to a share group: where it starts is the group's "
            "share.auto.offset.reset config (kpax groups config "
            f"{group} --set share.auto.offset.reset=earliest)"
        )
    if args.count is not None and args.count < 0:
        raise UsageError(f"bad --count {args.count}: must be >= 0")
    if args.idle <= 0:
        raise UsageError(f"bad --idle {args.idle}: must be > 0")
    ack = kpax.AcknowledgeType[args.ack.upper()]
    conf: dict[str, Any] = {
        **settings.conn,
        "group_id": group,
        "default_api_timeout_ms": int(settings.timeout * 1000),
        "share_acknowledgement_mode": "explicit",
    }
    conf.update(settings.extra)
    limit: int | None = args.count
    count = nbytes = 0
    summary = not args.quiet and sys.stderr.isatty()
    progress = Progress("consuming", limit, enabled=None if not args.quiet else False)
    started = last_record = time.monotonic()
    status = 0
    interrupted = False
    with kpax.ShareConsumer(**conf) as consumer:
        consumer.subscribe([args.topic])
        try:
            while limit is None or count < limit:
                if not args.follow and time.monotonic() - last_record >= args.idle:
                    break
                recs = consumer.poll(0.5)
                if not recs:
                    continue
                last_record = time.monotonic()
                if limit is not None and count + len(recs) > limit:
                    for r in recs[limit - count :]:  # not printed: another member gets them
                        consumer.acknowledge(r, kpax.AcknowledgeType.RELEASE)
                    recs = recs[: limit - count]
                writer.write(recs)
                for r in recs:
                    consumer.acknowledge(r, ack)
                count += len(recs)
                if summary:
                    nbytes += sum(len(r.value) for r in recs if r.value)
                progress.update(count)
        except KeyboardInterrupt as exc:
            status = interrupted_status(exc)
            interrupted = True
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            progress.done()
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                pass
    if interrupted:
        note(f"kpax consume: interrupted after {count:,} records")
    elif summary:
        where = f"from {args.topic!r} in share group {group!r}"
        note(rate_summary("consumed", count, nbytes, time.monotonic() - started, where))
    return status
