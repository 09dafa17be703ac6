"""Java client ``.properties`` files, kcat.conf and Java/librdkafka option names for `kpax`.

Role: read the config files the Java tools (``--command-config``,
``--consumer.config``) and kcat (``-F``, ``~/.config/kcat.conf``) use, and
turn their option names into kpax's, for ``--config`` and ``-X``:

- :func:`parse_properties`: ``java.util.Properties.load`` rules: ``#``/``!``
  comment lines, ``key=value``, ``key: value`` or ``key value``, a line
  ending in an odd number of backslashes continues on the next (its leading
  blanks dropped), escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\`` before any
  other character (``\\=``, ``\\:``, ``\\ ``, ``\\\\``); the last of repeated keys wins.
- :func:`parse_kcat_conf`: kcat's rules: ``key=value`` lines split at the
  first ``=``, blanks around both trimmed, ``#`` comment lines, no escapes.
- :func:`parse_jaas`: one ``sasl.jaas.config`` login module with its
  options (PlainLoginModule, ScramLoginModule).
- :func:`translate`: option names to kpax's. A dotted Java or librdkafka
  name becomes the kpax option of that name in snake_case
  (``request.timeout.ms`` -> ``request_timeout_ms``); the names that differ
  are mapped (``metadata.broker.list``, ``sasl.mechanisms``,
  ``sasl.username``/``sasl.password``, ``sasl.jaas.config``,
  ``ssl.truststore.location``/``ssl.keystore.location`` (PEM files only: JKS
  and PKCS12 stores are refused with the ``keytool`` command that converts
  them), ``ssl.ca.location``, ``ssl.certificate.location``,
  ``ssl.key.location``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm``,
  ``enable.ssl.certificate.verification``). Connection options (those every
  client takes) are the result; options of one client (``linger.ms``,
  ``group.id``, ``key.deserializer``...) are returned apart, for the caller
  to ignore (files) or pass on (``-X``); any other name is an error naming
  every unknown key and the closest valid name of each.

Imports: kpax.cli.errors, kpax.config, the option tables of kpax's clients
(lazily), the standard library.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpax.cli.errors import UsageError
from kpax.config import dataclass_repr

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    """Natural lines joined where one ends in an odd number of backslashes;
    comment and blank lines left out (a comment line never continues)."""
    natural = _LINE_BREAK.split(text)
    out: list[str] = []
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_BLANK)
            i += 1
        out.append(line)
    return out


def _unescape(raw: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\" or i + 1 >= len(raw):
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise UsageError(f"{where}: malformed \\uXXXX escape {raw[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """A logical line's raw key and raw value (escapes not yet resolved)."""
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANK:
        j += 1
    if j < n and line[j] in "=:":  # the separator, or the first after the blanks
        j += 1
    while j < n and line[j] in _BLANK:
        j += 1
    return key, line[j:]


def parse_properties(text: str, where: str = "properties") -> dict[str, str]:
    """The keys and values of a Java ``.properties`` text (see the module docstring)."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        out[_unescape(key, where)] = _unescape(value, where)
    return out


def parse_kcat_conf(text: str, where: str = "kcat.conf") -> dict[str, str]:
    """The keys and values of a kcat.conf (librdkafka ``key=value`` lines)."""
    out: dict[str, str] = {}
    for number, raw in enumerate(_LINE_BREAK.split(text), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            # the line is not shown: it may hold a secret
            raise UsageError(f"{where} line {number}: expected key=value")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Jaas:
    """One JAAS login module: its class name, control flag and options."""

    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    __repr__ = dataclass_repr  # (its password shown as [hidden])


_JAAS_HEAD = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\b")
_JAAS_OPTION = re.compile(r"\s*([^\s=;\"]+)\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s;\"]+))", re.S)
_JAAS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "b": "\b"}


def parse_jaas(text: str, where: str = "sasl.jaas.config") -> Jaas:
    """``Module required key="value" ...;`` (exactly one login module, as Kafka's
    clients require); quoted values may hold blanks, ``;`` and ``\\"``. Errors
    never quote the text: it holds a password."""
    m = _JAAS_HEAD.match(text)
    if m is None:
        raise UsageError(
            f"{where}: expected 'LoginModuleClass required key=\"value\" ...;' (a login "
            "module class, a control flag, options, a final ';')"
        )
    options: dict[str, str] = {}
    pos = m.end()
    while True:
        om = _JAAS_OPTION.match(text, pos)
        if om is None:
            break
        quoted, bare = om.group(2), om.group(3)
        if quoted is not None:
            value = re.sub(r"\\(.)", lambda e: _JAAS_ESCAPES.get(e.group(1), e.group(1)), quoted)
        else:
            value = bare
        options[om.group(1)] = value
        pos = om.end()
    rest = text[pos:].strip()
    if not rest.startswith(";"):
        after = f" after option {list(options)[-1]!r}" if options else ""
        raise UsageError(
            f"{where}: cannot parse the options of {m.group(1)}{after} (expected "
            "key=\"value\" options, values with blanks or ';' in double quotes, a final ';')"
        )
    if rest[1:].strip():
        raise UsageError(
            f"{where}: holds more than one login module (text after the first ';'); "
            "Kafka clients take exactly one"
        )
    return Jaas(m.group(1), m.group(2), options)


PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_UNSUPPORTED_MODULES = {
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": (
        "OAUTHBEARER takes a token provider, Python code: use kpax's API "
        "(sasl_oauth_token_provider), not a config file"
    ),
}
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"

#: Names that are not the kpax option in snake_case (TOML profile names and
#: Java/librdkafka names, dots already turned into underscores).
ALIASES = {
    "bootstrap": "bootstrap_servers",
    "brokers": "bootstrap_servers",
    "metadata_broker_list": "bootstrap_servers",  # librdkafka
    "sasl_mechanisms": "sasl_mechanism",  # librdkafka
    "sasl_username": "sasl_plain_username",  # librdkafka, kpax profiles
    "sasl_password": "sasl_plain_password",
    "ssl_ca_location": "ssl_cafile",  # librdkafka
    "ssl_certificate_location": "ssl_certfile",
    "ssl_key_location": "ssl_keyfile",
    "ssl_key_password": "ssl_password",  # Java and librdkafka
}
#: Java names handled one by one (see :func:`translate`).
_SPECIAL = (
    "sasl_jaas_config",
    "ssl_truststore_location",
    "ssl_truststore_type",
    "ssl_truststore_password",
    "ssl_keystore_location",
    "ssl_keystore_type",
    "ssl_keystore_password",
    "ssl_endpoint_identification_algorithm",
    "enable_ssl_certificate_verification",
)
#: Options that take Python objects: not settable from text.
_OBJECTS = frozenset({"ssl_context", "sasl_oauth_token_provider"})


def _tables() -> tuple[Mapping[str, Any], set[str]]:
    """(the connection options every client takes, every client's own options)."""
    from kpax.admin import ADMIN_OPTIONS
    from kpax.broker.options import COMMON_OPTIONS
    from kpax.consumer.options import CONSUMER_OPTIONS
    from kpax.producer.options import PRODUCER_OPTIONS

    common = {k: v for k, v in COMMON_OPTIONS.items() if k not in _OBJECTS}
    clients = (set(PRODUCER_OPTIONS) | set(CONSUMER_OPTIONS) | set(ADMIN_OPTIONS)) - set(
        COMMON_OPTIONS
    )
    return common, clients


def snake(name: str) -> str:
    return name.strip().replace(".", "_").replace("-", "_").lower()


def closest(name: str) -> str | None:
    """The valid name closest to *name*, written as *name* is (dotted or snake_case)."""
    common, clients = _tables()
    valid = set(common) | clients | set(ALIASES) | set(_SPECIAL)
    dotted = "." in name
    key = snake(name)
    found = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
    if not found:
        return None
    return found[0].replace("_", ".") if dotted else found[0]


def _coerce_as(default: Any, value: Any, key: str, where: str) -> Any:
    """A text value as the type of the option's default (bool, int), else as it is."""
    if not isinstance(value, str):
        return value
    if isinstance(default, bool):
        low = value.strip().lower()
        if low not in ("true", "false"):
            raise UsageError(f"{where}: {key}={value!r}: expected true or false")
        return low == "true"
    if isinstance(default, int):
        try:
            return int(value.strip())
        except ValueError:
            raise UsageError(f"{where}: {key}={value!r}: expected an integer") from None
    return value


def _pem(path: str, key: str, where: str, store: str) -> str:
    """*path* if it is a PEM file, else a UsageError saying JKS/PKCS12 are not read."""
    p = Path(path).expanduser()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"{where}: {key} {path!r}: cannot read it: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        if store == "truststore":
            how = f"keytool -exportcert -rfc -keystore {path} -alias CA_ALIAS -file ca.pem"
        else:
            how = (
                f"keytool -importkeystore -srckeystore {path} -destkeystore client.p12 "
                "-deststoretype PKCS12, then openssl pkcs12 -in client.p12 -out client.pem"
            )
        raise UsageError(
            f"{where}: {key} {path!r} is not a PEM file: kpax reads PEM {store}s only, JKS "
            f"and PKCS12 are not supported; convert it ({how}) and name the PEM file"
        )
    return str(p)


@dataclass
class Translated:
    """:func:`translate`'s result: connection options (kpax names), other
    clients' options (kpax names, values as given), and the keys as written
    of the latter."""

    conn: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    client_keys: list[str] = field(default_factory=list)

    __repr__ = dataclass_repr  # (passwords shown as [hidden])


def translate(raw: Mapping[str, Any], where: str) -> Translated:
    """Map option names (kpax snake_case, TOML profile names, Java or librdkafka
    dotted names) to kpax options; values in text are converted to the
    option's type. UsageError names every unknown key at once."""
    common, clients = _tables()
    out = Translated()
    by_key = {snake(k): (k, v) for k, v in raw.items()}
    unknown: list[str] = []
    jaas: Jaas | None = None
    for k, (given, value) in by_key.items():
        name = ALIASES.get(k, k)
        if name in common:
            out.conn[name] = _coerce_as(common[name].default, value, given, where)
        elif name in _SPECIAL:
            continue  # below, once every key is known
        elif name in clients:
            out.client[name] = value
            out.client_keys.append(given)
        elif name in _OBJECTS:
            raise UsageError(
                f"{where}: {given} takes a Python object: use kpax's API, not a config file"
            )
        else:
            unknown.append(given)
    if unknown:
        hints = []
        for u in unknown:
            c = closest(u)
            hints.append(f"{u!r}" + (f" (did you mean {c!r}?)" if c else ""))
        raise UsageError(f"{where}: unknown setting(s) {', '.join(hints)}")

    def special(name: str) -> tuple[str, str] | None:
        if name not in by_key:
            return None
        given, value = by_key[name]
        return given, str(value).strip()

    for store in ("truststore", "keystore"):
        t = special(f"ssl_{store}_type")
        if t and t[1].upper() != "PEM":
            raise UsageError(
                f"{where}: {t[0]}={t[1]}: kpax reads PEM files only (JKS and PKCS12 "
                f"are not supported); convert the {store} to PEM and set {t[0]}=PEM"
            )
    if loc := special("ssl_truststore_location"):
        out.conn.setdefault("ssl_cafile", _pem(loc[1], loc[0], where, "truststore"))
    if loc := special("ssl_keystore_location"):
        # a PEM key store holds the private key and the certificate chain
        out.conn.setdefault("ssl_certfile", _pem(loc[1], loc[0], where, "keystore"))
    # ssl.truststore.password / ssl.keystore.password: PEM stores have none (the
    # private key's password is ssl.key.password): accepted and unused.
    if alg := special("ssl_endpoint_identification_algorithm"):
        if alg[1].lower() in ("", "none"):
            out.conn["ssl_check_hostname"] = False
        elif alg[1].lower() == "https":
            out.conn["ssl_check_hostname"] = True
        else:
            raise UsageError(f"{where}: {alg[0]}={alg[1]!r}: expected https or an empty value")
    if ver := special("enable_ssl_certificate_verification"):
        out.conn["ssl_verify"] = _coerce_as(True, ver[1], ver[0], where)
    if jc := special("sasl_jaas_config"):
        jaas = parse_jaas(by_key["sasl_jaas_config"][1], f"{where}: {jc[0]}")
        _apply_jaas(jaas, jc[0], out.conn, where)
    return out


def _apply_jaas(jaas: Jaas, key: str, conn: dict[str, Any], where: str) -> None:
    if jaas.module in _UNSUPPORTED_MODULES:
        raise UsageError(f"{where}: {key}: {_UNSUPPORTED_MODULES[jaas.module]}")
    if jaas.module == KRB5_MODULE:
        _apply_krb5(jaas, key, conn, where)
        return
    if jaas.module not in (PLAIN_MODULE, SCRAM_MODULE):
        raise UsageError(
            f"{where}: {key}: login module {jaas.module!r} is not supported (kpax takes "
            f"{PLAIN_MODULE}, {SCRAM_MODULE} and {KRB5_MODULE})"
        )
    missing = [o for o in ("username", "password") if o not in jaas.options]
    if missing:
        raise UsageError(f"{where}: {key}: {jaas.module} needs {' and '.join(missing)}")
    mechanism = str(conn.get("sasl_mechanism") or "").upper()
    if jaas.module == PLAIN_MODULE:
        if mechanism and mechanism != "PLAIN":
            raise UsageError(
                f"{where}: {key} uses PlainLoginModule but sasl.mechanism is {mechanism}"
            )
        conn.setdefault("sasl_mechanism", "PLAIN")
    elif not mechanism.startswith("SCRAM-"):
        raise UsageError(
            f"{where}: {key} uses ScramLoginModule: set sasl.mechanism to SCRAM-SHA-256 or "
            f"SCRAM-SHA-512{f' (it is {mechanism})' if mechanism else ''}"
        )
    conn.setdefault("sasl_plain_username", jaas.options["username"])
    conn.setdefault("sasl_plain_password", jaas.options["password"])


def _apply_krb5(jaas: Jaas, key: str, conn: dict[str, Any], where: str) -> None:
    """Krb5LoginModule: GSSAPI (Java's default mechanism), its keytab, principal and service."""
    mechanism = str(conn.get("sasl_mechanism") or "GSSAPI").upper()
    if mechanism != "GSSAPI":
        raise UsageError(f"{where}: {key} uses Krb5LoginModule but sasl.mechanism is {mechanism}")
    conn["sasl_mechanism"] = "GSSAPI"
    use_keytab = jaas.options.get("useKeyTab", "false").lower() == "true"
    if use_keytab and "keyTab" not in jaas.options:
        raise UsageError(f'{where}: {key}: useKeyTab=true needs keyTab="<file>"')
    if use_keytab:
        conn.setdefault("sasl_kerberos_keytab", jaas.options["keyTab"])
    if "principal" in jaas.options:
        conn.setdefault("sasl_kerberos_principal", jaas.options["principal"])
    if "serviceName" in jaas.options:
        conn.setdefault("sasl_kerberos_service_name", jaas.options["serviceName"])
