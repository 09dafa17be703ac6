"""`kpax rollback`: ``--shift-by N`` from the committed offsets or from ``--to``'s,
and a plan that says which partitions move forward, past records the group has
not read, and how far (real broker, the command as a subprocess). ``--to -N``
refused: tests/unit/test_cli_units.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

import kpax
from kpax.testing.base import KafkaCluster
from tests.integration.test_cli import ok, one_line_error, run_kpax

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def k(kafka: KafkaCluster) -> Any:
    def call(*args: str, **kw: Any) -> Any:
        return run_kpax(kafka.bootstrap, *args, **kw)

    return call


def test_shift_by_and_forward_moves_in_the_plan(kafka: KafkaCluster, k: Any, topic: Any) -> None:
    t = topic(2)
    tp0, tp1 = kpax.TopicPartition(t, 0), kpax.TopicPartition(t, 1)
    stdin = "".join(json.dumps({"value": f"v{i}", "partition": i % 2}) + "\n" for i in range(200))
    ok(k("produce", t, "--format", "json", stdin=stdin.encode()))
    group = f"g-{t}"
    admin = kpax.Admin(kafka.bootstrap)
    try:
        admin.alter_group_offsets(group, {tp0: 10, tp1: 90}).raise_for_errors()

        def committed(g: str = group) -> dict[int, int]:
            return {tp.partition: om.offset for tp, om in admin.list_group_offsets(g).items()}

        def plan(*args: str) -> dict[str, Any]:
            doc: dict[str, Any] = ok(k("rollback", "--group", group, t, *args, "-o", "json")).json()
            return doc

        # --shift-by -5: back 5 from each committed offset, as Java's --shift-by
        doc = plan("--shift-by", "-5")
        assert [(p["current"], p["new"], p["delta"]) for p in doc["partitions"]] == [
            (10, 5, -5),
            (90, 85, -5),
        ]
        assert doc["forward"] == [] and doc["dry_run"] and committed() == {0: 10, 1: 90}
        r = ok(k("rollback", "--group", group, t, "--shift-by", "-5", "--execute"))
        assert r.text.startswith("moved") and "forward" not in r.text
        assert committed() == {0: 5, 1: 85}
        # clamped to the log, as Java clamps
        assert [p["new"] for p in plan("--shift-by", "-50")["partitions"]] == [0, 35]
        # --to latest moves both forward: the plan says so and how far
        assert plan("--to", "latest")["forward"] == [
            {"partition": 0, "by": 95},
            {"partition": 1, "by": 15},
        ]
        # --to latest --shift-by -5: 5 records before the end (forward too)
        r = ok(
            k("rollback", "--group", group, t, "--to", "latest", "--shift-by", "-5", "--execute")
        )
        head, *_, last = r.text.splitlines()
        assert head == f"moved: group {group!r} on {t!r} to latest -5", r.text
        assert last == (
            "forward: 2 partition(s) moved past 100 records the group has not read: "
            "partition 0 by 90, partition 1 by 10"
        ), r.text
        assert committed() == {0: 95, 1: 95}
        # --shift-by needs a committed offset in every chosen partition
        other = f"h-{t}"
        admin.alter_group_offsets(other, {tp0: 50}).raise_for_errors()
        r = k("rollback", "--group", other, t, "--shift-by", "-1")
        one_line_error(r, 1, "no committed offset on partition(s) 1", "--to")
        ok(k("rollback", "--group", other, t, "--shift-by", "-1", "--partition", "0", "--execute"))
        assert committed(other) == {0: 49}
    finally:
        admin.close()
