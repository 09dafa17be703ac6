"""Consumer protocol bytes and range/roundrobin results equal to the Java client's.

Random subscriptions, assignments, sticky user data and groups go in one batch
to tests/java/assignors/AssignorCheck.java (compiled here with
``kpax.testing.compile_java``, javac or else ECJ, against
``kpax.testing.classpath()``), which answers with Java's
``ConsumerProtocol.serializeSubscription/serializeAssignment`` bytes, the
sticky assignors' user data, and ``RangeAssignor``/``RoundRobinAssignor``
results. One JVM run for every case.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from kpax.consumer.assignors import (
    MemberAssignment,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
)
from kpax.consumer.assignors.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kpax.consumer.assignors.userdata import (
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)
from kpax.structs import TopicPartition as TP
from kpax.testing.jars import classpath
from kpax.testing.javac import compile_java, java_executable

pytestmark = pytest.mark.integration

JAVA_SRC = Path(__file__).resolve().parent.parent / "java" / "assignors" / "AssignorCheck.java"
NAMES = ["orders", "a", "b", "zz", "\u00e9t\u00e9", "\uff5e", "\U0001f600x", "t.1", "T_2"]


def h(s: str) -> str:
    return s.encode().hex()


def hex_or_dash(b: bytes | str | None) -> str:
    if b is None:
        return "-"
    return h(b) if isinstance(b, str) else "x" + b.hex()


def parts_arg(tps: list[TP]) -> str:
    return ",".join(f"{h(tp.topic)}:{tp.partition}" for tp in tps) or "-"


def random_tps(rng: random.Random) -> list[TP]:
    out = {TP(rng.choice(NAMES), rng.randint(0, 40)) for _ in range(rng.randint(0, 8))}
    tps = list(out)
    rng.shuffle(tps)
    return tps


def random_bytes(rng: random.Random) -> bytes | None:
    return None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 12))


def run_java(tmp_path: Path, lines: list[str]) -> list[str]:
    cp = classpath()
    compile_java([JAVA_SRC], cp, tmp_path)
    proc = subprocess.run(
        [java_executable(), "-cp", f"{tmp_path}{os.pathsep}{cp}", "AssignorCheck"],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    assert len(out) == len(lines)
    return out


def parse_assignment(line: str) -> dict[str, list[TP]]:
    result: dict[str, list[TP]] = {}
    for entry in line.split(";") if line else []:
        member, _, parts = entry.partition("=")
        tps = []
        if parts != "-":
            for item in parts.split(","):
                topic, _, p = item.partition(":")
                tps.append(TP(bytes.fromhex(topic).decode(), int(p)))
        result[bytes.fromhex(member).decode()] = tps
    return result


def test_protocol_bytes_and_assignors_match_java(tmp_path: Path) -> None:
    rng = random.Random(881)
    lines: list[str] = []
    checks: list[tuple[str, object]] = []

    for _ in range(60):
        version = rng.randint(0, 3)
        sub = MemberSubscription(
            rng.sample(NAMES, rng.randint(0, 5)),
            random_bytes(rng),
            random_tps(rng),
            rng.choice([-1, 0, 1, 7, 2**31 - 1]),
            rng.choice([None, "rack-1", "r\u00e9"]),
        )
        topics_arg = ",".join(h(t) for t in sub.topics) or "-"
        lines.append(
            f"sub {version} {topics_arg} {hex_or_dash(sub.user_data)}"
            f" {parts_arg(sub.owned_partitions)} {sub.generation_id} {hex_or_dash(sub.rack_id)}"
        )
        checks.append(("sub", (sub, version)))

    for _ in range(60):
        version = rng.randint(0, 3)
        asg = MemberAssignment(random_tps(rng), random_bytes(rng))
        lines.append(f"asg {version} {parts_arg(asg.partitions)} {hex_or_dash(asg.user_data)}")
        checks.append(("asg", (asg, version)))

    for _ in range(30):
        tps = random_tps(rng)
        gen = rng.randint(-1, 1000)
        lines.append(f"sticky {parts_arg(tps)} {gen}")
        checks.append(("sticky", (tps, gen)))
        lines.append(f"coop {gen}")
        checks.append(("coop", gen))

    for name in ("range", "roundrobin"):
        for _ in range(150):
            topics = rng.sample(NAMES, rng.randint(1, 5))
            counts = {t: rng.randint(0, 12) for t in topics}
            members: dict[str, MemberSubscription] = {}
            for _ in range(rng.randint(1, 7)):
                mid = rng.choice(["c", "consumer-1", "consumer-10", "\U0001f600", "\uff5e", "m"])
                mid += str(rng.randint(0, 99))
                instance = rng.choice([None, None, "i-1", "i-2", "\uff5e", "\U0001f600"])
                subscribed = rng.sample([*topics, "missing"], rng.randint(1, len(topics)))
                members[mid] = MemberSubscription(subscribed, group_instance_id=instance)
            # Instance ids are unique in a group.
            seen: set[str] = set()
            for s in members.values():
                if s.group_instance_id in seen:
                    s.group_instance_id = None
                if s.group_instance_id:
                    seen.add(s.group_instance_id)
            counts_arg = ",".join(f"{h(t)}:{n}" for t, n in counts.items())
            members_arg = ";".join(
                f"{h(m)}/{hex_or_dash(s.group_instance_id)}/{'+'.join(h(t) for t in s.topics)}"
                for m, s in members.items()
            )
            lines.append(f"assign {name} {counts_arg} {members_arg}")
            checks.append((name, (counts, members)))

    answers = run_java(tmp_path, lines)
    failures: list[tuple[object, ...]] = []
    for (kind, case), java in zip(checks, answers, strict=True):
        if kind == "sub":
            sub, version = case  # type: ignore[misc]
            ours = encode_subscription(sub, version)
            if ours.hex() != java or decode_subscription(
                bytes.fromhex(java)
            ) != decode_subscription(ours):
                failures.append((kind, version, sub, java, ours.hex()))
        elif kind == "asg":
            asg, version = case  # type: ignore[misc]
            ours = encode_assignment(asg, version)
            if ours.hex() != java or decode_assignment(bytes.fromhex(java)) != decode_assignment(
                ours
            ):
                failures.append((kind, version, asg, java, ours.hex()))
        elif kind == "sticky":
            tps, gen = case  # type: ignore[misc]
            decoded = decode_sticky_user_data(bytes.fromhex(java))
            ours = encode_sticky_user_data(tps, gen)
            same_topic = len({tp.topic for tp in tps}) <= 1  # Java groups topics in a HashMap
            if (
                decoded is None
                or sorted(decoded[0]) != sorted(tps)
                or decoded[1] != gen
                or (same_topic and ours.hex() != java)
            ):
                failures.append((kind, tps, gen, java, ours.hex()))
        elif kind == "coop":
            if encode_cooperative_generation(case).hex() != java:  # type: ignore[arg-type]
                failures.append((kind, case, java))
        else:
            counts, members = case  # type: ignore[misc]
            assignor = RangeAssignor() if kind == "range" else RoundRobinAssignor()
            ours_result = {m: a.partitions for m, a in assignor.assign(counts, members).items()}
            java_result = parse_assignment(java)
            if kind == "range":  # Java visits topics in HashMap order: compare as sets
                ours_result = {m: sorted(p) for m, p in ours_result.items()}
                java_result = {m: sorted(p) for m, p in java_result.items()}
            if ours_result != java_result:
                failures.append((kind, counts, members, java_result, ours_result))
    assert not failures, failures[:3]
