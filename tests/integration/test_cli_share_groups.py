"""`kpax groups list|describe|delete|config` and `kpax offsets --group` on share
groups (KIP-932), against a real broker, the command as a subprocess.

The group's position: on a topic of 10 records, its start offset moved to 3
(alter_share_group_offsets), then `kpax consume --share-group G --count 2`
accepting records 3 and 4 and releasing the rest (lag 5); a live member is a
kpax.ShareConsumer subscribed to a second, empty topic, so that it reads
nothing and the numbers stay put. Share-group state is written
asynchronously by the broker: every check of it waits, with a deadline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import kpax
from kpax.admin import ConfigResource, ConfigResourceType
from kpax.testing.base import KafkaCluster
from tests.integration.share_helpers import new_topic, produce, share_group
from tests.integration.test_cli import Run, ok, one_line_error, run_kpax
from tests.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.kafka4, pytest.mark.timeout(180)]

MEMBER_CLIENT = "cli-share-member"


@pytest.fixture
def admin(kafka: KafkaCluster) -> Iterator[kpax.Admin]:
    with kpax.Admin(kafka.bootstrap) as a:
        yield a


@pytest.fixture
def k(kafka: KafkaCluster) -> Any:
    def call(*args: str) -> Run:
        return run_kpax(kafka.bootstrap, *args)

    return call


def _json(k: Any, *args: str) -> Any:
    return ok(k(*args, "-o", "json")).json()


@pytest.fixture
def positioned(kafka: KafkaCluster, admin: kpax.Admin, k: Any) -> tuple[str, str, int]:
    """(topic, share group, its start offset): 10 records, the group's start
    offset moved to 3, then records 3 and 4 accepted: lag 5 (the broker's
    count; the latest offset minus the start offset would be 7 or 5)."""
    topic = new_topic(admin, 1, prefix="cli-sg")
    group, _ = share_group(admin)
    produce(kafka.bootstrap, topic, [b"v%d" % i for i in range(10)], partition=0)
    tp = kpax.TopicPartition(topic, 0)
    admin.alter_share_group_offsets(group, {tp: 3}).raise_for_errors()
    got = ok(k("consume", topic, "-G", group, "--count", "2", "--format", "json")).lines()
    assert [r["offset"] for r in got] == [3, 4]

    def settled() -> int | None:
        o = admin.list_share_group_offsets(group).get(tp)
        return o.start_offset if o is not None and o.lag == 5 else None

    start = eventually(settled, timeout=30)
    assert start in (3, 5)  # (the broker advances it lazily, if at all)
    return topic, group, start


def test_live_share_group_listed_described_and_its_offsets(
    kafka: KafkaCluster, admin: kpax.Admin, k: Any, positioned: tuple[str, str, int]
) -> None:
    topic, group, start = positioned
    idle = new_topic(admin, 1, prefix="cli-sg-idle")
    # a classic group (offsets only) to describe alongside: it keeps its output
    classic = f"cg-{group}"
    admin.alter_group_offsets(classic, {kpax.TopicPartition(topic, 0): 7}).raise_for_errors()
    with kpax.ShareConsumer(kafka.bootstrap, group_id=group, client_id=MEMBER_CLIENT) as member:
        member.subscribe([idle])

        def joined() -> bool:
            member.poll(0.2)
            d = admin.describe_share_groups([group])[group]
            return d.state == "Stable" and any(m.assignment for m in d.members)

        eventually(joined, timeout=30)

        # groups list: the share group with its type, in the table and in JSON
        listed = {g["group"]: g for g in _json(k, "groups", "list")}
        assert listed[group]["type"] == "share" and listed[group]["state"] == "Stable"
        assert listed[classic]["type"] == "classic"
        rows = [ln.split() for ln in ok(k("groups", "list")).text.splitlines()]
        assert [group, "Stable", "share"] in rows and [classic, "Empty", "classic"] in rows

        # groups describe: both kinds in one call, each in its own shape
        cdoc, sdoc = _json(k, "groups", "describe", classic, group)
        assert cdoc["type"] == "classic" and cdoc["offsets"][0]["committed"] == 7
        assert "start_offset" not in cdoc["offsets"][0]
        assert sdoc["group"] == group and sdoc["type"] == "share"
        assert sdoc["state"] == "Stable" and sdoc["assignor"] == "simple"
        assert sdoc["group_epoch"] >= 1 and sdoc["assignment_epoch"] >= 1
        [m] = sdoc["members"]
        assert m["client_id"] == MEMBER_CLIENT and m["host"]
        assert m["subscribed_topics"] == [idle] and m["assignment"] == [f"{idle}-0"]
        offs = {(o["topic"], o["partition"]): o for o in sdoc["offsets"]}
        assert offs[(topic, 0)] == {
            "topic": topic,
            "partition": 0,
            "start_offset": start,
            "latest": 10,
            "lag": 5,
            "members": [],
        }
        assert offs[(idle, 0)]["members"] == [m["member_id"]]
        text = ok(k("groups", "describe", group)).text.splitlines()
        assert text[0].startswith(f"group {group}: share group (KIP-932), state Stable")
        assert "1 member(s)" in text[0]
        assert any(MEMBER_CLIENT in ln and f"{idle}-0" in ln for ln in text)
        assert "START_OFFSET" in next(ln for ln in text if "PARTITION" in ln and "LAG" in ln)
        assert [topic, "0", str(start), "10", "5"] in [ln.split() for ln in text]

        # offsets --group: the start offset and lag, not committed offsets
        doc = _json(k, "offsets", topic, "--group", group)
        assert doc["group"] == group and doc["group_type"] == "share"
        assert doc["total_lag"] == 5
        assert doc["partitions"] == [
            {
                "partition": 0,
                "earliest": 0,
                "latest": 10,
                "records": 10,
                "start_offset": start,
                "lag": 5,
            }
        ]
        text = ok(k("offsets", topic, "--group", group)).text.splitlines()
        assert text[0].split() == [
            "PARTITION",
            "EARLIEST",
            "LATEST",
            "RECORDS",
            "START_OFFSET",
            "LAG",
        ]
        assert text[1].split() == ["0", "0", "10", "10", str(start), "5"]
        assert text[-1] == f"share group {group!r}: total lag 5 (from its start offsets)"
        # a consumer group on the same topic still shows its committed offset
        doc = _json(k, "offsets", topic, "--group", classic)
        assert doc["partitions"][0]["committed"] == 7 and "group_type" not in doc

        # a live share group is not deleted, dry run or not
        for extra in ((), ("--execute",)):
            one_line_error(
                k("groups", "delete", group, *extra), 1, "share group", group, "1 active member"
            )
    assert admin.describe_share_groups([group])[group].group_id == group


def test_delete_an_empty_share_group(
    admin: kpax.Admin, k: Any, positioned: tuple[str, str, int]
) -> None:
    topic, group, _ = positioned
    plan = _json(k, "groups", "delete", group)
    assert plan["dry_run"] and not plan["executed"]
    assert plan["groups"] == [
        {"group": group, "type": "share", "state": "Empty", "offsets": 1, "topics": [topic]}
    ]
    # the dry run deleted nothing
    assert admin.describe_share_groups([group])[group].state == "Empty"
    assert group in [g["group"] for g in _json(k, "groups", "list")]

    r = ok(k("groups", "delete", group, "--execute"))
    assert r.text.startswith("deleted: 1 group(s)") and group in r.text
    assert group not in [g.group_id for g in admin.list_groups(types=["share"])]
    for args in (("groups", "describe", group), ("groups", "delete", group)):
        one_line_error(k(*args), 1, group, "not found")


def test_unknown_group_is_one_line(k: Any) -> None:
    for args in (
        ("groups", "describe", "no-such-group-x"),
        ("groups", "delete", "no-such-group-x"),
    ):
        one_line_error(k(*args), 1, "'no-such-group-x' not found", "share group")


def test_group_config_show_set_delete(admin: kpax.Admin, k: Any) -> None:
    group, _ = share_group(admin)  # share.auto.offset.reset=earliest, before any member

    def configs() -> dict[str, Any]:
        doc = _json(k, "groups", "config", group)
        assert doc["group"] == group
        return doc["configs"]  # type: ignore[no-any-return]

    c = configs()
    assert c["share.auto.offset.reset"] == {"value": "earliest", "source": "GROUP_CONFIG"}
    assert c["share.delivery.count.limit"]["source"] != "GROUP_CONFIG"
    row = next(
        ln.split()
        for ln in ok(k("groups", "config", group)).text.splitlines()
        if ln.startswith("share.auto.offset.reset ")
    )
    assert row == ["share.auto.offset.reset", "earliest", "GROUP_CONFIG"]

    r = ok(
        k(
            "groups",
            "config",
            group,
            "--set",
            "share.auto.offset.reset=latest",
            "--set",
            "share.delivery.count.limit=3",
        )
    )
    assert f"altered 2 config(s) of group {group!r}" in r.err and r.out == b""
    res = ConfigResource(ConfigResourceType.GROUP, group)
    eventually(
        lambda: admin.describe_configs([res])[res]["share.delivery.count.limit"].value == "3"
    )
    c = configs()
    assert c["share.auto.offset.reset"]["value"] == "latest"
    assert c["share.delivery.count.limit"] == {"value": "3", "source": "GROUP_CONFIG"}

    ok(k("groups", "config", group, "--delete", "share.delivery.count.limit"))
    eventually(
        lambda: configs()["share.delivery.count.limit"]["source"] == "DEFAULT_CONFIG", timeout=30
    )

    one_line_error(
        k("groups", "config", group, "--set", "share.auto.offset.reset=sometimes"),
        1,
        "share.auto.offset.reset",
    )
    one_line_error(k("groups", "config", group, "--set", "novalue"), 2, "--set", "key=value")
