"""Consumer groups with real, unchanged clients against a real standalone gateway:
kafka-python, aiokafka and confluent-kafka members in one group; cooperative-sticky; static
membership."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.coordinator.gateway_support import Member, exact_cover, start_gateway, wait_for
from tests.support.gateway import StandaloneGateway

pytestmark = pytest.mark.slow
PARTITIONS = 12


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    g = start_gateway(tmp_path_factory.mktemp("groups") / "data")
    try:
        yield g
    finally:
        g.stop(timeout=20.0)


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, partitions, 1)])
    fs[name].result(30)


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        }
    finally:
        c.close()


def all_consumed(members: list[Member], ends: dict[int, int]) -> bool:
    got: set[tuple[int, int]] = set()
    for m in members:
        got |= m.consumed()
    return all((p, o) in got for p, end in ends.items() for o in range(end))


def test_mixed_clients_join_leave_and_crash_without_losing_messages(gw: StandaloneGateway) -> None:
    topic, group = "mixed-t", "mixed-g"
    create_topic(gw.bootstrap, topic)
    produce(gw.bootstrap, topic, 240)
    members: list[Member] = []
    try:
        for client in ("kafka-python", "aiokafka", "confluent"):
            members.append(Member(client, gw.bootstrap, topic, group))
            live = list(members)
            wait_for(lambda live=live: exact_cover(live, PARTITIONS), 60, f"cover after {client} joined")
        produce(gw.bootstrap, topic, 120, 240)
        # SIGKILL the aiokafka member mid-consumption: the others take over its partitions
        # after its session times out.
        crashed = members[1]
        crashed.kill()
        survivors = [members[0], members[2]]
        wait_for(lambda: exact_cover(survivors, PARTITIONS), 60, "cover after the crash")
        produce(gw.bootstrap, topic, 120, 360)
        # The kafka-python member leaves cleanly: the confluent one ends up with everything.
        members[0].terminate()
        wait_for(lambda: exact_cover([members[2]], PARTITIONS), 60, "cover after the leave")
        produce(gw.bootstrap, topic, 60, 480)
        ends = end_offsets(gw.bootstrap, topic)
        assert sum(ends.values()) == 540
        # Commits after processing: every message was processed by some member (none lost).
        wait_for(lambda: all_consumed(members, ends), 60, "every message consumed")
    finally:
        for m in members:
            m.kill()


def test_cooperative_sticky_rebalances_incrementally(gw: StandaloneGateway) -> None:
    topic, group = "coop-t", "coop-g"
    create_topic(gw.bootstrap, topic)
    # A session of 20 s: a member the machine stalls past a short one is lost, and gives up
    # everything (an expiry, not the incremental rebalance this checks).
    args = ("--strategy", "cooperative-sticky", "--session-ms", "20000")
    a = Member("confluent", gw.bootstrap, topic, group, *args)
    b: Member | None = None
    try:
        wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "first member owns everything")
        b = Member("confluent", gw.bootstrap, topic, group, *args)
        second = b
        # Both own some: after the first cooperative round b's assignment is empty while a's
        # last one still lists everything, which covers the topic too.
        wait_for(lambda: exact_cover([a, second], PARTITIONS) and bool(a.assignment) and bool(second.assignment),
                 60, "two members cover the topic")
        revokes = [line for line in a.snapshot() if line.startswith("REVOKE")]
        # Incremental: a gave up only what moved to b, never its whole assignment.
        revoked = {int(p) for line in revokes for p in line[len("REVOKE") :].strip().split(",") if p}
        assert revoked == second.assignment
        assert a.assignment and len(a.assignment) == PARTITIONS - len(revoked)
        assigns = [line for line in a.snapshot() if line.startswith("ASSIGN")]
        assert all(line != "ASSIGN " for line in assigns), "a member was left with nothing mid-rebalance"
    finally:
        a.kill()
        if b is not None:
            b.kill()


def test_static_member_restart_without_rebalance(gw: StandaloneGateway) -> None:
    topic, group = "static-t", "static-g"
    create_topic(gw.bootstrap, topic)
    extra = ("--session-ms", "20000")
    a = Member("confluent", gw.bootstrap, topic, group, "--instance", "inst-a", *extra)
    b = Member("confluent", gw.bootstrap, topic, group, "--instance", "inst-b", *extra)
    restarted: Member | None = None
    try:
        wait_for(lambda: exact_cover([a, b], PARTITIONS), 60, "static group stable")
        # Settled: b heartbeats again (a reply answered before the next is sent) and is steady.
        beats = b.heartbeats()
        wait_for(lambda: b.heartbeats() >= beats + 2 and b.stats().get("join_state") == "steady", 60, "b steady")
        before_b, rebalances_b = b.assign_count(), b.stats()["rebalances"]
        owned_a = a.assignment
        a.kill()  # crash; a static member's session outlives it, nobody rebalances
        restarted = Member("confluent", gw.bootstrap, topic, group, "--instance", "inst-a", *extra)
        r = restarted
        wait_for(lambda: r.assignment is not None, 60, "restarted member assigned")
        assert r.assignment == owned_a
        # A rebalance would reach b in a heartbeat reply: wait until b had two more answered.
        beats = b.heartbeats()
        wait_for(lambda: b.heartbeats() >= beats + 2, 60, "b heartbeats after the restart")
        assert b.stats()["join_state"] == "steady" and b.stats()["rebalances"] == rebalances_b
        assert b.assign_count() == before_b, "the other member went through a rebalance"
        assert describe_member_count(gw.bootstrap, group) == 2
    finally:
        for m in (a, b, restarted):
            if m is not None:
                m.kill()


def describe_member_count(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc: Any = admin.describe_consumer_groups([group])[group].result(30)
    return len(desc.members)
