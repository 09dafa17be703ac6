"""MkDocs hook: pages generated from kpax's own tables, so they cannot drift.

* ``<!-- kpax:options -->`` becomes the configuration tables, built from the option
  tables the clients check their keyword options against (``COMMON_OPTIONS``,
  ``PRODUCER_OPTIONS``, ``CONSUMER_OPTIONS``, ``ADMIN_OPTIONS``): names and defaults
  come from the code; each option's text is its ``Option.doc`` or, where that is empty,
  the entry in ``OPTION_DOCS`` below. An option without text, or text for an option
  that no table has, fails the build.
* ``<!-- kpax:error-codes -->`` becomes the table of per-code broker error classes
  (``kpax.proto.error_codes``: code, protocol name, class, retriable, base classes).
* Any top-level page of docs/ that ``nav`` does not list is added to the guides, so
  a new page never breaks the strict build.
* A link from a page to a file of the repository outside docs/ (``../bench/...``),
  which works on a code host but not in the site, becomes the file's path as code;
  a link to a file that does not exist fails the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]

#: Text for the options whose ``Option.doc`` is empty (keyed by option name).
OPTION_DOCS: dict[str, str] = {
    # connection options (every client)
    "bootstrap_servers": "`host:port` list (a comma-separated string or a list); the "
    "first positional argument of every client",
    "client_id": "sent with every request; shows in broker logs and quotas",
    "request_timeout_ms": "how long a request may wait for its answer; past it the "
    "connection is closed and the request fails (or is retried)",
    "socket_connection_setup_timeout_ms": "bound on opening one connection (TCP, TLS, "
    "SASL and ApiVersions)",
    "connections_max_idle_ms": "idle connections are closed after this",
    "reconnect_backoff_ms": "first wait before reconnecting to a broker",
    "reconnect_backoff_max_ms": "the reconnect backoff doubles, with jitter, up to this",
    "retry_backoff_ms": "first wait before retrying a failed request",
    "retry_backoff_max_ms": "the retry backoff doubles, with jitter, up to this",
    "metadata_max_age_ms": "metadata is refreshed at least this often",
    "metadata_recovery_strategy": "rebootstrap: when every known broker fails, or one "
    "answers REBOOTSTRAP_REQUIRED, go back to the bootstrap addresses (KIP-899); none: never",
    "security_protocol": "`plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl` (any case)",
    "ssl_context": "an `ssl.SSLContext` of your own (instead of the `ssl_*` files)",
    "ssl_cafile": "PEM file of the CAs that sign the brokers' certificates",
    "ssl_certfile": "PEM certificate of this client (mutual TLS)",
    "ssl_keyfile": "PEM private key of `ssl_certfile`",
    "ssl_password": "password of `ssl_keyfile`",
    "ssl_check_hostname": "check that the broker's certificate names the host",
    "ssl_verify": "verify the broker's certificate (turn off for test clusters only)",
    "sasl_mechanism": "`plain`, `scram-sha-256`, `scram-sha-512`, `oauthbearer` or `gssapi` "
    "(any case)",
    "sasl_plain_username": "user name for PLAIN and SCRAM",
    "sasl_plain_password": "password for PLAIN and SCRAM",
    "sasl_oauth_token_provider": "OAUTHBEARER: a function (or coroutine function) "
    "returning a token string, or an object with a `token()` method, sync or async, "
    "and optionally `extensions()` (kafka-python's and aiokafka's token providers)",
    "connection_max_in_flight": "kpax only: most requests pipelined on one connection",
    # producer
    "acks": '`0`, `1`, `-1` or `"all"` (shown as -1)',
    "linger_ms": "how long a batch waits for more records",
    "batch_size": "bytes per partition batch (uncompressed estimate)",
    "buffer_memory": "bytes of records buffered; `send` blocks up to `max_block_ms` "
    "when full, then `KafkaTimeoutError`",
    "max_block_ms": "bound on `send` waiting for metadata or buffer memory",
    "max_request_size": "a larger record fails at `send` with `MessageTooLargeError`",
    "compression_type": "`none`, `gzip`, `snappy`, `lz4` or `zstd`",
    "retries": "retries of a failed batch (within `delivery_timeout_ms`)",
    "delivery_timeout_ms": "each record succeeds or fails within this (a Produce "
    "request's timeout is capped by the delivery time left); must be >= "
    "`linger_ms + request_timeout_ms`",
    "max_in_flight_requests_per_connection": "Produce requests pipelined per broker",
    "enable_idempotence": "None: on unless `acks` is not all, `retries` is 0 or "
    "in-flight > 5 (Java's rule); True with those is a `ConfigError`",
    "transactional_id": "makes the producer transactional (implies idempotence)",
    "transaction_timeout_ms": "how long the coordinator lets a transaction stay open "
    "before aborting it",
    "allow_auto_create_topics": "let a Metadata request create a missing topic (where "
    "the broker allows it)",
    "metadata_max_idle_ms": "a topic not sent to for this long (nothing of it buffered or in "
    "flight) is forgotten: metadata requests stop naming it, so a deleted topic is not "
    "re-created; the next send looks it up again",
    "partitioner": "a `kpax.producer.partitioner.Partitioner` or "
    "`f(topic, key, value, num_partitions) -> int`; None: Java's (murmur2, sticky)",
    "key_serializer": 'a callable `obj -> bytes`, or `"bytes"`, `"str"`, `"json"`; '
    "None: keys must be bytes",
    "value_serializer": 'a callable `obj -> bytes`, or `"bytes"`, `"str"`, `"json"`; '
    "None: values must be bytes",
    # consumer
    "group_id": "consumer group; None: no group (assign partitions yourself)",
    "group_instance_id": "static membership (KIP-345)",
    "group_protocol": '`"classic"` or `"consumer"` (KIP-848)',
    "group_remote_assignor": 'server-side assignor of `group_protocol="consumer"`',
    "client_rack": "rack of this client, sent to the group coordinator and in Fetch "
    "requests (kpax reads from the leader: no follower fetching)",
    "auto_offset_reset": '`"earliest"`, `"latest"` or `"none"` (raise)',
    "enable_auto_commit": "commit positions every `auto_commit_interval_ms`, before a "
    "revocation and on close",
    "auto_commit_interval_ms": "auto-commit period",
    "isolation_level": '`"read_uncommitted"` or `"read_committed"`',
    "fetch_min_bytes": "the broker answers a fetch once it has this many bytes",
    "fetch_max_wait_ms": "... or once this long has passed",
    "fetch_max_bytes": "most bytes in one Fetch response",
    "max_partition_fetch_bytes": "most bytes per partition in one Fetch response",
    "max_poll_records": "most records one `poll` returns",
    "max_poll_interval_ms": "a group member that does not poll for this long leaves the group",
    "session_timeout_ms": "a member without heartbeats for this long is removed (classic protocol)",
    "heartbeat_interval_ms": "heartbeat period (classic protocol)",
    "partition_assignment_strategy": "assignor names (`range`, `roundrobin`, `sticky`, "
    "`cooperative-sticky`) or Java class names, comma-separated or a list",
    "check_crcs": "check each batch's CRC-32C",
    "default_api_timeout_ms": "bound on blocking calls that take no timeout (commit, "
    "offset lookups, admin operations)",
    "exclude_internal_topics": "accepted for Java compatibility; kpax has no pattern "
    "subscription, so it changes nothing",
    "key_deserializer": "a callable `bytes -> obj` (a null key stays None)",
    "value_deserializer": "a callable `bytes -> obj` (a null value stays None)",
}

TABLES = (
    ("kpax.broker.options", "COMMON_OPTIONS", "Connection options (every client)"),
    ("kpax.producer.options", "PRODUCER_OPTIONS", "Producer options"),
    ("kpax.consumer.options", "CONSUMER_OPTIONS", "Consumer options"),
    ("kpax.consumer.share.options", "SHARE_CONSUMER_OPTIONS", "Share consumer options"),
    ("kpax.parallel.options", "PARALLEL_OPTIONS", "Parallel consumer options"),
    ("kpax.admin.client", "ADMIN_OPTIONS", "Admin options"),
)


def _import(name: str) -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    __import__(name)
    return sys.modules[name]


def _default(value: Any) -> str:
    mib = 1024 * 1024
    if isinstance(value, int) and not isinstance(value, bool) and value >= mib and not value % mib:
        return f"`{value}` ({value // mib} MiB)"
    return f"`{value!r}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def options_markdown() -> str:
    """The configuration tables, from the option tables themselves."""
    tables = [(title, getattr(_import(mod), attr)) for mod, attr, title in TABLES]
    common = tables[0][1]
    seen: set[str] = set()
    missing: list[str] = []
    out: list[str] = []
    for index, (title, table) in enumerate(tables):
        names = [n for n in table if index == 0 or n not in common]
        out += [f"## {title}", "", "| option | default | meaning |", "|---|---|---|"]
        for name in names:
            option = table[name]
            doc = option.doc or OPTION_DOCS.get(name, "")
            if not doc:
                missing.append(name)
            seen.add(name)
            out.append(f"| `{name}` | {_cell(_default(option.default))} | {_cell(doc)} |")
        out.append("")
    unknown = sorted(set(OPTION_DOCS) - seen)
    if missing or unknown:
        raise PluginError(
            "docs/hooks/generated.py: options without text: "
            + (", ".join(missing) or "none")
            + "; OPTION_DOCS entries for options no table has: "
            + (", ".join(unknown) or "none")
        )
    return "\n".join(out)


def error_codes_markdown() -> str:
    """One row per broker error code, from the generated classes."""
    errors = _import("kpax.proto.errors")
    _import("kpax.proto.error_codes")
    rows = ["| code | name | class | retriable | bases |", "|---:|---|---|---|---|"]
    for code in sorted(errors._BY_CODE):
        cls = errors._BY_CODE[code]
        if cls.__module__ != "kpax.proto.error_codes":
            continue
        base = ", ".join(b.__name__ for b in cls.__bases__)
        retriable = "yes" if cls.retriable else "no"
        rows.append(f"| {code} | `{cls.name}` | `{cls.__name__}` | {retriable} | {base} |")
    return "\n".join(rows)


GENERATORS = {
    "<!-- kpax:options -->": options_markdown,
    "<!-- kpax:error-codes -->": error_codes_markdown,
}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Add top-level pages that nav does not list to the guides section."""
    nav = config.nav or []
    listed: set[str] = set()

    def walk(items: Any) -> None:
        for item in items:
            if isinstance(item, str):
                listed.add(item)
            elif isinstance(item, dict):
                for value in item.values():
                    walk(value if isinstance(value, list) else [value])

    walk(nav)
    docs = Path(config.docs_dir)
    extra = sorted(p.name for p in docs.glob("*.md") if p.name not in listed)
    for entry in nav:
        if isinstance(entry, dict) and "Guides" in entry:
            for name in extra:
                entry["Guides"].append({name[:-3].replace("-", " ").capitalize(): name})
    return config


_OUTSIDE_LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)#\s]+)\)")


def _outside_links(markdown: str, page: Page) -> str:
    page_dir = (ROOT / "docs" / page.file.src_path).parent

    def replace(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        path = (page_dir / target).resolve()
        try:
            rel = path.relative_to(ROOT)
        except ValueError:
            return match.group(0)
        if rel.parts[0] == "docs":
            return match.group(0)
        if not path.exists():
            raise PluginError(f"{page.file.src_path}: link to {target}: no such file {rel}")
        shown = f"`{rel.as_posix()}`"
        return shown if text.strip("`") == rel.as_posix() else f"{text} ({shown})"

    return _OUTSIDE_LINK.sub(replace, markdown)


_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>~?([^<]*)</code>")


def _role(match: re.Match[str]) -> str:
    name = match.group(1)
    return f"<code>{name}</code>"


def on_page_content(html: str, page: Page, **_: Any) -> str:
    """Sphinx roles left in docstrings (``:class:`X```) render as plain code."""
    return _ROLE.sub(_role, html)


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """Replace the markers with their generated tables; repository links as paths."""
    for marker, make in GENERATORS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return _outside_links(markdown, page)
