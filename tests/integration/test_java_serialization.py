"""Byte-for-byte agreement with Apache Kafka's own (Java) message serializers.

Random messages are built in kpax from the generated schema table, written as
the JSON that Kafka's generated ``*JsonConverter`` classes read, and sent in one
batch to tests/java/Serialize.java (compiled here with
``kpax.testing.compile_java``, javac or else ECJ, against the
kafka-clients jar of the Kafka release kpax/proto was generated from,
``KAFKA_SPECS_VERSION``, whatever broker the suite runs against). Java builds the same
message with ``org.apache.kafka.common.message.*Data`` and serializes it with
``MessageUtil``; kpax's ``encode(version)`` must produce the same bytes and
``decode`` must read Java's bytes back into an equal object. One JVM runs every
case.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from kpax.proto.api import Message
from kpax.proto.messages import KAFKA_SPECS_VERSION
from kpax.testing.jars import classpath, kafka_version
from kpax.testing.javac import compile_java, java_executable
from tests.unit.test_messages_schema import SCHEMA, _in, all_messages, random_instance, resolve

pytestmark = pytest.mark.integration

JAVA_SRC = Path(__file__).resolve().parent.parent / "java" / "Serialize.java"

# The APIs the brief requires explicitly; every other message is checked too.
REQUIRED = [
    "ApiVersions",
    "Metadata",
    "Produce",
    "Fetch",
    "ListOffsets",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "InitProducerId",
    "CreateTopics",
    "DeleteTopics",
    "ConsumerGroupHeartbeat",
]

CASES_PER_VERSION = 3


def _json_name(spec_name: str) -> str:
    return spec_name[0].lower() + spec_name[1:]


def _json_value(value: Any, typ: str, struct: str | None, v: int) -> Any:
    if value is None:
        return None
    if typ.startswith("[]"):
        return [_json_value(x, typ[2:], struct, v) for x in value]
    if struct is not None:
        return to_json(value, struct, v)
    if typ == "uuid":
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    if typ in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode()
    return value


def to_json(obj: Any, qual: str, v: int) -> dict[str, Any]:
    """The JSON Kafka's <Name>JsonConverter.read(node, v) turns into the same message."""
    out: dict[str, Any] = {}
    for row in SCHEMA[qual]:
        attr, typ, vers, _nullable, _tag, _tagged, struct = row[:7]
        if not _in(vers, v):
            continue
        out[_json_name(str(row[10]))] = _json_value(getattr(obj, str(attr)), str(typ), struct, v)  # type: ignore[arg-type]
    return out


def _java_name(cls: type[Message]) -> str:
    return cls.__name__


@pytest.fixture(scope="module")
def serializer(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    # The Java classes of the same specs: another release names fields otherwise.
    cp = classpath(KAFKA_SPECS_VERSION if KAFKA_SPECS_VERSION != "unknown" else kafka_version())
    out = tmp_path_factory.mktemp("javaser")
    compile_java([JAVA_SRC], cp, out)
    return [java_executable(), "-cp", f"{out}{os.pathsep}{cp}", "Serialize"]


def _cases() -> list[tuple[type[Message], int, Message]]:
    rng = random.Random(20261122)
    cases: list[tuple[type[Message], int, Message]] = []
    for cls in all_messages():
        for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
            cases.append((cls, v, cls()))
            for _ in range(CASES_PER_VERSION):
                obj = random_instance(cls.__name__, v, cls.is_flexible(v), rng, unknown=False)
                cases.append((cls, v, obj))
    return cases


def test_byte_for_byte_with_java(serializer: list[str]) -> None:
    cases = _cases()
    lines = []
    for cls, v, obj in cases:
        lines.append(f"{_java_name(cls)}\t{v}\t{json.dumps(to_json(obj, cls.__name__, v))}")
    proc = subprocess.run(
        serializer,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = proc.stdout.splitlines()
    assert len(answers) == len(cases), proc.stderr[-3000:]
    failures: list[str] = []
    checked: dict[str, set[int]] = {}
    for (cls, v, obj), line, sent in zip(cases, answers, lines, strict=True):
        label = f"{cls.__name__} v{v}"
        if not line.startswith("OK "):
            failures.append(f"{label}: Java could not build it: {line[:300]} <- {sent[:300]}")
            continue
        java_bytes = bytes.fromhex(line[3:])
        ours = obj.encode(v)
        if ours != java_bytes:
            failures.append(
                f"{label}: bytes differ\n  kpax {ours.hex()}\n  java {java_bytes.hex()}\n  {obj!r}"
            )
            continue
        back = cls.decode(java_bytes, v)
        if back != obj:
            failures.append(f"{label}: decode of Java bytes differs: {back!r} != {obj!r}")
            continue
        checked.setdefault(cls.API_NAME, set()).add(v)
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(
        failures[:15]
    )
    for api in REQUIRED:
        assert api in checked, api
        req = resolve(f"{api}Request")
        flex = req.FLEXIBLE_VERSION
        # a flexible and (when the API has one) a non-flexible version of each were compared
        assert any(req.is_flexible(v) for v in checked[api]) or flex is None
        if (flex if flex is not None else 1 << 15) > req.MIN_VERSION:
            assert any(not req.is_flexible(v) for v in checked[api])


def test_uuid_json_form_matches_kafka() -> None:
    # Kafka's Uuid.toString(): URL-safe base64 without padding (22 characters).
    u = uuid.UUID(int=(1 << 128) - 1)
    assert _json_value(u, "uuid", None, 0) == "_____________________w"
