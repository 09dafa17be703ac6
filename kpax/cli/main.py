"""The `kpax` command: argument parsing, dispatch, errors and exit codes.

Role: build the argparse tree (global connection options and every
subcommand, with examples in each help), run the subcommand, and turn
failures into one line on stderr: exit 2 for usage errors (bad flags, time
formats, config files), 1 for Kafka/connection/data errors, 130 for Ctrl-C
(SIGINT), 143 for ``kill`` (SIGTERM).
``--debug`` shows tracebacks and kpax's logs.

Imports: kpax.cli.* (subcommand modules lazily), kpax.errors, kpax.proto.topic_names (lazily),
the standard library.
"""

from __future__ import annotations

import argparse
import gc
import logging
import re
import signal
import sys
import textwrap
from collections.abc import Sequence

from kpax.cli.errors import (
    EXIT_ERROR,
    EXIT_USAGE,
    CliError,
    Interrupted,
    UsageError,
    interrupted_status,
)
from kpax.cli.settings import DEFAULT_TIMEOUT, MAX_TIMEOUT, check_timeout

_FMT = argparse.RawDescriptionHelpFormatter

MAIN_HELP = """\
A Kafka command-line client: produce, consume, inspect and administer a cluster.

The cluster address comes from -b/--bootstrap-server, else $KPAX_BROKERS,
else a config file (--config, $KPAX_CONFIG, ./kpax.toml, ~/.config/kpax/config.toml)
with profiles per cluster (--profile), which may also hold TLS and SASL settings;
--config also reads Java client .properties files and kcat.conf, and -X takes
Java names (-X sasl.jaas.config='...', -X linger.ms=20).

examples:
  export KPAX_BROKERS=127.0.0.1:9092
  kpax topics create orders --partitions 6
  seq 1000 | kpax produce orders
  kpax consume orders --from -1h --format json
  kpax consume orders --group billing --count 100
  kpax tail orders -n 5
  kpax offsets orders --group billing
  kpax rollback --group billing orders --to 2024-05-01T00:00:00Z   # the plan
  kpax rollback --group billing orders --to 2024-05-01T00:00:00Z --execute
  kpax meta orders
  kpax --profile prod groups list --output json

Commands that move committed offsets or delete (rollback, topics delete,
groups delete) print their plan and change nothing unless given --execute.

exit status: 0 ok, 1 Kafka/connection/data error, 2 usage error, 130 interrupted
(Ctrl-C), 143 terminated (kill, SIGTERM).
"""

PRODUCE_HELP = """\
Write records to TOPIC: one per input line from stdin or --file (raw), one
JSON object per line (json: key, value, headers, partition, timestamp), a
msgpack stream of such maps (msgpack), or a single --value. JSON bytes that
are not text are written {"base64": "..."}. At the end of the input (or on
Ctrl-C) the records read get --timeout seconds to be acknowledged; the
summary on stderr counts them after that: acknowledged, failed, and of
unknown outcome (possibly written: check before sending them again). A
record too large for the producer (max_request_size) or the topic
(max.message.bytes) is not written and counts as failed; the run goes on.

examples:
  seq 100000 | kpax produce orders
  kpax produce orders --file records.txt --compression lz4 --acks 1
  echo 'user-1:hello' | kpax produce orders --key-separator :
  kpax produce orders --value '{"id": 1}' --key k1 --header source=cli
  kpax produce orders --format json <<< '{"key":"k","value":{"base64":"AAE="},"headers":{"h":"v"}}'
  kpax produce orders --format json --skip-bad --file messy.jsonl
"""

CONSUME_HELP = """\
Read records of TOPIC to stdout. Without --group: the chosen partitions (all
by default) from --from; with --group: join the group, start at its committed
offsets (--from earliest|latest where it has none) and commit what was
printed; the member waits for the group to assign it partitions as long as
that takes (a crashed member holds its own until its session times out),
saying so on stderr after 5 s. Stops at the end offsets seen at the start
(or --to), after --count records, or never with --follow.

SPEC (--from/--to): earliest, latest, OFFSET, -N (N before the end), or a
TIME: ISO-8601 (2024-05-01T12:00:00Z), relative (-1h, -30m, -10s, -2d), @epoch_ms.

examples:
  kpax consume orders > orders.txt
  kpax consume orders --format json --from -1h
  kpax consume orders --partition 0 --partition 2 --from 100 --to 200
  kpax consume orders --group billing --count 10
  kpax consume orders --follow --from latest --key-separator ' => '
  kpax consume orders --isolation read_committed --format msgpack > dump.mp
"""

TAIL_HELP = """\
Print the last -n records of TOPIC (ordered by timestamp across partitions),
then exit, or keep printing new ones with --follow.

examples:
  kpax tail orders
  kpax tail orders -n 100 --partition 3 --format json
  kpax tail orders -n 0 --follow
"""

OFFSETS_HELP = """\
Per partition of TOPIC: earliest and latest offsets, record count; with
--group the group's committed offset and lag (for a share group: its start
offset and lag); with --time the first offset at or after that time.

examples:
  kpax offsets orders
  kpax offsets orders --group billing --output json
  kpax offsets orders --time -1h
"""

ROLLBACK_HELP = """\
Move the committed offsets of GROUP on TOPIC to --to (earliest, latest,
OFFSET, or a TIME such as -2h), or by --shift-by N records from the
committed offsets (from --to's offsets if both are given), clamped to the
log. Without --execute it only prints the plan (partition, current, new,
delta; and which partitions move forward, skipping records the group has not
read) and changes nothing, as kafka-consumer-groups --reset-offsets without
--execute. Refused while the group has active members.

examples:
  kpax rollback --group billing orders --to -2h
  kpax rollback --group billing orders --to -2h --execute
  kpax rollback --group billing orders --shift-by -100 --execute
  kpax rollback --group billing orders --to latest --shift-by -5   # 5 before the end
  kpax rollback --group billing orders --to 2024-05-01T00:00:00Z --execute -o json
  kpax rollback --group billing orders --to earliest --partition 0 --execute
"""

META_HELP = """\
Brokers, controller, and topics with each partition's leader, replicas and ISR.

examples:
  kpax meta
  kpax meta orders payments --output json
"""

COORD_HELP = """\
The coordinator broker of a consumer group.

examples:
  kpax coord --group billing
"""

TOPICS_HELP = """\
List, describe, create, delete topics and change their configs.

examples:
  kpax topics list
  kpax topics create orders --partitions 6 --set retention.ms=86400000
  kpax topics describe orders --output json
  kpax topics alter-config orders --set retention.ms=3600000 --delete cleanup.policy
  kpax topics delete orders             # the plan: partitions and records to go
  kpax topics delete orders --execute
"""

GROUPS_HELP = """\
List, describe (members, committed offsets, lag) and delete consumer groups
and share groups (for share groups: start offsets and lag); show or change a
group's configs.

examples:
  kpax groups list --output json
  kpax groups describe billing
  kpax groups delete billing            # the plan: state, members, committed offsets
  kpax groups delete billing --execute
  kpax groups config workers            # session timeouts, share.* settings...
  kpax groups config workers --set share.auto.offset.reset=earliest
"""


def seconds(text: str) -> float:
    """``--timeout``'s type: a finite number of seconds in (0, MAX_TIMEOUT]
    (argparse turns the error into a usage error, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    try:
        return check_timeout(value, text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _global_options(p: argparse.ArgumentParser, sub: bool = False) -> None:
    """The connection options; on subcommands too (so they may follow it),
    there with suppressed defaults so the main parser's values stand."""
    if sub:
        p.argument_default = argparse.SUPPRESS
    g = p.add_argument_group(
        "connection (also accepted before the command)" if sub else "connection"
    )
    g.add_argument("-b", "--bootstrap-server", metavar="HOST:PORT[,...]", help="cluster address")
    g.add_argument(
        "--config",
        metavar="PATH",
        help="config file: TOML with profiles, a Java client .properties file or a kcat.conf",
    )
    g.add_argument("--profile", help="profile of the config file ($KPAX_PROFILE)")
    g.add_argument(
        "--security-protocol",
        choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        type=str.upper,
    )
    g.add_argument("--sasl-mechanism", help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI")
    g.add_argument("--sasl-username", metavar="USER")
    g.add_argument("--sasl-password", metavar="PASS", help="(better: $KPAX_SASL_PASSWORD)")
    g.add_argument("--ssl-cafile", metavar="PEM")
    g.add_argument("--ssl-certfile", metavar="PEM")
    g.add_argument("--ssl-keyfile", metavar="PEM")
    g.add_argument(
        "--ssl-no-verify", action="store_true", help="do not verify the broker certificate"
    )
    g.add_argument(
        "-X",
        dest="extra",
        action="append",
        metavar="KEY=VALUE",
        help="a kpax producer/consumer option, e.g. -X linger_ms=20 (repeatable)",
    )
    g.add_argument(
        "--timeout",
        type=seconds,
        # on a subcommand: no default, or it would undo `kpax --timeout 3 meta`
        default=argparse.SUPPRESS if sub else DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"bound on connecting, each admin call and the final delivery of produce "
        f"(default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g})",
    )
    p.add_argument("--debug", action="store_true", help="tracebacks and kpax's debug logs")
    if sub:
        p.argument_default = None


def _output(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--output",
        "-o",
        choices=["table", "json"],
        default="table",
        help="table for people (default) or json for programs",
    )


def _record_format(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        "-f",
        choices=["raw", "json", "msgpack"],
        default="raw",
        help="record format (default raw: one value per line)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary or progress on stderr")


def _execute(p: argparse.ArgumentParser, what: str) -> None:
    """``--execute`` (act) or ``--dry-run`` (the default: print the plan only)."""
    m = p.add_mutually_exclusive_group()
    m.add_argument(
        "--execute",
        action="store_true",
        help=f"{what} (without it: print the plan, change nothing)",
    )
    m.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and change nothing (the default)",
    )


def _partition_list(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--partition",
        "-p",
        type=int,
        action="append",
        metavar="P",
        help="only this partition (repeatable)",
    )


class _Nested:
    """Adds actions (``topics create``...) that accept the connection options too."""

    def __init__(self, sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        self.sub = sub

    def add_parser(self, name: str, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = self.sub.add_parser(name, help=help, description=help)
        _global_options(p, sub=True)
        return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kpax", description=MAIN_HELP, formatter_class=_FMT)
    from kpax import __version__

    parser.add_argument("--version", action="version", version=f"kpax {__version__}")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, text: str) -> argparse.ArgumentParser:
        first = text.splitlines()[0]
        p = sub.add_parser(name, help=first, description=text, formatter_class=_FMT)
        _global_options(p, sub=True)
        return p

    p = add("produce", PRODUCE_HELP)
    p.add_argument("topic")
    _record_format(p)
    p.add_argument("--file", "-F", metavar="PATH", help="read records from PATH instead of stdin")
    p.add_argument("--value", help="produce this one record")
    p.add_argument("--key", "-k", help="key of every record (raw) unless the input has one")
    p.add_argument("--key-separator", "-K", metavar="SEP", help="raw lines are KEY SEP VALUE")
    p.add_argument(
        "--header", "-H", action="append", metavar="K=V", help="header on every record (repeatable)"
    )
    p.add_argument(
        "--partition", "-p", type=int, help="write to this partition (default: partitioner)"
    )
    p.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all")
    p.add_argument(
        "--compression", "-z", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none"
    )
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip malformed json/msgpack records (reported) instead of stopping",
    )

    p = add("consume", CONSUME_HELP)
    p.add_argument("topic")
    _record_format(p)
    p.add_argument("--group", "-g", help="consume as a member of this group and commit")
    p.add_argument(
        "--share-group",
        "-G",
        metavar="GROUP",
        help="consume as a member of this share group (records split between its members)",
    )
    p.add_argument(
        "--ack",
        choices=["accept", "release", "reject"],
        default="accept",
        help="--share-group: acknowledge each printed record so (default accept)",
    )
    p.add_argument(
        "--idle",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="--share-group without --follow: stop after this long with no record (default 5)",
    )
    _partition_list(p)
    p.add_argument(
        "--from",
        dest="from_",
        default="earliest",
        metavar="SPEC",
        help="where to start (default earliest)",
    )
    p.add_argument("--to", metavar="SPEC", help="stop before this offset/time in each partition")
    p.add_argument("--count", "-c", type=int, metavar="N", help="stop after N records")
    p.add_argument("--follow", action="store_true", help="keep reading new records")
    p.add_argument("--key-separator", "-K", metavar="SEP", help="raw: print KEY SEP VALUE")
    p.add_argument(
        "--separator", default="\\n", metavar="SEP", help="raw: record separator (default \\n)"
    )
    p.add_argument(
        "--isolation", choices=["read_uncommitted", "read_committed"], default="read_uncommitted"
    )

    p = add("tail", TAIL_HELP)
    p.add_argument("topic")
    _record_format(p)
    p.add_argument("-n", dest="lines", type=int, default=10, help="how many records (default 10)")
    _partition_list(p)
    p.add_argument("--follow", action="store_true", help="then keep printing new records")
    p.add_argument("--key-separator", "-K", metavar="SEP", help="raw: print KEY SEP VALUE")

    p = add("offsets", OFFSETS_HELP)
    p.add_argument("topic")
    p.add_argument("--group", "-g", help="add this group's committed offsets and lag")
    p.add_argument("--time", metavar="TIME", help="add the offset at this time")
    _partition_list(p)
    _output(p)

    p = add("rollback", ROLLBACK_HELP)
    p.add_argument("topic")
    p.add_argument("--group", "-g", required=True)
    p.add_argument(
        "--to", metavar="SPEC", help="earliest, latest, OFFSET or a TIME (-2h, ISO-8601, @ms)"
    )
    p.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="move N records (negative: back) from the committed offsets, or from --to's",
    )
    _partition_list(p)
    _execute(p, "move the offsets")
    _output(p)

    p = add("meta", META_HELP)
    p.add_argument("topics", nargs="*", metavar="TOPIC")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    _output(p)

    p = add("coord", COORD_HELP)
    p.add_argument("--group", "-g", required=True)
    _output(p)

    p = add("topics", TOPICS_HELP)
    tsub = _Nested(p.add_subparsers(dest="action", metavar="ACTION", required=True))
    t = tsub.add_parser("list", help="topic names")
    t.add_argument("--internal", action="store_true")
    _output(t)
    t = tsub.add_parser("describe", help="partitions and non-default configs")
    t.add_argument("topics", nargs="+", metavar="TOPIC")
    t.add_argument("--all-configs", action="store_true", help="show default configs too")
    _output(t)
    t = tsub.add_parser("create", help="create topics")
    t.add_argument("topics", nargs="+", metavar="TOPIC")
    t.add_argument("--partitions", "-P", type=int, default=1)
    t.add_argument("--replication-factor", "-r", type=int, default=1)
    t.add_argument("--set", action="append", metavar="K=V", help="topic config (repeatable)")
    t = tsub.add_parser("delete", help="delete topics (the plan unless --execute)")
    t.add_argument("topics", nargs="+", metavar="TOPIC")
    _execute(t, "delete the topics")
    _output(t)
    t = tsub.add_parser("alter-config", help="set or delete topic configs")
    t.add_argument("topic")
    t.add_argument("--set", action="append", metavar="K=V")
    t.add_argument("--delete", action="append", metavar="K")

    p = add("groups", GROUPS_HELP)
    gsub = _Nested(p.add_subparsers(dest="action", metavar="ACTION", required=True))
    g = gsub.add_parser("list", help="groups, their state and type")
    _output(g)
    g = gsub.add_parser(
        "describe", help="members, committed offsets (share groups: start offsets), lag"
    )
    g.add_argument("groups", nargs="+", metavar="GROUP")
    _output(g)
    g = gsub.add_parser("delete", help="delete (empty) groups (the plan unless --execute)")
    g.add_argument("groups", nargs="+", metavar="GROUP")
    _execute(g, "delete the groups")
    _output(g)
    g = gsub.add_parser("config", help="show a group's configs, or change them with --set/--delete")
    g.add_argument("group", metavar="GROUP")
    g.add_argument("--set", action="append", metavar="K=V", help="set a config (repeatable)")
    g.add_argument(
        "--delete", action="append", metavar="K", help="back to the default (repeatable)"
    )
    _output(g)
    return parser


def _check_topic_names(args: argparse.Namespace) -> None:
    """A TOPIC argument Kafka would refuse (a lone surrogate from a non-UTF-8
    argument, a space, 250 characters...) is a usage error naming it, before
    anything connects."""
    from kpax.errors import InvalidTopicError
    from kpax.proto.topic_names import check_topic

    names = [args.topic] if isinstance(getattr(args, "topic", None), str) else []
    names += getattr(args, "topics", None) or []
    for name in names:
        try:
            check_topic(name)
        except InvalidTopicError as exc:
            raise UsageError(exc.message) from None


def _dispatch(args: argparse.Namespace) -> int:
    from kpax.cli import settings as s

    _check_topic_names(args)
    conf = s.client_config(args)
    cmd = args.command
    if cmd == "produce":
        from kpax.cli import produce

        return produce.run(args, conf)
    if cmd in ("consume", "tail"):
        from kpax.cli import consume

        return consume.run(args, conf, tail=cmd == "tail")
    if cmd in ("offsets", "rollback"):
        from kpax.cli import offsets

        return offsets.offsets(args, conf) if cmd == "offsets" else offsets.rollback(args, conf)
    if cmd in ("meta", "coord"):
        from kpax.cli import meta

        return meta.meta(args, conf) if cmd == "meta" else meta.coord(args, conf)
    if cmd == "topics":
        from kpax.cli import topics

        return topics.run(args, conf)
    from kpax.cli import groups

    return groups.run(args, conf)


#: Options whose value may be a relative time such as ``-1h``.
_TIME_OPTIONS = frozenset({"--from", "--to", "--time"})
_RELATIVE_TIME = re.compile(r"^-\d+(?:\.\d+)?(?:ms|s|m|h|d|w)$")


def _attach_relative_times(argv: Sequence[str]) -> list[str]:
    """``--from -1h`` as ``--from=-1h``: argparse takes a value that starts with
    '-' only when it looks like a negative number (``-5``), so the documented
    ``--from -1h`` would be "expected one argument"."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in _TIME_OPTIONS and _RELATIVE_TIME.match(arg) and "--" not in out:
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return textwrap.shorten(text, 600, placeholder=" ...")


def _terminate(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = _attach_relative_times(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)  # exits 2 with a usage line on bad arguments
    prog = f"kpax {args.command}"
    if args.debug:
        logging.basicConfig(
            level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
    else:
        logging.basicConfig(level=logging.CRITICAL)
    # A short-lived process moving many acyclic records: collect cycles rarely
    # (~10% faster consume/produce runs); reference counting frees the records.
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(200_000, 20, 50)
    # SIGPIPE does not exist on Windows: there a closed pipe is only a BrokenPipeError.
    sigpipe: signal.Signals | None = getattr(signal, "SIGPIPE", None)
    handled = tuple(s for s in (sigpipe, signal.SIGINT, signal.SIGTERM) if s is not None)
    saved = {sig: signal.getsignal(sig) for sig in handled}
    if sigpipe is not None and args.command not in ("consume", "tail"):
        signal.signal(sigpipe, signal.SIG_DFL)  # `kpax meta | head` ends quietly
    # Ctrl-C, and `kill` (TERM), also for a job started in the background with
    # SIGINT ignored: a clean stop (flush, commit, leave the group).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return _run(args, prog)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _run(args: argparse.Namespace, prog: str) -> int:
    from kpax.errors import ConfigError, KafkaError

    try:
        return _dispatch(args)
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"{prog}: interrupted\n")
        return interrupted_status(exc)
    except CliError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"{prog}: {_one_line(exc)}\n")
        return exc.code
    except ConfigError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"{prog}: bad option: {_one_line(exc)}\n")
        return EXIT_USAGE
    except KafkaError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"{prog}: {_one_line(exc)}\n")
        return EXIT_ERROR
    except Exception as exc:
        if args.debug:
            raise
        sys.stderr.write(f"{prog}: {type(exc).__name__}: {_one_line(exc)} (--debug for details)\n")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
