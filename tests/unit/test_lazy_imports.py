"""kpax's packages import their modules on first use, and their public names are
unchanged by it.

A Spark query's first write starts several fresh Python processes (planning,
tasks, commit), each importing what it needs of kpax: checking the ``kafka.*``
options against a client's option table must not load the clients (the broker
connection, the cluster, every protocol message), and a producer must not load
the messages only a consumer or the admin client sends. Every public name of a
lazy package (PEP 562 ``__getattr__``) stays importable, in ``dir()`` and in
``from package import *``. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: The packages whose ``__init__`` names are imported on first use.
PACKAGES = (
    "kpax",
    "kpax.admin",
    "kpax.broker",
    "kpax.cluster",
    "kpax.consumer",
    "kpax.consumer.share",
    "kpax.parallel",
    "kpax.producer",
    "kpax.proto.messages",
)

_LOADED = """
import json, sys
{code}
mods = sorted(sys.modules)
print(json.dumps({{
    "client": [m for m in mods if m in (
        "asyncio", "kpax.broker.connection", "kpax.broker.broker", "kpax.cluster.cluster",
        "kpax.producer.client", "kpax.consumer.client", "kpax.admin.client")],
    "messages": [m.rsplit(".", 1)[1] for m in mods
                 if m.startswith("kpax.proto.messages._generated.")],
}}))
"""


def _loaded(code: str) -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _LOADED.format(code=code)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


WRITE = '{"kafka.bootstrap.servers": "h:9092", "topic": "t", "kafka.linger.ms": "5"}'
READ = '{"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafka.fetch.min.bytes": "1"}'


@pytest.mark.parametrize(
    "code",
    [
        "import kpax.producer.options",
        "import kpax.consumer.options",
        "import kpax.consumer.share.options",
        "from kpax.spark.options import parse_write_options as p; p(" + WRITE + ")",
        "from kpax.spark.options import parse_read_options as p; p(" + READ + ", batch=True)",
        "import kpax.proto.messages, kpax.proto.header",
    ],
    ids=["producer table", "consumer table", "share table", "spark write", "spark read", "proto"],
)
def test_an_option_table_or_the_protocol_package_loads_no_client(code: str) -> None:
    loaded = _loaded(code)
    assert loaded == {"client": [], "messages": []}


def test_a_producer_loads_only_the_messages_it_may_send() -> None:
    messages = set(_loaded("from kpax import Producer")["messages"])
    assert {"produce", "metadata", "api_versions", "init_producer_id"} <= messages
    # what only a consumer, a share consumer or the admin client sends
    for other in ("fetch", "share_fetch", "join_group", "list_offsets", "create_acls"):
        assert other not in messages


_API = """
import importlib, json, sys
pkg = importlib.import_module({name!r})
names = list(pkg.__all__)
missing_dir = [n for n in names if n not in dir(pkg)]
values = {{n: getattr(pkg, n) for n in names}}
star = {{}}
exec("from " + {name!r} + " import *", star)
star.pop("__builtins__", None)
print(json.dumps({{
    "missing_dir": missing_dir,
    "star_missing": sorted(set(names) - set(star)),
    "star_differs": sorted(n for n in names if n in star and star[n] is not values[n]),
    "none": sorted(n for n, v in values.items() if v is None),
}}))
"""


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_of_a_lazy_package_is_there(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _API.format(name=name)], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {
        "missing_dir": [],
        "star_missing": [],
        "star_differs": [],
        "none": [],
    }


@pytest.mark.parametrize("name", PACKAGES)
def test_a_name_a_package_lacks_is_an_attribute_error(name: str) -> None:
    code = (
        f"import {name} as p\n"
        "try:\n    p.NoSuchName\nexcept AttributeError as e:\n    print(e)\n"
        "try:\n    exec('from ' + p.__name__ + ' import NoSuchName')\n"
        "except ImportError as e:\n    print(type(e).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        f"module {name!r} has no attribute 'NoSuchName'",
        "ImportError",
    ]
