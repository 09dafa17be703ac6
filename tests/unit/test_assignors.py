"""Consumer-group assignors: completeness, balance, stickiness, cooperative safety."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpax.consumer.assignors import (
    Assignor,
    CooperativeStickyAssignor,
    MemberAssignment,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    get_assignor,
)
from kpax.consumer.assignors.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kpax.consumer.assignors.sticky_core import sticky_assign
from kpax.consumer.assignors.userdata import (
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_generation,
    encode_sticky_user_data,
)
from kpax.proto.errors import ProtocolError
from kpax.structs import TopicPartition as TP

ALL: list[Assignor] = [
    RangeAssignor(),
    RoundRobinAssignor(),
    StickyAssignor(),
    CooperativeStickyAssignor(),
]
BALANCED = [a for a in ALL if a.name != "range"]
STICKY: list[Assignor] = [StickyAssignor(), CooperativeStickyAssignor()]

TOPICS = ["a", "b", "c", "d\u00e9", "\U0001f600"]


def subs(**topics: list[str]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(list(t)) for m, t in topics.items()}


def parts(result: Mapping[str, MemberAssignment]) -> dict[str, list[TP]]:
    return {m: sorted(a.partitions) for m, a in result.items()}


def expected_partitions(
    counts: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> set[TP]:
    topics = {t for s in subscriptions.values() for t in s.topics}
    return {TP(t, p) for t in topics for p in range(counts.get(t, 0))}


def check_valid(
    counts: Mapping[str, int],
    subscriptions: Mapping[str, MemberSubscription],
    result: Mapping[str, MemberAssignment],
    complete: bool = True,
) -> Counter[TP]:
    assert set(result) == set(subscriptions)
    seen: Counter[TP] = Counter()
    for m, a in result.items():
        for tp in a.partitions:
            assert tp.topic in subscriptions[m].topics, (m, tp)
            seen[tp] += 1
    assert all(n == 1 for n in seen.values()), seen
    if complete:
        assert set(seen) == expected_partitions(counts, subscriptions)
    else:
        assert set(seen) <= expected_partitions(counts, subscriptions)
    return seen


def with_owned(
    subscriptions: Mapping[str, MemberSubscription],
    prev: Mapping[str, MemberAssignment],
    generation: int,
    assignor: Assignor,
) -> dict[str, MemberSubscription]:
    """Subscriptions of the next rebalance, as members that got *prev* would send them."""
    out = {}
    for m, s in subscriptions.items():
        owned = list(prev[m].partitions) if m in prev else []
        gen = generation if m in prev else -1
        out[m] = MemberSubscription(
            s.topics,
            assignor.subscription_user_data(owned, gen) if m in prev else None,
            owned,
            gen,
            group_instance_id=s.group_instance_id,
        )
    return out


# ---- strategies -----------------------------------------------------------------

member_ids = st.lists(
    st.text(alphabet="abcxyz\u00e9\U0001f600-", min_size=1, max_size=6),
    min_size=1,
    max_size=7,
    unique=True,
)
counts_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 13), min_size=1)


@st.composite
def group(
    draw: st.DrawFn, same_topics: bool = False
) -> tuple[dict[str, int], dict[str, MemberSubscription]]:
    counts = draw(counts_st)
    known = sorted(counts)
    ids = draw(member_ids)
    shared = draw(st.lists(st.sampled_from([*known, "missing"]), min_size=1, unique=True))
    out = {}
    for m in ids:
        topics = (
            shared
            if same_topics
            else draw(st.lists(st.sampled_from([*known, "missing"]), unique=True))
        )
        instance = draw(st.none() | st.sampled_from(["i1", "i2", "i3"]))
        out[m] = MemberSubscription(list(topics), group_instance_id=instance)
    return counts, out


# ---- properties -----------------------------------------------------------------


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
@given(g=group())
@settings(max_examples=150, deadline=None)
def test_every_partition_assigned_once_to_a_subscriber(
    assignor: Assignor, g: tuple[dict[str, int], dict[str, MemberSubscription]]
) -> None:
    counts, subscriptions = g
    check_valid(counts, subscriptions, assignor.assign(counts, subscriptions))


@pytest.mark.parametrize("assignor", BALANCED, ids=lambda a: a.name)
@given(g=group(same_topics=True))
@settings(max_examples=150, deadline=None)
def test_counts_differ_by_at_most_one_with_equal_subscriptions(
    assignor: Assignor, g: tuple[dict[str, int], dict[str, MemberSubscription]]
) -> None:
    counts, subscriptions = g
    sizes = [len(a.partitions) for a in assignor.assign(counts, subscriptions).values()]
    assert max(sizes) - min(sizes) <= 1


@given(g=group(same_topics=True))
@settings(max_examples=100, deadline=None)
def test_range_balances_each_topic(g: tuple[dict[str, int], dict[str, MemberSubscription]]) -> None:
    counts, subscriptions = g
    result = RangeAssignor().assign(counts, subscriptions)
    for topic in subscriptions[next(iter(subscriptions))].topics:
        sizes = [sum(tp.topic == topic for tp in a.partitions) for a in result.values()]
        assert max(sizes) - min(sizes) <= 1
        for a in result.values():  # contiguous ranges
            ps = sorted(tp.partition for tp in a.partitions if tp.topic == topic)
            assert ps == list(range(ps[0], ps[0] + len(ps))) if ps else True


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
@given(g=group())
@settings(max_examples=150, deadline=None)
def test_sticky_no_move_or_chain_of_moves_reaches_a_member_two_below(
    assignor: Assignor, g: tuple[dict[str, int], dict[str, MemberSubscription]]
) -> None:
    counts, subscriptions = g
    result = assignor.assign(counts, subscriptions)
    size = {m: len(a.partitions) for m, a in result.items()}
    # Nor through a chain of moves (each member hands one partition to the next).
    can_give = {
        m: {o for o, s in subscriptions.items() for tp in a.partitions if tp.topic in s.topics}
        for m, a in result.items()
    }
    for m in result:
        reached, todo = {m}, [m]
        while todo:
            for o in can_give[todo.pop()] - reached:
                reached.add(o)
                todo.append(o)
        assert all(size[o] >= size[m] - 1 for o in reached), (m, size)


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
@given(g=group())
@settings(max_examples=100, deadline=None)
def test_sticky_keeps_everything_when_membership_is_unchanged(
    assignor: Assignor, g: tuple[dict[str, int], dict[str, MemberSubscription]]
) -> None:
    counts, subscriptions = g
    first = assignor.assign(counts, subscriptions)
    again = assignor.assign(counts, with_owned(subscriptions, first, 1, assignor))
    assert parts(again) == parts(first)


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
@given(g=group(same_topics=True), data=st.data())
@settings(max_examples=150, deadline=None)
def test_sticky_moves_the_minimum_when_members_join_and_leave(
    assignor: Assignor,
    g: tuple[dict[str, int], dict[str, MemberSubscription]],
    data: st.DataObject,
) -> None:
    counts, subscriptions = g
    first = assignor.assign(counts, subscriptions)
    ids = list(subscriptions)
    leaving = data.draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids) - 1))
    joining = data.draw(st.lists(st.sampled_from(["new1", "new2", "new3"]), unique=True))
    topics = subscriptions[ids[0]].topics
    now = {m: s for m, s in subscriptions.items() if m not in leaving}
    now.update({m: MemberSubscription(list(topics)) for m in joining if m not in now})
    nxt = with_owned(now, first, 3, assignor)
    result = assignor.assign(counts, nxt)
    if assignor.name == "cooperative-sticky":
        # Partitions moving between two members are revoked first, then assigned.
        check_valid(counts, nxt, result, complete=False)
        result = assignor.assign(counts, with_owned(now, result, 4, assignor))
    check_valid(counts, nxt, result)
    total = len(expected_partitions(counts, now))
    min_quota, extra = divmod(total, len(now))
    prev = [len(first[m].partitions) for m in now if m in first]
    best_kept = sum(min(n, min_quota) for n in prev) + min(extra, sum(n > min_quota for n in prev))
    kept = sum(len(set(first[m].partitions) & set(result[m].partitions)) for m in now if m in first)
    assert kept == best_kept


@given(g=group(), data=st.data())
@settings(max_examples=200, deadline=None)
def test_cooperative_never_gives_a_partition_still_owned_by_another_member(
    g: tuple[dict[str, int], dict[str, MemberSubscription]], data: st.DataObject
) -> None:
    counts, subscriptions = g
    coop = CooperativeStickyAssignor()
    first = coop.assign(counts, subscriptions)
    # Membership and subscriptions change; the old owners still hold their partitions.
    ids = list(subscriptions)
    leaving = set(data.draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids) - 1)))
    known = sorted(counts)
    now = {}
    for m, s in subscriptions.items():
        if m not in leaving:
            change = data.draw(st.booleans())
            topics = (
                data.draw(st.lists(st.sampled_from(known), unique=True)) if change else s.topics
            )
            now[m] = MemberSubscription(list(topics))
    for m in data.draw(st.lists(st.sampled_from(["new1", "new2"]), unique=True)):
        now.setdefault(
            m, MemberSubscription(data.draw(st.lists(st.sampled_from(known), unique=True)))
        )
    round1 = with_owned(now, first, 1, coop)
    result = coop.assign(counts, round1)
    check_valid(counts, round1, result, complete=False)
    for m, a in result.items():
        for tp in a.partitions:
            others = [o for o, s in round1.items() if o != m and tp in s.owned_partitions]
            assert not others, (tp, m, others)
    # The follow-up rebalance (the members revoked what they lost) completes it,
    # without taking anything away from anyone.
    round2 = with_owned(now, result, 2, coop)
    final = coop.assign(counts, round2)
    check_valid(counts, round2, final)
    for m, a in result.items():
        assert set(a.partitions) <= set(final[m].partitions)


@given(g=group(), data=st.data())
@settings(max_examples=150, deadline=None)
def test_sticky_core_keeps_any_part_of_a_balanced_assignment(
    g: tuple[dict[str, int], dict[str, MemberSubscription]], data: st.DataObject
) -> None:
    # What the cooperative follow-up round relies on: when members own part of
    # a balanced assignment, a balanced result keeping all of it exists, so
    # none of it may be taken away (whatever else moves).
    counts, subscriptions = g
    topics_of = {m: set(s.topics) for m, s in subscriptions.items()}
    # A balanced assignment: sticky to a random earlier one, so it varies.
    earlier: dict[str, list[TP]] = {m: [] for m in topics_of}
    for tp in sorted(expected_partitions(counts, subscriptions)):
        owners = [m for m, ts in topics_of.items() if tp.topic in ts]
        owner = data.draw(st.sampled_from([None, *owners]))
        if owner is not None:
            earlier[owner].append(tp)
    target = sticky_assign(counts, topics_of, earlier)
    owned = {m: [tp for tp in ps if data.draw(st.booleans())] for m, ps in target.items()}
    again = sticky_assign(counts, topics_of, owned)
    for m, ps in owned.items():
        assert set(ps) <= set(again[m]), (m, ps, again[m])
    assert sorted(map(len, again.values())) == sorted(map(len, target.values()))


# ---- fixed cases ----------------------------------------------------------------


def test_range_and_roundrobin_java_examples() -> None:
    counts = {"t1": 3, "t2": 3}
    s = subs(c1=["t1", "t2"], c2=["t1", "t2"])
    assert parts(RangeAssignor().assign(counts, s)) == {
        "c1": [TP("t1", 0), TP("t1", 1), TP("t2", 0), TP("t2", 1)],
        "c2": [TP("t1", 2), TP("t2", 2)],
    }
    assert parts(RoundRobinAssignor().assign(counts, s)) == {
        "c1": [TP("t1", 0), TP("t1", 2), TP("t2", 1)],
        "c2": [TP("t1", 1), TP("t2", 0), TP("t2", 2)],
    }
    # Members not subscribed to a topic are skipped; a member with nothing gets [].
    s = subs(c0=["t1"], c1=["t1", "t2"], c2=["t1"], c3=["gone"])
    assert parts(RoundRobinAssignor().assign(counts, s)) == {
        "c0": [TP("t1", 0)],
        "c1": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)],
        "c2": [TP("t1", 2)],
        "c3": [],
    }


def test_static_members_sort_first_by_instance_id() -> None:
    s = {
        "a": MemberSubscription(["t"]),
        "b": MemberSubscription(["t"], group_instance_id="z"),
        "c": MemberSubscription(["t"], group_instance_id="y"),
    }
    assert parts(RangeAssignor().assign({"t": 3}, s)) == {
        "c": [TP("t", 0)],
        "b": [TP("t", 1)],
        "a": [TP("t", 2)],
    }


def test_member_ids_compare_as_java_strings() -> None:
    # U+FF5E sorts after U+1F600 in code points but before it in UTF-16 (Java's order).
    s = subs(**{"\U0001f600": ["t"], "\uff5e": ["t"]})
    assert parts(RangeAssignor().assign({"t": 2}, s)) == {
        "\uff5e": [TP("t", 1)],
        "\U0001f600": [TP("t", 0)],
    }


def test_sticky_higher_generation_wins_and_ties_are_dropped() -> None:
    sticky = StickyAssignor()
    s = {
        "a": MemberSubscription(["t"], encode_sticky_user_data([TP("t", 0), TP("t", 1)], 4)),
        "b": MemberSubscription(["t"], encode_sticky_user_data([TP("t", 0)], 5)),
        "c": MemberSubscription(["t"], None, [TP("t", 1), TP("t", 2)], 4),
    }
    result = parts(sticky.assign({"t": 3}, s))
    assert result["b"] == [TP("t", 0)]  # gen 5 beats gen 4
    assert result["c"] == [TP("t", 2)] or result["c"] == [TP("t", 1)]
    assert sorted(tp for p in result.values() for tp in p) == [TP("t", i) for i in range(3)]


def test_cooperative_revokes_before_moving() -> None:
    coop = CooperativeStickyAssignor()
    s = {
        "a": MemberSubscription(["t"], None, [TP("t", i) for i in range(4)], 7),
        "b": MemberSubscription(["t"]),
    }
    r1 = parts(coop.assign({"t": 4}, s))
    assert len(r1["a"]) == 2 and r1["b"] == []  # two partitions are being revoked from a
    s2 = {
        "a": MemberSubscription(["t"], None, r1["a"], 8),
        "b": MemberSubscription(["t"], None, [], 8),
    }
    r2 = parts(coop.assign({"t": 4}, s2))
    assert r2["a"] == r1["a"] and len(r2["b"]) == 2


def test_cooperative_follow_up_keeps_what_round_one_kept() -> None:
    # Hypothesis find: the follow-up round balanced by moving an owned partition
    # (dé-0 from a-) along a chain instead of the free c-0, so dé-0 was withheld
    # as "still owned by a-" and left unassigned.
    coop = CooperativeStickyAssignor()
    counts = {"a": 0, "b": 1, "c": 1, "d\u00e9": 1}
    before = subs(
        a=[], b=["b"], **{"a-": ["a", "c", "d\u00e9"], "-": []}, aa=[], ba=["a", "b"], aaa=[]
    )
    first = parts(coop.assign(counts, before))
    assert first["b"] == [TP("b", 0)] and first["a-"] == [TP("c", 0), TP("d\u00e9", 0)]
    # a and - leave, b subscribes to every topic.
    now = subs(
        b=["a", "b", "c", "d\u00e9"], **{"a-": ["a", "c", "d\u00e9"]}, aa=[], ba=["a", "b"], aaa=[]
    )
    round1 = with_owned(now, coop.assign(counts, before), 1, coop)
    result = coop.assign(counts, round1)
    check_valid(counts, round1, result, complete=False)
    # b-0 moves b -> ba and c-0 moves a- -> b: both are revoked first.
    assert parts(result)["a-"] == [TP("d\u00e9", 0)]
    assert sum(map(len, parts(result).values())) == 1
    round2 = with_owned(now, result, 2, coop)
    final = coop.assign(counts, round2)
    check_valid(counts, round2, final)
    assert parts(final) == {
        "b": [TP("c", 0)],
        "a-": [TP("d\u00e9", 0)],
        "ba": [TP("b", 0)],
        "aa": [],
        "aaa": [],
    }


def test_cooperative_generation_from_user_data_for_v1_subscriptions() -> None:
    coop = CooperativeStickyAssignor()
    s = {
        "old": MemberSubscription(["t"], encode_cooperative_generation(3), [TP("t", 0)]),
        "new": MemberSubscription(["t"], encode_cooperative_generation(4), [TP("t", 0)]),
    }
    assert parts(coop.assign({"t": 2}, s))["new"] == [TP("t", 0)]


def test_sticky_user_data_layout_matches_java_schema() -> None:
    data = encode_sticky_user_data([TP("t", 0), TP("t", 2), TP("u", 1)], 9)
    assert data == (
        b"\x00\x00\x00\x02"
        + b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02"
        + b"\x00\x01u\x00\x00\x00\x01\x00\x00\x00\x01"
        + b"\x00\x00\x00\x09"
    )
    assert decode_sticky_user_data(data) == ([TP("t", 0), TP("t", 2), TP("u", 1)], 9)
    assert decode_sticky_user_data(data[:-4]) == ([TP("t", 0), TP("t", 2), TP("u", 1)], None)
    for bad in (b"", b"\x00\x00\x00\x05", data[:-2], b"\xff\xff\xff\xff", data + b"\x00"):
        assert decode_sticky_user_data(bad) is None
    assert decode_cooperative_generation(encode_cooperative_generation(-1)) == -1
    assert decode_cooperative_generation(b"\x00") is None


def test_garbage_user_data_means_no_previous_assignment() -> None:
    s = {"a": MemberSubscription(["t"], b"\x01\x02"), "b": MemberSubscription(["t"])}
    check_valid({"t": 4}, s, StickyAssignor().assign({"t": 4}, s))


def test_get_assignor_by_name_and_java_class() -> None:
    assert isinstance(get_assignor("range"), RangeAssignor)
    assert isinstance(
        get_assignor("org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
        CooperativeStickyAssignor,
    )
    custom = RoundRobinAssignor()
    assert get_assignor(custom) is custom
    with pytest.raises(ValueError, match="unknown partition assignor 'rnage'"):
        get_assignor("rnage")
    for a in ALL:
        assert isinstance(a, Assignor)
        assert "eager" in a.rebalance_protocols
    assert CooperativeStickyAssignor().rebalance_protocols == ("eager", "cooperative")
    assert RangeAssignor().subscription_user_data([TP("t", 0)], 3) is None


# ---- embedded consumer protocol bytes ---------------------------------------------


def test_subscription_round_trip_per_version() -> None:
    sub = MemberSubscription(
        ["b", "a"], b"ud", [TP("b", 1), TP("a", 2), TP("a", 0)], generation_id=5, rack_id="r1"
    )
    for version, expect in [
        (0, MemberSubscription(["a", "b"], b"ud")),
        (1, MemberSubscription(["a", "b"], b"ud", [TP("a", 0), TP("a", 2), TP("b", 1)])),
        (2, MemberSubscription(["a", "b"], b"ud", [TP("a", 0), TP("a", 2), TP("b", 1)], 5)),
        (3, MemberSubscription(["a", "b"], b"ud", [TP("a", 0), TP("a", 2), TP("b", 1)], 5, "r1")),
    ]:
        data = encode_subscription(sub, version)
        assert data[:2] == version.to_bytes(2, "big")
        assert decode_subscription(data) == expect
    v0 = encode_subscription(MemberSubscription(["t"]), 0)
    assert v0 == b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"


def test_assignment_round_trip_and_layout() -> None:
    a = MemberAssignment([TP("t", 2), TP("u", 0), TP("t", 0)], b"x")
    data = encode_assignment(a, 0)
    assert data == (
        b"\x00\x00\x00\x00\x00\x02"
        + b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x00"
        + b"\x00\x01u\x00\x00\x00\x01\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01x"
    )
    for v in range(4):
        assert decode_assignment(encode_assignment(a, v)) == MemberAssignment(
            [TP("t", 2), TP("t", 0), TP("u", 0)], b"x"
        )
    assert decode_assignment(b"") == MemberAssignment([])
    assert decode_assignment(encode_assignment(MemberAssignment([]))) == MemberAssignment([])


def test_newer_versions_are_read_with_the_newest_known_schema() -> None:
    body = encode_subscription(MemberSubscription(["t"], None, [TP("t", 0)], 7, "rack"), 3)[2:]
    future = b"\x00\x07" + body + b"\x00\x00\x00\x2a"  # v7 appends a field kpax doesn't know
    assert decode_subscription(future) == MemberSubscription(["t"], None, [TP("t", 0)], 7, "rack")
    body = encode_assignment(MemberAssignment([TP("t", 1)]), 3)[2:]
    assert decode_assignment(b"\x00\x09" + body + b"??") == MemberAssignment([TP("t", 1)])


def test_bad_consumer_protocol_bytes_raise_protocol_error() -> None:
    good = encode_subscription(MemberSubscription(["topic"], b"data", [TP("topic", 1)], 3), 3)
    for bad in (b"", b"\x00", b"\xff\xff" + good[2:], good[:-3], good[:7]):
        with pytest.raises(ProtocolError, match="ConsumerProtocolSubscription"):
            decode_subscription(bad)
    good = encode_assignment(MemberAssignment([TP("topic", 1)]), 1)
    for bad in (b"\x00", b"\x80\x00" + good[2:], good[:-1], good[:5]):
        with pytest.raises(ProtocolError, match="ConsumerProtocolAssignment"):
            decode_assignment(bad)
    with pytest.raises(ValueError, match=r"version must be 0\.\.3, got 4"):
        encode_subscription(MemberSubscription(["t"]), 4)
