"""`kafka-local`: start, inspect and stop a detached local Kafka for other processes.

Role: command line face of kpax.testing.local (always the local JVM backend).

    kafka-local start [--brokers N] [--sasl] [--ssl] [--version V] [--config k=v ...]
                      [--state-dir DIR] [--json]
        start brokers, print the PLAINTEXT bootstrap on stdout (or a JSON
        description with --json), leave them running and exit
    kafka-local status [--state-dir DIR] [--json]   exit 0 if running, 1 if not
    kafka-local stop   [--state-dir DIR]            kill brokers, delete their files
    kafka-local fetch  [--version V]                download the jars only

The state dir (default ``$KPAX_CACHE_DIR/run`` or ``~/.cache/kpax/run``) holds
``current.json`` pointing at the running cluster's state file; one cluster per
state dir.

Imports: the standard library and kpax.testing.{errors,jars,local}.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from kpax.testing import jars
from kpax.testing.errors import KafkaStartError
from kpax.testing.local import LocalCluster

__all__ = ["main"]

_POINTER = "current.json"


def _state_dir(arg: str | None) -> Path:
    return Path(arg).expanduser() if arg else jars.cache_dir() / "run"


def _attached(state_dir: Path) -> LocalCluster | None:
    pointer = state_dir / _POINTER
    if not pointer.is_file():
        return None
    state_file = Path(json.loads(pointer.read_text(encoding="utf-8"))["state_file"])
    if not state_file.is_file():
        pointer.unlink(missing_ok=True)
        return None
    return LocalCluster.attach(state_file)


def _describe(k: LocalCluster) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bootstrap": k.bootstrap,
        "version": k.version,
        "brokers": {str(n): a for n, a in k.brokers.items()},
        "running": {str(n): k.is_running(n) for n in k.nodes},
        "pids": {str(n): node.pid for n, node in k.nodes.items()},
        "workdir": str(k.workdir),
    }
    if k.sasl:
        out["sasl_bootstrap"] = k.listener("SASL_PLAINTEXT")
        out["sasl_users"] = k.sasl_users
    if k.ssl:
        out["ssl_bootstrap"] = k.listener("SSL")
        out["ssl_cafile"] = k.ssl_cafile
    return out


def _parse_config(items: list[str]) -> dict[str, str]:
    config = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"kafka-local: --config expects key=value, got {item!r}")
        config[key.strip()] = value.strip()
    return config


def _start(args: argparse.Namespace) -> int:
    state_dir = _state_dir(args.state_dir)
    existing = _attached(state_dir)
    if existing is not None and any(existing.is_running(n) for n in existing.nodes):
        print(
            f"kafka-local: a cluster is already running from {state_dir} "
            f"({existing.bootstrap}); run `kafka-local stop` first",
            file=sys.stderr,
        )
        return 1
    if existing is not None:
        existing.stop()
    state_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    k = LocalCluster(
        args.brokers,
        version=args.version,
        sasl=args.sasl,
        ssl=args.ssl,
        config=_parse_config(args.config),
        workdir=state_dir,
        detached=True,
    ).start()
    state_file = k.detach()
    (state_dir / _POINTER).write_text(json.dumps({"state_file": str(state_file)}), "utf-8")
    if args.json:
        print(json.dumps(_describe(k), indent=2))
    else:
        print(k.bootstrap)
        extra = ""
        if k.sasl:
            extra += f"; SASL_PLAINTEXT {k.listener('SASL_PLAINTEXT')}"
        if k.ssl:
            extra += f"; SSL {k.listener('SSL')} (CA {k.ssl_cafile})"
        print(
            f"kafka-local: Kafka {k.version}, {args.brokers} broker(s) up in "
            f"{time.monotonic() - t0:.1f}s{extra}; stop with `kafka-local stop`",
            file=sys.stderr,
        )
    return 0


def _status(args: argparse.Namespace) -> int:
    k = _attached(_state_dir(args.state_dir))
    if k is None:
        print("kafka-local: not running", file=sys.stderr)
        return 1
    info = _describe(k)
    running = any(info["running"].values())
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for nid, addr in info["brokers"].items():
            state = "running" if info["running"][nid] else "down"
            print(f"broker {nid} {addr} pid {info['pids'][nid]} {state}")
        print(f"bootstrap {info['bootstrap']} (Kafka {info['version']}, {info['workdir']})")
    return 0 if running else 1


def _stop(args: argparse.Namespace) -> int:
    state_dir = _state_dir(args.state_dir)
    k = _attached(state_dir)
    if k is None:
        print("kafka-local: nothing to stop", file=sys.stderr)
        return 0
    k.stop()
    (state_dir / _POINTER).unlink(missing_ok=True)
    if state_dir.is_dir() and not any(state_dir.iterdir()) and args.state_dir is None:
        shutil.rmtree(state_dir, ignore_errors=True)
    print(f"kafka-local: stopped {k.bootstrap}", file=sys.stderr)
    return 0


def _fetch(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    libs = jars.ensure_jars(args.version)
    print(f"Kafka {jars.kafka_version(args.version)} jars in {libs} ({time.monotonic() - t0:.1f}s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kafka-local` console script."""
    parser = argparse.ArgumentParser(prog="kafka-local", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("start", help="start a detached local Kafka and print its bootstrap")
    p.add_argument("--brokers", type=int, default=1)
    p.add_argument("--sasl", action="store_true", help="add a SASL_PLAINTEXT listener")
    p.add_argument("--ssl", action="store_true", help="add an SSL listener")
    p.add_argument("--version", default=None, help=f"default {jars.DEFAULT_KAFKA_VERSION}")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--state-dir", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_start)
    p = sub.add_parser("status", help="show the running cluster")
    p.add_argument("--state-dir", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_status)
    p = sub.add_parser("stop", help="stop the cluster and delete its files")
    p.add_argument("--state-dir", default=None)
    p.set_defaults(func=_stop)
    p = sub.add_parser("fetch", help="download Kafka's jars from Maven Central")
    p.add_argument("--version", default=None)
    p.set_defaults(func=_fetch)
    args = parser.parse_args(argv)
    try:
        rc: int = args.func(args)
    except KafkaStartError as exc:
        print(f"kafka-local: {exc}", file=sys.stderr)
        return 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
