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
    with pytest.raises(UsageError, match=r"unknown setting\(s\) 'favourite_colour'"):
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


def test_java_properties_parser() -> None:
    from kpax.cli.javaconf import parse_properties

    text = (
        "# a comment\n"
        "  ! another, indented\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d\t=  spaced value  \n"
        "e==x\n"
        "long = one,\\\n"
        "       two,\\\n"
        "\tthree\n"
        "key\\ with\\ blanks\\:and\\=signs = v\n"
        "esc = tab\\there\\nnewline \\u00e9 \\\\ end\\\\\n"
        "# not a comment continued \\\n"
        "f=after\n"
        "empty=\n"
        "bare\r\n"
        "crlf=yes\r"
        "cr=also\n"
        "a=last wins\n"
        "tail=no newline \\"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "=x",
        "long": "one,two,three",
        "key with blanks:and=signs": "v",
        "esc": "tab\there\nnewline \u00e9 \\ end\\",
        "f": "after",
        "empty": "",
        "bare": "",
        "crlf": "yes",
        "cr": "also",
        "tail": "no newline ",
    }
    with pytest.raises(UsageError, match="uXXXX"):
        parse_properties("k=\\u12g4")


def test_kcat_conf_parser() -> None:
    from kpax.cli.javaconf import parse_kcat_conf

    text = "# kcat\n bootstrap.servers = h:1 \n\nsasl.password=a=b#c\\d\nempty=\n"
    assert parse_kcat_conf(text) == {
        "bootstrap.servers": "h:1",
        "sasl.password": "a=b#c\\d",  # no escapes, split at the first '='
        "empty": "",
    }
    with pytest.raises(UsageError, match="line 2: expected key=value"):
        parse_kcat_conf("a=1\nnot a setting\n", "kcat.conf")


def test_jaas_config() -> None:
    from kpax.cli.javaconf import PLAIN_MODULE, SCRAM_MODULE, parse_jaas

    j = parse_jaas(f'{PLAIN_MODULE} required username="alice" password="a b;c\\"d\\\\";')
    assert (j.module, j.flag) == (PLAIN_MODULE, "required")
    assert j.options == {"username": "alice", "password": 'a b;c"d\\'}
    j = parse_jaas(f"  {SCRAM_MODULE}  optional\n username=bob  password = s3cr3t\n;  ")
    assert j.options == {"username": "bob", "password": "s3cr3t"} and j.flag == "optional"
    assert parse_jaas(f"{SCRAM_MODULE} required tokenauth=true;").options == {"tokenauth": "true"}
    for bad, match in (
        ("username=a;", "expected 'LoginModuleClass required"),
        (f'{PLAIN_MODULE} required username="a" password="b"', "final ';'"),
        (f'{PLAIN_MODULE} required username="a" password="unterminated;', "after option 'u"),
        (f"{PLAIN_MODULE} required; {SCRAM_MODULE} required;", "more than one login module"),
    ):
        with pytest.raises(UsageError, match=match) as err:
            parse_jaas(bad)
        assert "unterminated" not in str(err.value)  # never the text: it holds passwords


def test_java_and_librdkafka_names_map_to_kpax_options(tmp_path: Path) -> None:
    from kpax.cli.javaconf import PLAIN_MODULE, SCRAM_MODULE, translate

    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    got = translate(
        {
            "bootstrap.servers": "h1:1,h2:2",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM_MODULE} required username="u" password="p";',
            "ssl.truststore.location": str(pem),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.password": "unused",
            "ssl.endpoint.identification.algorithm": "",
            "client.id": "12345",
            "request.timeout.ms": "5000",
            "reconnect.backoff.ms": "7",
            "group.id": "g",
            "linger.ms": "3",
            "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        },
        "f",
    )
    assert got.conn == {
        "bootstrap_servers": "h1:1,h2:2",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": str(pem),
        "ssl_check_hostname": False,
        "client_id": "12345",  # text stays text
        "request_timeout_ms": 5000,  # the option's type
        "reconnect_backoff_ms": 7,
    }
    assert got.client_keys == ["group.id", "linger.ms", "key.deserializer"]
    assert got.client == {
        "group_id": "g",
        "linger_ms": "3",
        "key_deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
    }
    # librdkafka / kcat names
    got = translate(
        {
            "metadata.broker.list": "h:1",
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kp",
            "enable.ssl.certificate.verification": "false",
        },
        "f",
    )
    assert got.conn == {
        "bootstrap_servers": "h:1",
        "security_protocol": "sasl_ssl",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/c.pem",
        "ssl_keyfile": "/k.pem",
        "ssl_password": "kp",
        "ssl_verify": False,
    }
    # PLAIN from the JAAS module alone; an explicit username beats the JAAS one
    got = translate(
        {
            "sasl.jaas.config": f'{PLAIN_MODULE} required username="j" password="p";',
            "sasl.username": "explicit",
        },
        "f",
    )
    assert got.conn == {
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "explicit",
        "sasl_plain_password": "p",
    }
    # Kerberos: GSSAPI (Java's default mechanism), keytab, principal, service name
    got = translate(
        {
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true storeKey=true keyTab="/etc/app.keytab" principal="app@R";',
            "sasl.kerberos.service.name": "kfk",
            "security.protocol": "SASL_SSL",
        },
        "f",
    )
    assert got.conn == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_keytab": "/etc/app.keytab",
        "sasl_kerberos_principal": "app@R",
        "sasl_kerberos_service_name": "kfk",
    }
    jaas = "sasl.jaas.config"
    for given, match in (
        (
            {"sasl.usrname": "u", "boostrap.servers": "h:1", "no.such.thing": "x"},
            r"f: unknown setting\(s\) 'sasl.usrname' \(did you mean 'sasl.username'\?\), "
            r"'boostrap.servers' \(did you mean 'bootstrap.servers'\?\), 'no.such.thing'$",
        ),
        ({"linger_mss": "1"}, "'linger_mss' \\(did you mean 'linger_ms'\\?\\)"),
        ({"ssl.truststore.location": str(jks)}, "is not a PEM file.*JKS and PKCS12.*keytool"),
        ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS: kpax reads PEM files only"),
        ({"ssl.keystore.type": "PKCS12"}, "PKCS12 are not supported"),
        ({"ssl.truststore.location": str(tmp_path / "nope.pem")}, "cannot read it"),
        ({"request.timeout.ms": "soon"}, "request.timeout.ms='soon': expected an integer"),
        ({"ssl.check.hostname": "maybe"}, "expected true or false"),
        ({"ssl.context": "x"}, "takes a Python object"),
        ({jaas: f'{SCRAM_MODULE} required username="u" password="p";'}, "SCRAM-SHA-256 or"),
        (
            {
                "sasl.mechanism": "PLAIN",
                jaas: f'{SCRAM_MODULE} required username="u" password="p";',
            },
            "it is PLAIN",
        ),
        (
            {"sasl.mechanism": "SCRAM-SHA-256", jaas: f'{PLAIN_MODULE} required username="u";'},
            "needs password",
        ),
        (
            {
                "sasl.mechanism": "SCRAM-SHA-256",
                jaas: f'{PLAIN_MODULE} required username="u" password="p";',
            },
            "uses PlainLoginModule but sasl.mechanism is SCRAM-SHA-256",
        ),
        (
            {jaas: "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
            "useKeyTab=true needs keyTab",
        ),
        (
            {
                "sasl.mechanism": "PLAIN",
                jaas: "com.sun.security.auth.module.Krb5LoginModule required;",
            },
            "uses Krb5LoginModule but sasl.mechanism is PLAIN",
        ),
        (
            {jaas: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
            "token provider",
        ),
        ({jaas: "com.example.Custom required;"}, "'com.example.Custom' is not supported"),
    ):
        with pytest.raises(UsageError, match=match):
            translate(given, "f")


def test_config_files_by_format_and_x_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kpax.cli.javaconf import PLAIN_MODULE

    monkeypatch.chdir(tmp_path)
    for var in ("KPAX_BROKERS", "KPAX_CONFIG", "KPAX_PROFILE", "KPAX_SASL_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    java = (
        f"bootstrap.servers=h:1\nsasl.jaas.config={PLAIN_MODULE} required \\\n"
        '  username="u" password="p";\nsecurity.protocol=SASL_PLAINTEXT\ngroup.id=g\n'
    )
    for name in ("client.properties", "client.cfg", "client"):
        (tmp_path / name).write_text(java)
        s = settings.client_config(_args(config=name))
        assert s.conn["bootstrap_servers"] == "h:1" and s.conn["sasl_plain_password"] == "p"
        assert s.conn["security_protocol"] == "sasl_plaintext" and s.extra == {}
        assert "ignored producer/consumer setting(s) group.id" in capsys.readouterr().err
    # dotted keys that are valid TOML (a table `request`) still read as properties
    (tmp_path / "dotted").write_text("bootstrap.servers=h:2\nrequest.timeout.ms=5000\n")
    s = settings.client_config(_args(config="dotted"))
    assert s.conn["bootstrap_servers"] == "h:2" and s.conn["request_timeout_ms"] == 5000
    (tmp_path / "plain").write_text('bootstrap = "h:3"\n')  # TOML without a suffix
    assert settings.client_config(_args(config="plain")).conn["bootstrap_servers"] == "h:3"
    (tmp_path / "kcat.conf").write_text("metadata.broker.list=h:4\nsasl.password=a\\b\n")
    s = settings.client_config(_args(config="kcat.conf"))
    assert s.conn["bootstrap_servers"] == "h:4" and s.conn["sasl_plain_password"] == "a\\b"
    (tmp_path / "latin1.properties").write_bytes(b"bootstrap.servers=h:5\nsasl.password=p\xe9\n")
    s = settings.client_config(_args(config="latin1.properties"))
    assert s.conn["sasl_plain_password"] == "p\u00e9"  # ISO-8859-1, as Java reads it
    # TOML profiles take the Java names too
    (tmp_path / "k.toml").write_text(
        '[profiles.x]\n"bootstrap.servers" = "h:6"\n"sasl.mechanism" = "SCRAM-SHA-256"\n'
        '"sasl.username" = "u"\n"sasl.password.env" = "PW"\n'
    )
    monkeypatch.setenv("PW", "secret")
    s = settings.client_config(_args(config="k.toml", profile="x"))
    assert s.conn["sasl_plain_username"] == "u" and s.conn["sasl_plain_password"] == "secret"
    assert s.conn["sasl_mechanism"] == "scram-sha-256"
    with pytest.raises(UsageError, match="Java properties file, which has no profiles"):
        settings.client_config(_args(config="client.properties", profile="x"))
    with pytest.raises(UsageError, match=r"'kcat.conf'.*unknown setting.*'api.version.request'"):
        (tmp_path / "kcat.conf").write_text("bootstrap.servers=h:1\napi.version.request=true\n")
        settings.client_config(_args(config="kcat.conf"))
    # -X: dotted names; connection options for every client, the rest for the main one
    s = settings.client_config(
        _args(
            bootstrap_server="h:1",
            extra=[
                "security.protocol=SASL_SSL",
                f'sasl.jaas.config={PLAIN_MODULE} required username="xu" password="x=p";',
                "ssl.ca.location=/ca.pem",
                "request.timeout.ms=1234",
                "linger.ms=20",
                "enable.idempotence=false",
                "group_instance_id=i-1",
            ],
        )
    )
    assert s.conn["security_protocol"] == "sasl_ssl" and s.conn["sasl_mechanism"] == "plain"
    assert s.conn["sasl_plain_username"] == "xu" and s.conn["sasl_plain_password"] == "x=p"
    assert s.conn["ssl_cafile"] == "/ca.pem" and s.conn["request_timeout_ms"] == 1234
    assert s.admin()["request_timeout_ms"] == 1234
    assert s.extra == {"linger_ms": 20, "enable_idempotence": False, "group_instance_id": "i-1"}
    with pytest.raises(UsageError, match=r"-X: unknown setting\(s\) 'linger.mss'.*'linger.ms'"):
        settings.client_config(_args(bootstrap_server="h:1", extra=["linger.mss=1"]))


def _one_line_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _no_kpax_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("KPAX_BROKERS", "KPAX_CONFIG", "KPAX_PROFILE"):
        monkeypatch.delenv(var, raising=False)


def test_config_given_a_setting_names_the_option_that_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--config key=value` is a setting, not a file: the one-line error names the
    option that takes it (--set for topic and group configs, -X for client options)."""
    _no_kpax_env(tmp_path, monkeypatch)
    for argv, hint in (
        (["--config", "retention.ms=1000", "topics", "create", "t"], "--set retention.ms=1000"),
        (["topics", "alter-config", "t", "--config", "retention.ms=1"], "--set retention.ms=1"),
        (["groups", "config", "g", "--config", "a.b=c"], "--set a.b=c"),
        (["consume", "t", "--config", "session.timeout.ms=6000"], "-X session.timeout.ms=6000"),
        (["-b", "h:1", "meta", "--config=client.id=me"], "-X client.id=me"),
    ):
        err = _one_line_usage_error(argv, capsys)
        assert hint in err and "not a config file" in err and "not found" not in err, err
    (tmp_path / "a=b").write_text('bootstrap = "h:9"\n')  # a file of that name is read
    assert settings.client_config(_args(config="a=b")).bootstrap == "h:9"
    err = _one_line_usage_error(["--config", "nope.toml", "meta"], capsys)
    assert "'nope.toml' (from --config) not found" in err, err


def test_config_given_a_directory_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_kpax_env(tmp_path, monkeypatch)
    (tmp_path / "conf.d").mkdir()
    err = _one_line_usage_error(["--config", "conf.d", "meta"], capsys)
    assert "'conf.d' (from --config) is a directory, not a file" in err, err
    monkeypatch.setenv("KPAX_CONFIG", str(tmp_path / "conf.d"))
    err = _one_line_usage_error(["meta"], capsys)
    assert "(from KPAX_CONFIG) is a directory, not a file" in err, err


def test_rollback_to_minus_n_is_refused_naming_shift_by(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`rollback --to -5` used to mean 5 before the end, moving a group that lags
    by millions forward by millions; kafka-consumer-groups users mean a shift
    back (--shift-by -5). Refused before connecting, naming both spellings."""
    for extra in ((), ("--execute",)):
        err = _one_line_usage_error(
            ["-b", "127.0.0.1:1", "rollback", "--group", "g", "t", "--to", "-5", *extra], capsys
        )
        assert "--to -5" in err and "--shift-by -5" in err, err
        assert "--to latest --shift-by -5" in err, err
    err = _one_line_usage_error(["-b", "127.0.0.1:1", "rollback", "--group", "g", "t"], capsys)
    assert "--to" in err and "--shift-by" in err, err
    args = build_parser().parse_args(["rollback", "-g", "g", "t", "--shift-by", "-5"])
    assert args.shift_by == -5 and args.to is None
