"""Where the `kpax` command connects, and how: flags, environment, config file, profiles.

Role: turn the global options into the keyword arguments every kpax client
takes (``bootstrap_servers``, ``security_protocol``, ``ssl_*``, ``sasl_*``,
timeouts, ``-X key=value`` extras). Precedence: command-line flags, then
``KPAX_BROKERS`` (bootstrap only), then the config file's profile.

Config file: ``--config PATH`` (or ``KPAX_CONFIG``), else ``./kpax.toml``,
else ``~/.config/kpax/config.toml`` (``$XDG_CONFIG_HOME`` honoured). TOML::

    default_profile = "local"

    [profiles.local]
    bootstrap = "127.0.0.1:9092"

    [profiles.prod]
    bootstrap = "k1.example.com:9093,k2.example.com:9093"
    security_protocol = "SASL_SSL"
    sasl_mechanism = "SCRAM-SHA-512"
    sasl_username = "app"
    sasl_password_env = "PROD_KAFKA_PASSWORD"   # any key ending in _env reads that variable
    ssl_cafile = "/etc/kafka/ca.pem"

Top-level keys other than ``profiles``/``default_profile`` form the default
profile. ``--profile`` (or ``KPAX_PROFILE``) picks a profile.

``--config`` also reads the Java clients' ``.properties`` files and kcat's
``kcat.conf`` (kpax.cli.javaconf): ``*.properties`` is a Java properties
file, ``*.conf`` a kcat.conf, ``*.toml`` TOML; any other name is TOML if it
parses as TOML without dotted keys, else a properties file. They have no
profiles. Names are mapped to kpax's (``bootstrap.servers``,
``security.protocol``, ``sasl.jaas.config``, ``ssl.ca.location``...), in
TOML profiles and ``-X`` too. A file gives connection settings (the options
every client takes); a producer or consumer option in a file (``linger.ms``,
``group.id``, ``key.deserializer``) is ignored with a note on stderr (the
command's flags and ``-X`` set those); an unknown name is an error naming
it and the closest valid one. ``-X`` takes connection options (given to
every client of the command) and the command's producer or consumer options.

Imports: kpax.cli.errors, kpax.cli.javaconf, kpax.config, the standard library (tomllib,
or tomli on 3.10).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpax.cli import javaconf
from kpax.cli.errors import UsageError
from kpax.config import dataclass_repr

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]


def config_format(path: Path, text: str) -> str:
    """ "toml", "properties" (Java) or "kcat" (see the module docstring)."""
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return "toml"
    if suffix == ".properties":
        return "properties"
    if suffix == ".conf":
        return "kcat"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "properties"
    # `request.timeout.ms=5000` is TOML too: a table `request` (a dotted key)
    dotted = any(isinstance(v, dict) and k != "profiles" for k, v in data.items())
    return "properties" if dotted else "toml"


def config_candidates() -> list[Path]:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path("kpax.toml"), Path(base) / "kpax" / "config.toml"]


#: Who takes a ``key=value`` given to ``--config`` by mistake: the commands that
#: set topic or group configs take ``--set``; the others take client options.
_SETTING_HINT = {
    ("topics", "create"): ("a topic config", "--set"),
    ("topics", "alter-config"): ("a topic config", "--set"),
    ("groups", "config"): ("a group config", "--set"),
}


def find_config(explicit: str | None, command: tuple[str, str] = ("", "")) -> Path | None:
    """The config file to read: an explicit one must be a file (UsageError if
    not; a ``key=value`` there is a setting given to the wrong option, and the
    error names the right one for ``command``, a (command, action) pair)."""
    path = explicit or os.environ.get("KPAX_CONFIG")
    if path:
        p = Path(path).expanduser()
        if not p.is_file():
            src = "--config" if explicit else "KPAX_CONFIG"
            if p.is_dir():
                raise UsageError(f"config file {str(p)!r} (from {src}) is a directory, not a file")
            key, eq, _ = path.partition("=")
            if explicit and eq and key.strip() and not p.exists():
                what, option = _SETTING_HINT.get(command, ("a client option", "-X"))
                raise UsageError(
                    f"--config {path!r} is not a config file (no such file) but a "
                    f"setting: to set {what}, write {option} {path}"
                )
            raise UsageError(f"config file {str(p)!r} (from {src}) not found")
        return p
    for p in config_candidates():
        if p.is_file():
            return p
    return None


def load_profile(path: Path | None, profile: str | None) -> dict[str, Any]:
    """The chosen profile's settings as kpax option names (``*_env`` keys resolved)."""
    if path is None:
        if profile:
            raise UsageError(
                f"profile {profile!r} asked for, but no config file found "
                f"(looked for {', '.join(str(p) for p in config_candidates())})"
            )
        return {}
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read config file {str(path)!r}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # Java's Properties.load(InputStream) reads ISO-8859-1; TOML must be UTF-8
        text = raw.decode("latin-1")
    kind = config_format(path, text)
    if kind != "toml":
        where = f"config file {str(path)!r}"
        if profile:
            raise UsageError(
                f"profile {profile!r} asked for (--profile or KPAX_PROFILE), but {where} "
                f"is a {'Java properties' if kind == 'properties' else 'kcat.conf'} file, "
                "which has no profiles"
            )
        if kind == "properties":
            settings = javaconf.parse_properties(text, where)
        else:
            settings = javaconf.parse_kcat_conf(text, where)
        return _normalise(settings, where)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise UsageError(f"config file {str(path)!r}: 'profiles' must be a table")
    top = {k: v for k, v in data.items() if k not in ("profiles", "default_profile")}
    name = profile or data.get("default_profile")
    if name:
        if name not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            raise UsageError(
                f"profile {name!r} not in config file {str(path)!r} (profiles: {known})"
            )
        chosen = {**top, **profiles[name]}
    else:
        chosen = top
    return _normalise(chosen, f"config file {str(path)!r}" + (f" profile {name!r}" if name else ""))


def _normalise(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The connection settings of a profile or file, as kpax options (``*_env``
    keys resolved); producer/consumer options noted on stderr and left out."""
    resolved: dict[str, Any] = {}
    for key, given in raw.items():
        k, value = key, given
        if key.lower().endswith(("_env", ".env", "-env")):
            var = str(given)
            if var not in os.environ:
                raise UsageError(f"{where}: {key} names environment variable {var!r}, not set")
            k, value = key[:-4], os.environ[var]
        name = javaconf.snake(k)
        if isinstance(value, list) and javaconf.ALIASES.get(name, name) == "bootstrap_servers":
            value = ",".join(map(str, value))
        resolved[k] = value
    done = javaconf.translate(resolved, where)
    if done.client_keys:
        sys.stderr.write(
            f"kpax: {where}: ignored producer/consumer setting(s) "
            f"{', '.join(done.client_keys)} (a config file gives connection settings; "
            "set those with the command's flags or -X)\n"
        )
    return done.conn


DEFAULT_TIMEOUT = 30.0
#: One day: ``--timeout`` bounds waits (connecting, admin calls, delivery at the
#: end of produce), not how long a run lasts (``--follow`` runs until stopped).
MAX_TIMEOUT = 86_400.0


def check_timeout(value: float, text: str | None = None) -> float:
    """``value`` if it is a finite number of seconds in (0, MAX_TIMEOUT], else
    ValueError (nan, inf, 0, negative, or absurdly large)."""
    if not 0 < value <= MAX_TIMEOUT:  # also false for nan
        given = text if text is not None else f"{value:g}"
        raise ValueError(
            f"{given!r} is not a number of seconds above 0 and at most {MAX_TIMEOUT:g}"
        )
    return value


@dataclass
class Settings:
    """Connection options every client gets, the ``-X`` extras for the command's
    main client (producer or consumer), and the overall timeout in seconds."""

    conn: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT

    __repr__ = dataclass_repr  # (passwords shown as [hidden])

    @property
    def bootstrap(self) -> str:
        return str(self.conn["bootstrap_servers"])

    def admin(self) -> dict[str, Any]:
        return {**self.conn, "default_api_timeout_ms": int(self.timeout * 1000)}


def client_config(args: Any) -> Settings:
    """The settings from the parsed global options (see the module docstring)."""
    command = (getattr(args, "command", None) or "", getattr(args, "action", None) or "")
    conf = load_profile(
        find_config(args.config, command), args.profile or os.environ.get("KPAX_PROFILE")
    )
    env_brokers = os.environ.get("KPAX_BROKERS")
    if args.bootstrap_server:
        conf["bootstrap_servers"] = args.bootstrap_server
    elif env_brokers:
        conf["bootstrap_servers"] = env_brokers
    if not conf.get("bootstrap_servers"):
        raise UsageError(
            "no cluster address: give -b/--bootstrap-server HOST:PORT, set KPAX_BROKERS, "
            "or write a config file (./kpax.toml or ~/.config/kpax/config.toml)"
        )
    flags = {
        "security_protocol": args.security_protocol,
        "sasl_mechanism": args.sasl_mechanism,
        "sasl_plain_username": args.sasl_username,
        "sasl_plain_password": args.sasl_password or os.environ.get("KPAX_SASL_PASSWORD"),
        "ssl_cafile": args.ssl_cafile,
        "ssl_certfile": args.ssl_certfile,
        "ssl_keyfile": args.ssl_keyfile,
    }
    conf.update({k: v for k, v in flags.items() if v})
    if args.ssl_no_verify:
        conf["ssl_verify"] = False
        conf["ssl_check_hostname"] = False
    for k in ("security_protocol", "sasl_mechanism"):
        if k in conf:
            conf[k] = str(conf[k]).lower()
    conf.setdefault("client_id", "kpax-cli")
    try:
        check_timeout(args.timeout)
    except ValueError as exc:
        raise UsageError(f"bad --timeout: {exc}") from None
    conf.setdefault("request_timeout_ms", min(int(args.timeout * 1000), 30000))
    given: dict[str, str] = {}
    for item in args.extra or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad -X {item!r}: expected key=value (a kpax client option)")
        given[key.strip()] = value
    x = javaconf.translate(given, "-X")
    for k in ("security_protocol", "sasl_mechanism"):
        if k in x.conn:
            x.conn[k] = str(x.conn[k]).lower()
    conf.update(x.conn)  # connection options: every client of the command
    extra = {k: _coerce(v) for k, v in x.client.items()}  # the producer's or consumer's
    return Settings(conf, extra, float(args.timeout))


def _coerce(value: str) -> Any:
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(value)
    except ValueError:
        return value
