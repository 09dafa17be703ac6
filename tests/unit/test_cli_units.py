"""The `kpax` command without a broker: specs, formats, settings, help texts, usage errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kpax.cli import formats, settings
from kpax.cli.errors import CommandError, UsageError
from kpax.cli.main import build_parser, main
from kpax.cli.timespec import Spec, parse_spec, parse_time

NOW = 1_700_000_000_000


def test_time_specs() -> None:
    assert parse_time("-1h", now_ms=NOW) == NOW - 3_600_000
    assert parse_time("-30m", now_ms=NOW) == NOW - 1_800_000
    assert parse_time("-1.5s", now_ms=NOW) == NOW - 1500
    assert parse_time("-2d", now_ms=NOW) == NOW - 2 * 86_400_000
    assert parse_time("-250ms", now_ms=NOW) == NOW - 250
    assert parse_time("@1234") == 1234
    assert parse_time("2023-11-14T22:13:20Z") == NOW
    assert parse_time("2023-11-14T23:13:20+01:00") == NOW
    assert parse_time("2023-11-14T22:13:20.500Z") == NOW + 500
    for bad in ("yesterday", "-1y", "2024-13-01", "@x", "", "1h"):
        with pytest.raises(UsageError, match="ISO-8601"):
            parse_time(bad)


def test_offset_specs() -> None:
    assert parse_spec("earliest") == Spec("earliest")
    assert parse_spec("beginning") == Spec("earliest")
    assert parse_spec("END") == Spec("latest")
    assert parse_spec("42") == Spec("offset", 42)
    assert parse_spec("-10") == Spec("from_end", 10)
    assert parse_spec("@5") == Spec("time", 5)
    assert parse_spec("-10s").kind == "time"
    with pytest.raises(UsageError, match="--to"):
        parse_spec("soon", what="--to")
    with pytest.raises(UsageError):
        parse_spec("-1h", allow_times=False)
    assert "before the end" in Spec("from_end", 3).describe()


def _rec(**kw: Any) -> Any:
    base = {
        "topic": "t",
        "partition": 0,
        "offset": 7,
        "timestamp": NOW,
        "key": None,
        "value": b"v",
        "headers": [],
    }
    base.update(kw)
    return SimpleNamespace(**base)


def test_writer_formats() -> None:
    out = io.BytesIO()
    formats.Writer(out, "raw", None, b"\n").write(
        [_rec(value=b"a"), _rec(value=None), _rec(value=b"c")]
    )
    assert out.getvalue() == b"a\n\nc\n"
    out = io.BytesIO()
    formats.Writer(out, "raw", b"=", b"\x00").write([_rec(key=b"k", value=b"a"), _rec(value=b"b")])
    assert out.getvalue() == b"k=a\x00=b\x00"
    out = io.BytesIO()
    formats.Writer(out, "json", None, b"\n").write(
        [_rec(key=b"\xff", value="ü".encode(), headers=[("h", b"\xfe\x01"), ("n", None)])]
    )
    doc = json.loads(out.getvalue())
    assert doc == {
        "topic": "t",
        "partition": 0,
        "offset": 7,
        "timestamp": NOW,
        "key": {"base64": "/w=="},
        "value": "ü",
        "headers": [["h", {"base64": "/gE="}], ["n", None]],
    }


def test_json_input_records_and_errors() -> None:
    lines = [
        b'{"key": "k", "value": {"base64": "AAE="}, "headers": {"a": "b"}, '
        b'"partition": 1, "timestamp": 5}',
        b"",
        b'{"value": {"x": [1, 2]}}',
        b"{broken",
        b'{"value": "v", "extra": 1}',
        b'{"value": "v", "partition": -1}',
        b'["not", "an", "object"]',
        b'{"value": {"base64": "***"}}',
    ]
    bad: list[str] = []
    recs = list(formats.read_json(io.BytesIO(b"\n".join(lines)), bad, skip_bad=True))
    assert recs[0] == formats.InRecord(b"\x00\x01", b"k", [("a", b"b")], 1, 5)
    assert recs[1].value == b'{"x":[1,2]}'
    assert len(recs) == 2
    assert [m.split(":")[0] for m in bad] == ["line 4", "line 5", "line 6", "line 7", "line 8"]
    with pytest.raises(CommandError, match="line 4: malformed JSON"):
        list(formats.read_json(io.BytesIO(b"\n".join(lines)), [], skip_bad=False))


def test_msgpack_input() -> None:
    import msgpack

    data = msgpack.packb({"key": b"k", "value": b"\xff", "headers": [["h", b"v"]]}) + msgpack.packb(
        "s"
    )
    recs = list(formats.read_msgpack(io.BytesIO(data), [], skip_bad=False))
    assert recs == [formats.InRecord(b"\xff", b"k", [("h", b"v")]), formats.InRecord(b"s")]
    with pytest.raises(CommandError, match="msgpack item 1"):
        list(formats.read_msgpack(io.BytesIO(msgpack.packb(3)), [], skip_bad=False))


def _args(**kw: Any) -> SimpleNamespace:
    base = {
        "config": None,
        "profile": None,
        "bootstrap_server": None,
        "security_protocol": None,
        "sasl_mechanism": None,
        "sasl_username": None,
        "sasl_password": None,
        "ssl_cafile": None,
        "ssl_certfile": None,
        "ssl_keyfile": None,
        "ssl_no_verify": False,
        "extra": None,
        "timeout": 30.0,
    }
    base.update(kw)
    return SimpleNamespace(**base)


def test_settings_precedence_and_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for var in ("KPAX_BROKERS", "KPAX_CONFIG", "KPAX_PROFILE", "KPAX_SASL_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(UsageError, match="no cluster address"):
        settings.client_config(_args())
    (tmp_path / "xdg" / "kpax").mkdir(parents=True)
    (tmp_path / "xdg" / "kpax" / "config.toml").write_text('bootstrap = "home:1"\n')
    assert settings.client_config(_args()).bootstrap == "home:1"
    (tmp_path / "kpax.toml").write_text(
        'default_profile = "a"\n[profiles.a]\nbrokers = ["a1:1", "a2:2"]\n'
        '[profiles.b]\nbootstrap = "b:1"\nsecurity_protocol = "SASL_SSL"\n'
        'sasl-mechanism = "SCRAM-SHA-256"\n'
        'sasl_username = "u"\nsasl_password_env = "B_PW"\nssl_cafile = "/ca.pem"\n'
    )
    assert settings.client_config(_args()).bootstrap == "a1:1,a2:2"  # ./kpax.toml first
    monkeypatch.setenv("B_PW", "secret")
    s = settings.client_config(
        _args(profile="b", extra=["linger_ms=7", "enable.idempotence=false"])
    )
    assert s.conn["security_protocol"] == "sasl_ssl" and s.conn["sasl_mechanism"] == "scram-sha-256"
    assert s.conn["sasl_plain_username"] == "u" and s.conn["sasl_plain_password"] == "secret"
    assert s.extra == {"linger_ms": 7, "enable_idempotence": False}
    monkeypatch.setenv("KPAX_BROKERS", "env:1")
    assert settings.client_config(_args(profile="b")).bootstrap == "env:1"
    assert settings.client_config(_args(bootstrap_server="flag:1")).bootstrap == "flag:1"
    s = settings.client_config(_args(ssl_no_verify=True, timeout=5.0))
    assert s.conn["ssl_verify"] is False and s.admin()["default_api_timeout_ms"] == 5000
    cases: list[tuple[dict[str, Any], str]] = [
        ({"profile": "zz"}, "profile 'zz' not in"),
        ({"config": str(tmp_path / "nope.toml")}, "not found"),
        ({"extra": ["novalue"]}, "key=value"),
        ({"timeout": 0.0}, "--timeout"),
    ]
    for kw, match in cases:
        with pytest.raises(UsageError, match=match):
            settings.client_config(_args(**kw))
    (tmp_path / "bad.toml").write_text("this is = = not toml")
    with pytest.raises(UsageError, match="not valid TOML"):
        settings.client_config(_args(config=str(tmp_path / "bad.toml")))
    (tmp_path / "unknown.toml").write_text('bootstrap = "x:1"\nfavourite_colour = "blue"\n')
    with pytest.raises(UsageError, match="unknown setting 'favourite_colour'"):
        settings.client_config(_args(config=str(tmp_path / "unknown.toml")))


def test_help_texts_have_examples(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert "examples:" in parser.format_help() and "KPAX_BROKERS" in parser.format_help()
    for cmd in (
        "produce",
        "consume",
        "tail",
        "offsets",
        "rollback",
        "meta",
        "coord",
        "topics",
        "groups",
    ):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--help"])
        assert exc.value.code == 0
        text = capsys.readouterr().out
        assert "examples:" in text and f"kpax {cmd}" in text, cmd


def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KPAX_BROKERS", raising=False)
    for argv in (
        ["consume"],
        ["nonsense"],
        ["produce", "t", "--acks", "2"],
        ["topics"],
        ["rollback", "t"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert "usage:" in capsys.readouterr().err
    # options after the subcommand parse as well as before it
    args = build_parser().parse_args(["topics", "list", "-b", "h:1", "--timeout", "3"])
    assert args.bootstrap_server == "h:1" and args.timeout == 3.0
    args = build_parser().parse_args(["-b", "h:2", "consume", "t"])
    assert args.bootstrap_server == "h:2" and args.timeout == 30.0
    assert main(["-b", "h:1", "consume", "t", "--from", "sometime"]) == 2
    assert "bad --from value 'sometime'" in capsys.readouterr().err


def test_timeouts_before_or_after_the_command_and_their_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    for argv in (["--timeout", "3", "meta"], ["meta", "--timeout", "3"]):
        assert parser.parse_args(argv).timeout == 3.0, argv
    assert parser.parse_args(["--timeout", "3", "topics", "list"]).timeout == 3.0
    assert parser.parse_args(["--timeout", "3", "meta", "--timeout", "4"]).timeout == 4.0
    assert parser.parse_args(["meta"]).timeout == 30.0
    for value in ("nan", "inf", "1e12", "0", "-1", "86400.5", "soon"):
        for argv in ([f"--timeout={value}", "meta"], ["offsets", "t", f"--timeout={value}"]):
            with pytest.raises(SystemExit) as exc:
                main(argv)
            assert exc.value.code == 2, argv
            err = capsys.readouterr().err
            assert "usage:" in err and "argument --timeout" in err and value in err, err
    with pytest.raises(UsageError, match="--timeout"):
        settings.client_config(_args(bootstrap_server="h:1", timeout=float("nan")))


def test_relative_times_after_an_option() -> None:
    from kpax.cli.main import _attach_relative_times

    assert _attach_relative_times(["consume", "t", "--from", "-1h", "--to", "-5m"]) == [
        "consume",
        "t",
        "--from=-1h",
        "--to=-5m",
    ]
    assert _attach_relative_times(["offsets", "t", "--time", "-1.5d"])[-1] == "--time=-1.5d"
    # -N (records before the end) parses as it is; other flags are left alone
    assert _attach_relative_times(["consume", "t", "--from", "-5"])[-2:] == ["--from", "-5"]
    assert _attach_relative_times(["consume", "t", "--from", "-q"])[-2:] == ["--from", "-q"]
    args = build_parser().parse_args(_attach_relative_times(["consume", "t", "--from", "-2h"]))
    assert args.from_ == "-2h"


def test_times_out_of_kafkas_range() -> None:
    assert parse_time("1900-01-01") == 0  # before the epoch: the epoch
    assert parse_time("0001-01-01T00:00:00Z") == 0
    assert parse_time("0001-01-01") == 0  # no zone, local time unknown that far back
    assert parse_time("-100000w", now_ms=NOW) == 0
    assert parse_time("-" + "9" * 400 + "d", now_ms=NOW) == 0
    assert parse_time("9999-12-31T23:59:59Z") == 253_402_300_799_000
    assert parse_time("@9223372036854775807") == 2**63 - 1
    with pytest.raises(UsageError, match="2\\*\\*63-1"):
        parse_time("@9223372036854775808", what="--from value")
    assert Spec("time", 2**63 - 1).describe() == "time @9223372036854775807"


def test_input_fields_out_of_range_are_per_item_errors() -> None:
    import msgpack

    docs = [
        {"value": "ok", "partition": 2, "timestamp": 2**63 - 1},
        {"value": "v", "partition": 3},
        {"value": "v", "partition": 2**31},
        {"value": "v", "timestamp": 1.7e12},
        {"value": "v", "timestamp": "1700000000000"},
        {"value": "v", "timestamp": 2**63},
        {"value": "v", "timestamp": False},
    ]
    bad: list[str] = []
    data = b"".join(json.dumps(d).encode() + b"\n" for d in docs)
    recs = list(formats.read_json(io.BytesIO(data), bad, skip_bad=True, partitions=3))
    assert [(r.partition, r.timestamp, r.where) for r in recs] == [(2, 2**63 - 1, "line 1")]
    assert [m.split(":")[0] for m in bad] == [f"line {n}" for n in range(2, 8)]
    assert "no partition 3 (partitions 0..2)" in bad[0] and "2**31-1" in bad[1]
    assert "got float" in bad[2] and "got str" in bad[3] and "2**63-1" in bad[4]
    assert "got bool" in bad[5]
    bad = []
    packed = b"".join(msgpack.packb(d) for d in docs) + msgpack.packb(
        {"value": msgpack.ExtType(1, b"x")}
    )
    recs = list(formats.read_msgpack(io.BytesIO(packed), bad, skip_bad=True, partitions=3))
    assert [r.where for r in recs] == ["msgpack item 1"]
    assert [m.split(":")[0] for m in bad] == [f"msgpack item {n}" for n in range(2, 9)]
    assert "ExtType" in bad[-1]


def test_msgpack_items_across_blocks_and_cut_short() -> None:
    import msgpack

    big = b"x" * (3 << 20)  # spans several 1 MiB reads
    items = [msgpack.packb({"value": b"a"}), msgpack.packb({"value": big}), msgpack.packb("z")]
    data = b"".join(items)
    recs = list(formats.read_msgpack(io.BytesIO(data), [], skip_bad=False))
    assert [r.value for r in recs] == [b"a", big, b"z"]
    for cut in (1, 1 << 20, len(items[1]) - 1):
        stream = io.BytesIO(items[0] + items[1][:cut])
        got: list[formats.InRecord] = []
        with pytest.raises(CommandError, match="msgpack item 2: truncated"):
            for rec in formats.read_msgpack(stream, [], skip_bad=True):
                got.append(rec)
        assert [r.value for r in got] == [b"a"]
    with pytest.raises(CommandError, match="msgpack item 2: malformed msgpack"):
        list(formats.read_msgpack(io.BytesIO(items[0] + b"\xc1"), [], skip_bad=True))


def test_commands_that_move_offsets_or_delete_default_to_a_dry_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    for argv in (
        ["rollback", "t", "--group", "g", "--to", "earliest"],
        ["topics", "delete", "t1", "t2"],
        ["groups", "delete", "g"],
    ):
        assert parser.parse_args(argv).execute is False, argv
        assert parser.parse_args([*argv, "--dry-run"]).execute is False, argv
        assert parser.parse_args([*argv, "--execute"]).execute is True, argv
        assert parser.parse_args([*argv, "-o", "json"]).output == "json", argv
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--execute", "--dry-run"])
        assert exc.value.code == 2
        assert "not allowed with argument --execute" in capsys.readouterr().err
    for cmd in (["rollback"], ["topics", "delete"], ["groups", "delete"]):
        with pytest.raises(SystemExit):
            main([*cmd, "--help"])
        assert "--execute" in capsys.readouterr().out, cmd
