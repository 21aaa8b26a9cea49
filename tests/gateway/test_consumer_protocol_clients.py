"""The consumer group protocol (KIP-848) with an unchanged librdkafka (confluent-kafka) set to
group.protocol=consumer against a real standalone gateway: members join and leave with no record
consumed twice (commits after processing, revocation before reassignment), and a gateway
restart rebuilds the group from `__consumer_offsets` (same epochs and members, no new group)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_wire.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kafka_wire.messages.find_coordinator import FindCoordinatorRequest
from quire.admin import main as admin_main
from tests.coordinator.gateway_support import Member, exact_cover, start_gateway, wait_for
from tests.gateway.test_groups_clients import PARTITIONS, all_consumed, create_topic, end_offsets, produce
from tests.support.gateway import RawKafka, StandaloneGateway

pytestmark = pytest.mark.slow
ARGS = ("--protocol", "consumer")


@pytest.fixture
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    g = start_gateway(tmp_path_factory.mktemp("kip848") / "data")
    try:
        yield g
    finally:
        g.stop(timeout=20.0)


def describe(bootstrap: str, group: str) -> ConsumerGroupDescribeResponse.DescribedGroup:
    with RawKafka(bootstrap) as k:
        fc = k.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
        assert fc.coordinators[0].error_code == 0  # type: ignore[attr-defined]
        resp = k.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    assert isinstance(resp, ConsumerGroupDescribeResponse)
    return resp.groups[0]


def _admin_describe(gw: StandaloneGateway, capsys: pytest.CaptureFixture[str], group: str) -> Any:
    capsys.readouterr()
    assert admin_main(["--data-dir", str(gw.data_dir), "--json", "groups", "describe", group]) == 0
    return json.loads(capsys.readouterr().out)


def consumed_twice(members: list[Member]) -> list[tuple[int, int]]:
    seen: Counter[tuple[int, int]] = Counter()
    for m in members:
        for line in m.snapshot():
            if line.startswith("MSG "):
                _, p, o = line.split()
                seen[(int(p), int(o))] += 1
    return [k for k, n in seen.items() if n > 1]


def test_members_join_and_leave_without_duplicates(gw: StandaloneGateway) -> None:
    topic, group = "kip848-t", "kip848-g"
    create_topic(gw.bootstrap, topic)
    produce(gw.bootstrap, topic, 120)
    members: list[Member] = []
    try:
        for n in range(3):
            members.append(Member("confluent", gw.bootstrap, topic, group, *ARGS))
            live = list(members)
            wait_for(lambda live=live: exact_cover(live, PARTITIONS) and all(m.assignment for m in live),
                     60, f"cover after member {n} joined")
            produce(gw.bootstrap, topic, 60, 120 + 60 * n)
        d = describe(gw.bootstrap, group)
        assert d.error_code == 0 and d.group_state == "Stable" and len(d.members) == 3
        # A new group starts at epoch 1; each join moves it on.
        assert d.assignor_name == "uniform" and d.group_epoch == d.assignment_epoch == 4
        assert all(m.member_epoch == 4 and m.member_type == 1 for m in d.members)
        assert sorted(len(m.assignment.topic_partitions[0].partitions) for m in d.members) == [4, 4, 4]
        members[0].terminate()  # a clean leave: ConsumerGroupHeartbeat with epoch -1
        rest = members[1:]
        wait_for(lambda: exact_cover(rest, PARTITIONS), 60, "cover after the leave")
        produce(gw.bootstrap, topic, 60, 300)
        ends = end_offsets(gw.bootstrap, topic)
        assert sum(ends.values()) == 360
        wait_for(lambda: all_consumed(members, ends), 60, "every message consumed")
        assert consumed_twice(members) == []
        d = describe(gw.bootstrap, group)
        assert len(d.members) == 2 and d.group_epoch == 5
    finally:
        for m in members:
            m.kill()


def test_gateway_restart_rebuilds_the_group_from_its_log(
    gw: StandaloneGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = "kip848-r", "kip848-rg"
    create_topic(gw.bootstrap, topic)
    members = [Member("confluent", gw.bootstrap, topic, group, *ARGS) for _ in range(2)]
    try:
        wait_for(lambda: exact_cover(members, PARTITIONS) and all(m.assignment for m in members), 60,
                 "two members cover the topic")
        produce(gw.bootstrap, topic, 120)
        ends = end_offsets(gw.bootstrap, topic)
        wait_for(lambda: all_consumed(members, ends), 60, "every message consumed")
        before = describe(gw.bootstrap, group)
        assert before.group_state == "Stable"
        gw.stop(timeout=20.0)
        gw.start()
        after = describe(gw.bootstrap, group)
        # Rebuilt from the log: the same epochs and members (a new group would start at epoch 1).
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
        produce(gw.bootstrap, topic, 120, 120)
        ends = end_offsets(gw.bootstrap, topic)
        wait_for(lambda: all_consumed(members, ends), 90, "every message consumed after the restart")
        assert consumed_twice(members) == []
        final = describe(gw.bootstrap, group)
        assert sorted(m.member_id for m in final.members) == sorted(m.member_id for m in before.members)
        # `quire admin` reads the same records from the group's log without owning it.
        wait_for(lambda: _admin_describe(gw, capsys, group)["generation"] == final.group_epoch, 30,
                 "the admin view of the stored group")
        doc = _admin_describe(gw, capsys, group)
        assert (doc["protocol_type"], doc["state"], doc["member_count"]) == ("consumer", "Stable", 2)
        held = sorted(p for m in doc["members"] for a in m["assignment"] for p in a["partitions"])
        assert held == list(range(PARTITIONS))
    finally:
        for m in members:
            m.kill()


def assigned_topics(d: ConsumerGroupDescribeResponse.DescribedGroup) -> dict[str, int]:
    return {t.topic_name: len(t.partitions) for m in d.members for t in m.assignment.topic_partitions}


def test_regex_subscription_follows_new_topics_and_a_crash_is_fenced(gw: StandaloneGateway) -> None:
    group = "kip848-rx"
    for name, n in (("rx-a", 2), ("rx-b", 3), ("other", 2)):
        create_topic(gw.bootstrap, name, partitions=n)
    # librdkafka sends a "^" subscription as the SubscribedTopicRegex, matched by the gateway.
    a = Member("confluent", gw.bootstrap, "^rx-.*", group, *ARGS)
    b: Member | None = None
    try:
        wait_for(lambda: assigned_topics(describe(gw.bootstrap, group)) == {"rx-a": 2, "rx-b": 3}, 60,
                 "the regex's topics assigned")
        d = describe(gw.bootstrap, group)
        assert [m.subscribed_topic_regex for m in d.members] == ["(^rx-.*)"]  # librdkafka's joined form
        create_topic(gw.bootstrap, "rx-c", partitions=1)
        wait_for(lambda: assigned_topics(describe(gw.bootstrap, group)).get("rx-c") == 1, 60,
                 "a new matching topic assigned")
        b = Member("confluent", gw.bootstrap, "^rx-.*", group, *ARGS)
        wait_for(lambda: len(describe(gw.bootstrap, group).members) == 2
                 and describe(gw.bootstrap, group).group_state == "Stable", 60, "two stable members")
        a.kill()  # a crash: no leave; the session timeout (6 s here) fences it
        survivor = b
        wait_for(lambda: [m.member_id for m in describe(gw.bootstrap, group).members] != []
                 and len(describe(gw.bootstrap, group).members) == 1
                 and assigned_topics(describe(gw.bootstrap, group)) == {"rx-a": 2, "rx-b": 3, "rx-c": 1},
                 60, "the crashed member fenced and its partitions moved")
        assert survivor.alive
    finally:
        a.kill()
        if b is not None:
            b.kill()


def test_online_upgrade_and_downgrade_with_classic_members(gw: StandaloneGateway) -> None:
    """A classic cooperative-sticky member's group is upgraded when a consumer-protocol member
    joins, shares the partitions with it, and is downgraded when that member leaves; no record
    is consumed twice and none is lost."""
    topic, group = "kip848-mix", "kip848-mixg"
    create_topic(gw.bootstrap, topic)
    produce(gw.bootstrap, topic, 120)
    classic = Member("confluent", gw.bootstrap, topic, group, "--strategy", "cooperative-sticky")
    members = [classic]
    try:
        wait_for(lambda: classic.assignment == set(range(PARTITIONS)), 60, "the classic member owns everything")
        d = describe(gw.bootstrap, group)
        assert d.error_code == 69  # GROUP_ID_NOT_FOUND: a classic group
        modern = Member("confluent", gw.bootstrap, topic, group, *ARGS)
        members.append(modern)
        wait_for(lambda: exact_cover(members, PARTITIONS) and all(m.assignment for m in members), 60,
                 "classic and consumer-protocol members share the topic")
        d = describe(gw.bootstrap, group)
        assert d.error_code == 0 and sorted(m.member_type for m in d.members) == [0, 1]
        produce(gw.bootstrap, topic, 120, 120)
        modern.terminate()  # the last consumer-protocol member leaves: back to a classic group
        wait_for(lambda: classic.assignment == set(range(PARTITIONS)) and describe(gw.bootstrap, group).error_code == 69,
                 60, "the classic member owns everything again in a classic group")
        produce(gw.bootstrap, topic, 60, 240)
        ends = end_offsets(gw.bootstrap, topic)
        wait_for(lambda: all_consumed(members, ends), 60, "every message consumed")
        assert consumed_twice(members) == []
    finally:
        for m in members:
            m.kill()
