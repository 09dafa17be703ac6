"""Options are declared once, and users' type checkers see them.

Each option is one key of its client's config TypedDict (``ProducerConfig``,
``ConsumerConfig``, ``ShareConsumerConfig``, ``AdminConfig``,
``ParallelConsumerConfig``), annotated with its ``Option``: the option tables
the clients check against, and the docs' tables, are read from those keys,
and the constructors take ``**config: Unpack[...]``, so a misspelt option name
is a mypy error (and an IDE's).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import kpax
from kpax.admin.base import ADMIN_OPTIONS, AdminConfig
from kpax.broker.options import COMMON_OPTIONS, ConnectionConfig
from kpax.config import CALLBACK_OPTIONS, CallbackConfig, Option, Timeouts
from kpax.consumer.options import (
    CONSUMER_OPTIONS,
    ConsumerConfig,
    ConsumerSettings,
    FetchConfig,
)
from kpax.consumer.share.options import (
    SHARE_CONSUMER_OPTIONS,
    ShareConsumerConfig,
    ShareSettings,
)
from kpax.parallel.options import PARALLEL_OPTIONS, ParallelConsumerConfig, ParallelOptions
from kpax.producer.options import (
    PRODUCER_OPTIONS,
    ProducerConfig,
    ProducerSettings,
    resolve_producer_config,
)

ROOT = Path(__file__).resolve().parents[2]

TABLES = [
    (ConnectionConfig, COMMON_OPTIONS),
    (CallbackConfig, CALLBACK_OPTIONS),
    (ProducerConfig, PRODUCER_OPTIONS),
    (ConsumerConfig, CONSUMER_OPTIONS),
    (ShareConsumerConfig, SHARE_CONSUMER_OPTIONS),
    (AdminConfig, ADMIN_OPTIONS),
    (ParallelOptions, PARALLEL_OPTIONS),
    (ParallelConsumerConfig, {**CONSUMER_OPTIONS, **PARALLEL_OPTIONS}),
]


@pytest.mark.parametrize(("typed", "table"), TABLES, ids=lambda t: getattr(t, "__name__", ""))
def test_the_typed_dict_and_the_option_table_name_the_same_options(typed, table) -> None:
    hints = get_type_hints(typed, include_extras=True)
    assert list(hints) == list(table)
    assert typed.__total__ is False  # every option may be left out
    for name, hint in hints.items():
        (option,) = [m for m in hint.__metadata__ if isinstance(m, Option)]
        assert table[name] is not None
        assert option.default == table[name].default or table[name].default is None


def test_the_public_names_are_the_declarations() -> None:
    assert kpax.ProducerConfig is ProducerConfig
    assert kpax.ConsumerConfig is ConsumerConfig
    assert kpax.ShareConsumerConfig is ShareConsumerConfig
    assert kpax.AdminConfig is AdminConfig
    assert kpax.ParallelConsumerConfig is ParallelConsumerConfig


@pytest.mark.parametrize(
    ("settings", "table"),
    [
        (ProducerSettings, PRODUCER_OPTIONS),
        (ConsumerSettings, CONSUMER_OPTIONS),
        (ShareSettings, SHARE_CONSUMER_OPTIONS),
    ],
    ids=lambda t: getattr(t, "__name__", ""),
)
def test_every_settings_field_is_a_declared_option(settings, table) -> None:
    """The typed settings the components read are a view of the declared options
    (tools/gen_settings.py writes their fields): each field is the option of its
    name, every option of the client but the connection options the broker
    layer takes (the timeouts excepted), in declaration order; frozen."""
    connection = set(get_type_hints(ConnectionConfig))
    own = [n for n in table if n not in connection or n in Timeouts.__annotations__]
    assert [f.name for f in dataclasses.fields(settings)] == own
    assert settings.__dataclass_params__.frozen
    assert "__annotations__" not in vars(settings)  # the subclass names no field itself


SNIPPET = """
import asyncio
import kpax
import kpax.aio

kpax.Producer("h:9092", linger_ms=5, acks="all")
kpax.Producer("h:9092", linger_mss=5)  # E "linger_mss" ... did you mean "linger_ms"
kpax.Consumer("t", group_id="g", auto_offset_rest="earliest")  # E "auto_offset_rest"
kpax.Admin("h:9092", default_api_timeout=5)  # E "default_api_timeout"
kpax.ShareConsumer("t", group_id="g", share_acknowledgment_mode="explicit")  # E "share_ackn
kpax.Producer("h:9092", linger_ms="5")  # E "linger_ms" ... "str"
kpax.Producer({"bootstrap.servers": "h:9092", "linger.ms": "5"})  # a dict: not checked
kpax.Producer(bootstrap_servers="h:9092", compression_type="lz4")
kpax.ParallelConsumer("h:9092", group_id="g", ordering="key", max_concurrency=8)
kpax.ParallelConsumer("h:9092", group_id="g", orderng="key")  # E "orderng"
kpax.Prodcer("h:9092")  # E "Prodcer" ... "Producer"


async def main() -> None:
    kpax.aio.Producer("h:9092", lingerms=5)  # E "lingerms"
    kpax.aio.Consumer("h:9092", group_idd="g")  # E "group_idd"
    kpax.aio.ParallelConsumer("h:9092", group_id="g", max_concurency=8)  # E "max_concurency"
    config: kpax.ConsumerConfig = {"group_id": "g", "enable_auto_comit": False}  # E "enable_a
"""


def test_a_misspelt_option_fails_in_mypy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mypy (as a user runs it) reports each misspelt option name, a value of the
    wrong type and a misspelt ``kpax.Name`` (the package's lazy ``__getattr__`` is
    hidden from type checkers), on its line; the correct calls and a peer-style
    dict pass."""
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET.lstrip("\n"), encoding="utf-8")
    expected = {
        number: line.split("# E ", 1)[1].split(" ... ")
        for number, line in enumerate(source.read_text().splitlines(), 1)
        if "# E " in line
    }
    monkeypatch.setenv("MYPYPATH", str(ROOT))  # this checkout's kpax
    monkeypatch.chdir(ROOT)
    out, err, _ = api.run(
        [
            "--strict",
            "--follow-imports=silent",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(source),
        ]
    )
    errors = {int(line.split(":")[1]): line for line in out.splitlines() if ": error:" in line}
    assert sorted(errors) == sorted(expected), out + err
    for number, words in expected.items():
        for word in words:
            assert word.strip() in errors[number], errors[number]


def test_the_consumer_and_share_consumer_share_their_fetch_options() -> None:
    """Declared once for both (they had drifted: the share consumer refused
    fetch_max_wait_ms=0, which the consumer and Java's share consumer accept)."""
    shared = get_type_hints(FetchConfig, include_extras=True)
    assert "fetch_max_wait_ms" in shared
    for name in shared:
        assert CONSUMER_OPTIONS[name] is SHARE_CONSUMER_OPTIONS[name], name
    for resolve_table in (CONSUMER_OPTIONS, SHARE_CONSUMER_OPTIONS):
        check = resolve_table["fetch_max_wait_ms"].check
        assert check is not None and check(0) == 0


@pytest.mark.parametrize(
    "make, option",
    [
        (lambda **kw: kpax.aio.Producer("localhost:9092", **kw), "linger_ms"),
        (lambda **kw: kpax.aio.Producer("localhost:9092", **kw), "batch_size"),
        (lambda **kw: kpax.aio.Consumer("localhost:9092", **kw), "max_poll_records"),
        (lambda **kw: kpax.aio.Admin("localhost:9092", **kw), "request_timeout_ms"),
    ],
)
def test_none_for_an_option_that_takes_no_none_is_a_config_error_naming_it(
    make: Any, option: str
) -> None:
    """None skipped every check and failed later with a bare TypeError
    (``NoneType + int`` in the delivery timeout rule, ``'<' not supported``)."""
    with pytest.raises(kpax.ConfigError, match=rf"option {option}=None: must be an integer"):
        make(**{option: None})


def test_none_is_still_a_value_of_the_options_whose_type_takes_it() -> None:
    cfg = resolve_producer_config(
        {"client_id": None, "compression_type": None, "transactional_id": None, "partitioner": None}
    )
    assert cfg["client_id"] is None and cfg["compression_type"] == "none"
    assert cfg["transactional_id"] is None and cfg["partitioner"] is None
    assert "linger_ms" not in PRODUCER_OPTIONS.nullable
    assert {"client_id", "enable_idempotence", "transactional_id"} <= PRODUCER_OPTIONS.nullable
