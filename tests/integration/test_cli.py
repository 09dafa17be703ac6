"""The `kpax` command against a real broker, run as a subprocess (``python -m kpax.cli``).

Each test groups related assertions so the suite stays short (a subprocess
start costs ~0.5 s). Checked: every subcommand and its main options, round
trips (a file byte-for-byte, JSON with headers and binary values, msgpack),
group offsets and lag after a partial consume, rollback to a time, the
active-members refusal, --follow with a clean Ctrl-C, config file profiles
with SASL, Java .properties files and kcat.conf, and bad input: each a
one-line error with the right exit code.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.wait import eventually

pytestmark = pytest.mark.timeout(120)

# Record timestamps the tests set: an hour ago, whole seconds (far older ones
# would be deleted by the broker's 7-day retention as soon as a segment rolls).
BASE_TS = (int(time.time()) - 3600) * 1000


class Run:
    """The finished command: ``rc``, ``out`` (bytes), ``err`` (str)."""

    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr.decode()

    @property
    def text(self) -> str:
        return self.out.decode()

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(ln) for ln in self.out.splitlines()]


def kpax_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "kpax.cli", *args]


def cli_env(bootstrap: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPAX_")}
    if bootstrap:
        env["KPAX_BROKERS"] = bootstrap
    env.update(extra)
    return env


def run_kpax(
    bootstrap: str | None,
    *args: str,
    stdin: bytes | None = None,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Run:
    proc = subprocess.run(
        kpax_cmd(*args),
        input=stdin,
        capture_output=True,
        env=env if env is not None else cli_env(bootstrap),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return Run(proc)


def ok(r: Run) -> Run:
    assert r.rc == 0, f"rc={r.rc} stderr={r.err!r}"
    return r


def one_line_error(r: Run, rc: int, *needles: str) -> None:
    assert r.rc == rc, f"expected exit {rc}, got {r.rc}: {r.err!r}"
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, f"not one line: {r.err!r}"
    assert "Traceback" not in r.err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"


@pytest.fixture
def k(kafka: KafkaCluster) -> Any:
    def call(*args: str, **kw: Any) -> Run:
        return run_kpax(kafka.bootstrap, *args, **kw)

    return call


def test_produce_file_consume_byte_for_byte(k: Any, topic: Any, tmp_path: Path) -> None:
    t = topic(1)
    lines = [f"line {i} ünïcode ✓".encode() for i in range(2000)] + [b"", b"after empty", b"\ttab"]
    src = tmp_path / "in.txt"
    src.write_bytes(b"\n".join(lines) + b"\n")
    r = ok(k("produce", t, "--file", str(src), "--compression", "lz4", "--acks", "1"))
    assert f"produced {len(lines):,} records" in r.err and "records/s" in r.err
    r = ok(k("consume", t))
    assert r.out == src.read_bytes()
    # --count, --from OFFSET, --to OFFSET, -N from the end
    assert ok(k("consume", t, "--count", "3")).out == b"\n".join(lines[:3]) + b"\n"
    assert ok(k("consume", t, "--from", "10", "--to", "13")).out == b"\n".join(lines[10:13]) + b"\n"
    assert ok(k("consume", t, "--from", "-2")).out == b"\n".join(lines[-2:]) + b"\n"
    # stdin, --key-separator, --header, key printed back with -K
    ok(k("produce", t, "-K", ":", "-H", "src=cli", "-H", "n=1", stdin=b"k1:v1\nk2:v:2\nnokey\n"))
    recs = ok(k("consume", t, "--from", "-3", "--format", "json")).lines()
    assert [(r["key"], r["value"]) for r in recs] == [("k1", "v1"), ("k2", "v:2"), (None, "nokey")]
    assert all(r["headers"] == [["src", "cli"], ["n", "1"]] for r in recs)
    assert all(r["topic"] == t and r["partition"] == 0 for r in recs)
    assert [r["offset"] for r in recs] == list(range(len(lines), len(lines) + 3))
    assert ok(k("consume", t, "--from", "-2", "-K", "=")).out == b"k2=v:2\n=nokey\n"


def test_json_and_msgpack_round_trip_with_headers_and_binary(k: Any, topic: Any) -> None:
    import msgpack

    t = topic(3)
    binary = bytes(range(256))
    docs = [
        {
            "key": "k1",
            "value": "text",
            "headers": [["h", "v"], ["raw", {"base64": "AP8="}]],
            "partition": 2,
        },
        {
            "key": {"base64": base64.b64encode(b"\xff\x00").decode()},
            "value": {"base64": base64.b64encode(binary).decode()},
            "partition": 1,
        },
        {
            "value": {"nested": [1, 2]},
            "headers": {"a": "b"},
            "partition": 0,
            "timestamp": BASE_TS,
        },
        {"key": "nullvalue", "value": None, "partition": 0},
    ]
    stdin = "".join(json.dumps(d) + "\n" for d in docs).encode()
    ok(k("produce", t, "--format", "json", stdin=stdin))
    out = {
        (r["partition"], r["offset"]): r for r in ok(k("consume", t, "--format", "json")).lines()
    }
    assert out[(2, 0)]["key"] == "k1" and out[(2, 0)]["value"] == "text"
    assert out[(2, 0)]["headers"] == [["h", "v"], ["raw", {"base64": "AP8="}]]
    assert base64.b64decode(out[(1, 0)]["value"]["base64"]) == binary
    assert base64.b64decode(out[(1, 0)]["key"]["base64"]) == b"\xff\x00"
    assert json.loads(out[(0, 0)]["value"]) == {"nested": [1, 2]}
    assert out[(0, 0)]["timestamp"] == BASE_TS and out[(0, 0)]["headers"] == [["a", "b"]]
    assert out[(0, 1)]["value"] is None and out[(0, 1)]["key"] == "nullvalue"
    # msgpack: bytes stay bytes, both ways
    packed = msgpack.packb(
        {"key": b"\x00k", "value": binary, "headers": [["h", b"\xfe"]], "partition": 1}
    ) + msgpack.packb(b"bare")
    t2 = topic(2)
    ok(k("produce", t2, "--format", "msgpack", stdin=packed))
    got = list(
        msgpack.Unpacker(
            __import__("io").BytesIO(ok(k("consume", t2, "--format", "msgpack")).out), raw=False
        )
    )
    by_value = {g["value"]: g for g in got}
    assert by_value[binary]["key"] == b"\x00k" and by_value[binary]["headers"] == [["h", b"\xfe"]]
    assert by_value[binary]["partition"] == 1 and b"bare" in by_value


def test_value_key_partition_tail_and_offsets(k: Any, topic: Any) -> None:
    t = topic(3)
    ok(k("produce", t, "--value", "one", "--key", "K", "--partition", "2", "--acks", "0"))
    ok(k("produce", t, "--value", "two", "--key", "K", "--partition", "2", "--compression", "gzip"))
    stdin = "".join(
        json.dumps({"value": f"v{i}", "partition": i % 3, "timestamp": BASE_TS + i * 1000}) + "\n"
        for i in range(30)
    ).encode()
    ok(k("produce", t, "--format", "json", "--compression", "zstd", stdin=stdin))
    r = ok(k("consume", t, "--partition", "2", "--count", "2", "-K", "|"))
    assert r.out == b"K|one\nK|two\n"
    # tail: the last records by timestamp across partitions, or of one partition
    assert ok(k("tail", t, "-n", "3", "--partition", "0")).out == b"v21\nv24\nv27\n"
    tail = ok(k("tail", t, "-n", "4", "--format", "json")).lines()
    # the last 4 of each partition, merged by timestamp ("one", "two" are not among
    # partition 2's last 4 offsets)
    assert [r["value"] for r in tail] == ["v26", "v27", "v28", "v29"]
    # offsets: earliest/latest/records, and the offset at a time
    doc = ok(k("offsets", t, "--time", f"@{BASE_TS + 15000}", "-o", "json")).json()
    rows = {p["partition"]: p for p in doc["partitions"]}
    assert [rows[p]["latest"] for p in range(3)] == [10, 10, 12]
    assert rows[0]["offset_at_time"] == 5 and rows[1]["offset_at_time"] == 5
    assert rows[2]["offset_at_time"] == 0  # "one" (written now) is the first at or after it
    table = ok(k("offsets", t)).text
    assert table.splitlines()[0].split() == ["PARTITION", "EARLIEST", "LATEST", "RECORDS"]


def test_group_consume_offsets_lag_rollback_to_time(
    k: Any, topic: Any, kafka: KafkaCluster
) -> None:
    t = topic(2)
    base = BASE_TS
    stdin = "".join(
        json.dumps({"value": f"r{i}", "partition": i % 2, "timestamp": base + i * 1000}) + "\n"
        for i in range(40)
    ).encode()
    ok(k("produce", t, "--format", "json", stdin=stdin))
    group = f"g-{t}"
    r = ok(k("consume", t, "--group", group, "--count", "10"))
    assert len(r.out.splitlines()) == 10
    doc = ok(k("offsets", t, "--group", group, "-o", "json")).json()
    committed = {p["partition"]: p["committed"] for p in doc["partitions"]}
    lag = {p["partition"]: p["lag"] for p in doc["partitions"]}
    assert sum(c or 0 for c in committed.values()) == 10
    assert doc["total_lag"] == 30 and sum(lag.values()) == 30
    desc = ok(k("groups", "describe", group, "-o", "json")).json()[0]
    assert desc["state"] == "Empty"
    assert {o["partition"]: o["lag"] for o in desc["offsets"]} == {
        p: lag[p] for p, c in committed.items() if c is not None
    }
    assert group in [g["group"] for g in ok(k("groups", "list", "-o", "json")).json()]
    coord = ok(k("coord", "--group", group, "-o", "json")).json()
    assert coord["coordinator"] == 1 or coord["address"] in kafka.bootstrap.split(",")
    # the rest of the group's records, then rollback to a time and read from there
    assert len(ok(k("consume", t, "--group", group)).out.splitlines()) == 30
    plan = ok(
        k("rollback", "--group", group, t, "--to", f"@{base + 30_000}", "--dry-run", "-o", "json")
    ).json()
    assert (
        plan["dry_run"] and not plan["executed"] and {p["new"] for p in plan["partitions"]} == {15}
    )
    assert {p["current"] for p in plan["partitions"]} == {20}
    assert {p["delta"] for p in plan["partitions"]} == {-5}
    # without --execute (and without --dry-run) only the plan, on stdout; exit 0
    iso = datetime.fromtimestamp((base + 30_000) / 1000, tz=timezone.utc).isoformat()
    iso = iso.replace("+00:00", "Z")
    r = ok(k("rollback", "--group", group, t, "--to", iso))
    head, cols, *rows = r.text.splitlines()
    assert head.startswith("plan (dry run, nothing changed)") and group in head
    assert cols.split() == ["PARTITION", "CURRENT", "NEW", "DELTA"]
    assert sorted(row.split() for row in rows) == [["0", "20", "15", "-5"], ["1", "20", "15", "-5"]]
    assert "--execute" in r.err
    assert ok(k("offsets", t, "--group", group, "-o", "json")).json()["total_lag"] == 0  # unchanged
    with kpax.Admin(kafka.bootstrap) as admin:
        assert {om.offset for om in admin.list_group_offsets(group).values()} == {20}
    r = k("rollback", "--group", group, t, "--to", iso, "--execute", "--dry-run")
    assert r.rc == 2 and "not allowed with argument --execute" in r.err
    moved = ok(k("rollback", "--group", group, t, "--to", iso, "--execute", "-o", "json")).json()
    assert moved["executed"] and {p["delta"] for p in moved["partitions"]} == {-5}
    with kpax.Admin(kafka.bootstrap) as admin:
        assert {om.offset for om in admin.list_group_offsets(group).values()} == {15}
    values = ok(k("consume", t, "--group", group)).text.split()
    assert sorted(values) == sorted(f"r{i}" for i in range(30, 40))
    ok(k("rollback", "--group", group, t, "--to", "earliest", "--partition", "1", "--execute"))
    assert len(ok(k("consume", t, "--group", group)).out.splitlines()) == 20
    # groups delete: the plan, the group still there; then --execute
    plan = ok(k("groups", "delete", group, "-o", "json")).json()
    assert plan["dry_run"] and plan["groups"] == [
        {"group": group, "type": "classic", "state": "Empty", "offsets": 2, "topics": [t]}
    ]
    assert group in [g["group"] for g in ok(k("groups", "list", "-o", "json")).json()]
    r = ok(k("groups", "delete", group))
    assert r.text.startswith("plan (dry run, nothing deleted)") and "--execute" in r.err
    assert group in [g["group"] for g in ok(k("groups", "list", "-o", "json")).json()]
    assert "deleted" in ok(k("groups", "delete", group, "--execute")).text
    assert group not in [g["group"] for g in ok(k("groups", "list", "-o", "json")).json()]
    one_line_error(k("groups", "delete", group), 1, group, "not found")


def test_follow_rollback_refused_and_ctrl_c(kafka: KafkaCluster, topic: Any, k: Any) -> None:
    t = topic(1)
    group = f"g-{t}"
    ok(k("produce", t, stdin=b"a\nb\n"))
    follower = subprocess.Popen(
        kpax_cmd("consume", t, "--group", group, "--follow"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(kafka.bootstrap),
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == b"a\n" and follower.stdout.readline() == b"b\n"
        ok(k("produce", t, stdin=b"c\n"))
        assert follower.stdout.readline() == b"c\n"  # --follow sees new records
        r = k("rollback", "--group", group, t, "--to", "earliest")
        one_line_error(r, 1, "active member", group)
        follower.send_signal(signal.SIGINT)
        rc = follower.wait(timeout=20)
        err = follower.stderr.read().decode() if follower.stderr else ""
        assert rc == 130 and "interrupted" in err and "Traceback" not in err
    finally:
        if follower.poll() is None:
            follower.kill()
    # Ctrl-C committed what was printed and left the group: lag 0, rollback now allowed
    with kpax.Admin(kafka.bootstrap) as admin:
        assert admin.list_group_offsets(group)[kpax.TopicPartition(t, 0)].offset == 3
        deadline = time.monotonic() + 15
        while admin.describe_groups([group])[group].members and time.monotonic() < deadline:
            time.sleep(0.2)
    ok(k("rollback", "--group", group, t, "--to", "1", "--execute"))
    assert ok(k("consume", t, "--group", group)).out == b"b\nc\n"


@pytest.mark.parametrize(
    "protocol", [pytest.param("consumer", marks=pytest.mark.kafka4), "classic"]
)
def test_groups_describe_and_rollback_of_both_protocols(
    kafka: KafkaCluster, topic: Any, k: Any, protocol: str
) -> None:
    """`groups list|describe` say which kind a group is; `rollback` refuses a live
    group and moves the offsets of an empty one: classic and KIP-848 groups alike."""
    t = topic(2)
    stdin = "".join(json.dumps({"value": f"v{i}", "partition": i % 2}) + "\n" for i in range(10))
    ok(k("produce", t, "--format", "json", stdin=stdin.encode()))
    group = f"g-{protocol}-{t}"
    tps = {kpax.TopicPartition(t, 0), kpax.TopicPartition(t, 1)}
    conf: dict[str, Any] = {
        "group_id": group,
        "group_protocol": protocol,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
    }
    admin = kpax.Admin(kafka.bootstrap)
    consumer = kpax.Consumer(kafka.bootstrap, **conf)
    try:
        consumer.subscribe([t])
        got: list[kpax.ConsumerRecord] = []
        deadline = time.monotonic() + 45
        while len(got) < 10 or consumer.assignment() != tps:
            assert time.monotonic() < deadline, f"read {len(got)}, own {consumer.assignment()}"
            got.extend(consumer.poll(0.1))
        consumer.commit()

        def assigned() -> bool:
            g = admin.describe_groups([group])[group]
            return g.state == "Stable" and [set(m.assignment) for m in g.members] == [tps]

        eventually(assigned, timeout=30)
        desc = ok(k("groups", "describe", group, "-o", "json")).json()[0]
        assert desc["type"] == protocol and desc["state"] == "Stable"
        (member,) = desc["members"]
        assert sorted(member["assignment"]) == [f"{t}-0", f"{t}-1"]
        assert member["subscribed_topics"] == [t] and member["client_id"] == "kpax"
        assert (member["member_epoch"] is not None) == (protocol == "consumer")
        assert {o["partition"]: o["lag"] for o in desc["offsets"]} == {0: 0, 1: 0}
        human = ok(k("groups", "describe", group)).text
        kind = "consumer group (KIP-848)" if protocol == "consumer" else "classic consumer group"
        assert f"group {group}: {kind}, state Stable" in human and "PARTITIONS" in human
        listed = {g["group"]: g for g in ok(k("groups", "list", "-o", "json")).json()}
        assert listed[group]["type"] == protocol
        row = next(ln.split() for ln in ok(k("groups", "list")).text.splitlines() if group in ln)
        assert row == [group, "Stable", protocol]
        # the coordinator refuses commits from outside a live group: so does rollback
        r = k("rollback", "--group", group, t, "--to", "earliest")
        one_line_error(r, 1, f"{protocol} group {group!r}", "1 active member", "stop its consumers")
        r = k("groups", "delete", group)  # refused too, dry run or not
        one_line_error(r, 1, f"{protocol} group {group!r}", "1 active member", "stop its consumers")
    finally:
        consumer.close()
    try:
        eventually(lambda: admin.describe_groups([group])[group].is_empty, timeout=30)
        r = ok(k("rollback", "--group", group, t, "--to", "earliest"))
        assert r.text.startswith("plan (dry run")  # nothing moved
        assert {om.offset for om in admin.list_group_offsets(group).values()} == {5}
        r = ok(k("rollback", "--group", group, t, "--to", "earliest", "--execute"))
        assert r.text.startswith("moved")
        moved = admin.list_group_offsets(group)
        assert {tp: om.offset for tp, om in moved.items()} == dict.fromkeys(tps, 0)
        assert admin.describe_groups([group])[group].type == protocol
        assert ok(k("offsets", t, "--group", group, "-o", "json")).json()["total_lag"] == 10
        # a member of the same kind starts again from the moved offsets
        with kpax.Consumer(kafka.bootstrap, **conf) as again:
            again.subscribe([t])
            reread: list[kpax.ConsumerRecord] = []
            deadline = time.monotonic() + 45
            while len(reread) < 10:
                assert time.monotonic() < deadline, f"re-read {len(reread)} of 10"
                reread.extend(again.poll(0.1))
        assert sorted(r.value for r in reread) == sorted(f"v{i}".encode() for i in range(10))
    finally:
        admin.close()


def test_topics_and_meta(k: Any, kafka: KafkaCluster) -> None:
    name = f"cli-topics-{os.getpid()}-{time.monotonic_ns()}"
    r = ok(k("topics", "create", name, "--partitions", "3", "--set", "retention.ms=3600000"))
    assert "created topic" in r.err
    assert name in ok(k("topics", "list", "-o", "json")).json()
    ok(
        k(
            "topics",
            "alter-config",
            name,
            "--set",
            "cleanup.policy=compact",
            "--delete",
            "retention.ms",
        )
    )
    deadline = time.monotonic() + 10
    while True:
        desc = ok(k("topics", "describe", name, "-o", "json")).json()[0]
        if desc["configs"].get("cleanup.policy") == "compact" or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert len(desc["partitions"]) == 3 and desc["configs"].get("cleanup.policy") == "compact"
    assert "retention.ms" not in desc["configs"]
    meta = ok(k("meta", name, "-o", "json")).json()
    assert meta["controller"] >= 0 and meta["brokers"] and meta["topics"][0]["name"] == name
    assert [p["partition"] for p in meta["topics"][0]["partitions"]] == [0, 1, 2]
    human = ok(k("meta")).text
    assert "brokers:" in human and name in human and "LEADER" in human
    ok(k("produce", name, "--value", "x", "--key", "k", "--partition", "1"))
    plan = ok(k("topics", "delete", name, "-o", "json")).json()
    assert plan == {
        "executed": False,
        "dry_run": True,
        "topics": [{"topic": name, "partitions": 3, "records": 1}],
    }
    r = ok(k("topics", "delete", name))
    assert r.text.splitlines()[0] == "plan (dry run, nothing deleted): 1 topic(s)"
    assert r.text.splitlines()[1].split() == ["TOPIC", "PARTITIONS", "RECORDS"]
    assert "--execute" in r.err
    assert name in ok(k("topics", "list", "-o", "json")).json()  # still there
    assert ok(k("topics", "delete", name, "--execute")).text.startswith("deleted: 1 topic(s)")
    one_line_error(k("topics", "describe", name), 1, "unknown topic", name)
    one_line_error(k("topics", "delete", name), 1, "unknown topic", name)


def test_config_file_profiles_sasl_and_credentials(kafka: KafkaCluster, tmp_path: Path) -> None:
    sasl = kafka.listener("SASL_PLAINTEXT")
    user, password = next(iter(kafka.sasl_users.items()))
    (tmp_path / "kpax.toml").write_text(
        f'default_profile = "plain"\n'
        f'[profiles.plain]\nbootstrap = "{kafka.bootstrap}"\n'
        f'[profiles.secure]\nbootstrap = "{sasl}"\nsecurity_protocol = "SASL_PLAINTEXT"\n'
        f'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "{user}"\nsasl_password_env = "PW"\n'
    )
    env = cli_env(None, PW=password)
    assert ok(run_kpax(None, "meta", "-o", "json", cwd=tmp_path, env=env)).json()["brokers"]
    assert ok(run_kpax(None, "--profile", "secure", "topics", "list", cwd=tmp_path, env=env))
    # KPAX_BROKERS beats the file, -b beats KPAX_BROKERS
    r = run_kpax(
        None,
        "topics",
        "list",
        "--timeout",
        "3",
        cwd=tmp_path,
        env={**env, "KPAX_BROKERS": "127.0.0.1:1"},
    )
    one_line_error(r, 1, "127.0.0.1:1")
    assert ok(
        run_kpax(
            None,
            "-b",
            kafka.bootstrap,
            "topics",
            "list",
            cwd=tmp_path,
            env={**env, "KPAX_BROKERS": "127.0.0.1:1"},
        )
    )
    # wrong credentials, unset password variable, unknown profile, missing file
    bad = {**env, "PW": "wrong"}
    one_line_error(
        run_kpax(None, "--profile", "secure", "meta", cwd=tmp_path, env=bad),
        1,
        "authentication",
        user,
    )
    one_line_error(
        run_kpax(None, "--profile", "secure", "meta", cwd=tmp_path, env=cli_env(None)), 2, "PW"
    )
    one_line_error(
        run_kpax(None, "--profile", "nope", "meta", cwd=tmp_path, env=env), 2, "nope", "secure"
    )
    one_line_error(
        run_kpax(None, "--config", str(tmp_path / "missing.toml"), "meta", env=env),
        2,
        "missing.toml",
        "not found",
    )
    one_line_error(
        run_kpax(
            None, "meta", cwd=tmp_path / "..", env=cli_env(None, HOME=str(tmp_path / "nohome"))
        ),
        2,
        "no cluster address",
    )
    # TLS: the CA from a flag, then from a profile
    assert kafka.ssl_cafile is not None
    tls = ["-b", kafka.listener("SSL"), "--security-protocol", "SSL"]
    ok(run_kpax(None, *tls, "--ssl-cafile", kafka.ssl_cafile, "topics", "list", env=env))
    r = run_kpax(None, *tls, "topics", "list", "--timeout", "5", env=env)  # no CA: refused
    assert r.rc == 1 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    (tmp_path / "tls.toml").write_text(
        f'bootstrap = "{kafka.listener("SSL")}"\nsecurity_protocol = "SSL"\n'
        f'ssl_cafile = "{kafka.ssl_cafile}"\n'
    )
    ok(run_kpax(None, "--config", str(tmp_path / "tls.toml"), "meta", env=env))
    # flags on the command line, password from KPAX_SASL_PASSWORD
    flags = [
        "-b",
        sasl,
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-mechanism",
        "PLAIN",
        "--sasl-username",
        user,
    ]
    assert ok(
        run_kpax(None, *flags, "topics", "list", env=cli_env(None, KPAX_SASL_PASSWORD=password))
    )


def test_java_properties_and_kcat_conf_with_sasl_and_tls(
    kafka: KafkaCluster, topic: Any, tmp_path: Path
) -> None:
    """--config reads a Java client .properties file (JAAS, PEM trust store) and a
    kcat.conf; -X takes the dotted Java names; unknown keys and JKS stores are
    usage errors naming them."""
    sasl = kafka.listener("SASL_PLAINTEXT")
    user, password = next(iter(kafka.sasl_users.items()))
    env = cli_env(None)
    t = topic(1)
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    props = tmp_path / "client.properties"
    props.write_text(
        "# as for kafka-console-consumer --consumer.config\n"
        f"bootstrap.servers = {sasl}\n"
        "security.protocol: SASL_PLAINTEXT\n"
        "sasl.mechanism SCRAM-SHA-256\n"
        f"sasl.jaas.config={scram} required \\\n"
        f'    username="{user}" \\\n'
        f'    password="{password}";\n'
        "group.id=ignored\n"
    )
    cfg = ["--config", str(props)]
    r = ok(run_kpax(None, *cfg, "produce", t, stdin=b"p1\np2\n", env=env))
    assert "ignored producer/consumer setting(s) group.id" in r.err
    assert ok(run_kpax(None, *cfg, "consume", t, env=env)).out == b"p1\np2\n"
    wrong = tmp_path / "wrong.properties"
    text = props.read_text().replace("group.id=ignored\n", "")
    wrong.write_text(text.replace(f'password="{password}"', 'password="nope"'))
    one_line_error(
        run_kpax(None, "--config", str(wrong), "meta", "--timeout", "10", env=env),
        1,
        "authentication",
        user,
    )
    # kcat.conf, read by kcat itself too
    kcat_conf = tmp_path / "kcat.conf"
    kcat_conf.write_text(
        f"# kcat -F\nmetadata.broker.list={sasl}\nsecurity.protocol=sasl_plaintext\n"
        f"sasl.mechanisms=PLAIN\nsasl.username={user}\nsasl.password={password}\n"
    )
    r = ok(run_kpax(None, "--config", str(kcat_conf), "tail", t, "-n", "1", env=env))
    assert r.out == b"p2\n"
    kcat = subprocess.run(
        ["kcat", "-F", str(kcat_conf), "-C", "-t", t, "-e", "-q"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert kcat.returncode == 0 and kcat.stdout == b"p1\np2\n", kcat.stderr
    # -X with the Java names, connection options for every client of the command
    x = [
        "-b",
        sasl,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=SCRAM-SHA-512",
        "-X",
        f'sasl.jaas.config={scram} required username="{user}" password="{password}";',
    ]
    assert ok(run_kpax(None, *x, "consume", t, "--count", "1", env=env)).out == b"p1\n"
    # TLS: a PEM trust store; a JKS one is refused naming what to do
    assert kafka.ssl_cafile is not None
    tls = tmp_path / "tls.properties"
    tls.write_text(
        f"bootstrap.servers={kafka.listener('SSL')}\nsecurity.protocol=SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={kafka.ssl_cafile}\n"
    )
    assert ok(run_kpax(None, "--config", str(tls), "meta", "-o", "json", env=env)).json()["brokers"]
    jks = tmp_path / "truststore.jks"
    subprocess.run(
        [
            *("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", kafka.ssl_cafile),
            *("-keystore", str(jks), "-storetype", "JKS", "-storepass", "changeit"),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    tls.write_text(
        f"bootstrap.servers={kafka.listener('SSL')}\nsecurity.protocol=SSL\n"
        f"ssl.truststore.location={jks}\nssl.truststore.password=changeit\n"
    )
    r = run_kpax(None, "--config", str(tls), "meta", env=env)
    one_line_error(r, 2, "ssl.truststore.location", "not a PEM file", "JKS", "keytool")
    # unknown keys, each named with the closest valid one
    typo = tmp_path / "typo.properties"
    typo.write_text(f"bootstrap.servers={sasl}\nsasl.mechansim=PLAIN\nfoo.bar=1\n")
    one_line_error(
        run_kpax(None, "--config", str(typo), "meta", env=env),
        2,
        "unknown setting(s) 'sasl.mechansim' (did you mean 'sasl.mechanism'?), 'foo.bar'",
    )
    one_line_error(
        run_kpax(None, "-b", sasl, "-X", "sasl.usrname=x", "meta", env=env),
        2,
        "-X: unknown setting(s) 'sasl.usrname' (did you mean 'sasl.username'?)",
    )


def test_bad_input_errors(k: Any, topic: Any, kafka: KafkaCluster) -> None:
    t = topic(1)
    missing = f"no-such-topic-{time.monotonic_ns()}"
    one_line_error(k("consume", missing), 1, "unknown topic", missing)
    one_line_error(k("produce", missing, "--value", "x"), 1, "unknown topic", missing)
    one_line_error(k("offsets", missing), 1, "unknown topic")
    one_line_error(run_kpax("127.0.0.1:1", "consume", t, "--timeout", "3"), 1, "127.0.0.1:1")
    one_line_error(run_kpax("not-an-address", "meta"), 2, "not-an-address")
    # malformed JSON: stops at the line (earlier records kept), or skips with --skip-bad
    stdin = b'{"value": "ok1"}\n{"value": oops}\n{"value": "ok3"}\n{"value": 1, "bogus": 2}\n'
    one_line_error(k("produce", t, "--format", "json", stdin=stdin), 1, "line 2", "malformed JSON")
    assert ok(k("consume", t)).out == b"ok1\n"
    r = ok(k("produce", t, "--format", "json", "--skip-bad", stdin=stdin))
    assert "line 2" in r.err and "line 4" in r.err and "produced 2 records" in r.err
    assert ok(k("consume", t)).out == b"ok1\nok1\nok3\n"
    # bad time / offset specs and options are usage errors (2)
    one_line_error(k("consume", t, "--from", "last tuesday"), 2, "last tuesday", "ISO-8601")
    one_line_error(k("offsets", t, "--time", "2024-13-45"), 2, "2024-13-45")
    one_line_error(k("consume", t, "--partition", "7"), 2, "no partition 7")
    one_line_error(k("produce", t, "-X", "linger_ms=-5", "--value", "x"), 2, "linger_ms")
    one_line_error(k("consume", t, "--group", "g", "--from", "5"), 2, "rollback")
    r = k("consume")
    assert r.rc == 2 and "usage:" in r.err and "Traceback" not in r.err
    # --debug shows the traceback
    r = run_kpax("127.0.0.1:1", "--debug", "meta", "--timeout", "2")
    assert r.rc == 1 and "Traceback" in r.err


def test_produce_ctrl_c_delivers_what_was_read_and_closed_pipe(
    kafka: KafkaCluster, topic: Any, k: Any
) -> None:
    t = topic(1)
    proc = subprocess.Popen(
        kpax_cmd("produce", t),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(kafka.bootstrap),
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"r%d\n" % i for i in range(100)))
        proc.stdin.flush()
        tp = kpax.TopicPartition(t, 0)
        with kpax.Admin(kafka.bootstrap) as admin:
            deadline = time.monotonic() + 20
            while admin.list_offsets({tp: "latest"})[tp].offset < 100:
                assert time.monotonic() < deadline, "records not delivered while stdin is open"
                time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # stdin still open: the run is waiting for more
        rc = proc.wait(timeout=20)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert rc == 130 and "interrupted: 100 of 100 records acknowledged" in err, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
    # a reader that goes away (| head) ends the command quietly with status 0
    shell = f"{' '.join(kpax_cmd('consume', t))} | head -n 2; exit ${{PIPESTATUS[0]}}"
    r = subprocess.run(
        ["bash", "-c", shell],
        capture_output=True,
        env=cli_env(kafka.bootstrap),
        timeout=60,
        check=False,
    )
    assert r.returncode == 0 and r.stdout == b"r0\nr1\n" and r.stderr == b""


def test_read_committed_hides_aborted_records(kafka: KafkaCluster, topic: Any, k: Any) -> None:
    import confluent_kafka  # a dev dependency: the transactional producer

    t = topic(1)
    p = confluent_kafka.Producer(
        {"bootstrap.servers": kafka.bootstrap, "transactional.id": f"tx-{t}", "linger.ms": 0}
    )
    p.init_transactions(30)
    for values, commit in ((["c1", "c2"], True), (["a1", "a2"], False), (["c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(t, v.encode(), partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    committed = ok(k("consume", t, "--isolation", "read_committed")).out
    assert committed == b"c1\nc2\nc3\n"
    assert ok(k("consume", t)).out == b"c1\nc2\na1\na2\nc3\n"
