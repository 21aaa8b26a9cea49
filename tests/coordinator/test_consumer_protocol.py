"""The consumer group protocol (KIP-848) of one shard: joins, epochs, revocation before
reassignment, leaves, static members, regex subscriptions, assignors, offsets with member epochs,
and the state rebuilt from the shard's log."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from coordinator.group.assignors import AssignorMember, TopicMeta, range_, uniform
from coordinator.group.config import GroupConfig
from coordinator.group.consumer import ConsumerHeartbeat, HeartbeatAnswer
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.group import OffsetAndMetadata
from kafka_wire.api import decode_versioned, encode_versioned
from kafka_wire.errors import ErrorCode
from tests.coordinator.helpers import FAST, make, req, stable_group
from tests.coordinator.shard_logs import MemoryShardLog
from tests.support.clock import FakeClock

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"t1": TopicMeta(T1, 4), "t2": TopicMeta(T2, 2)}


NOW = dataclasses.replace(FAST, consumer_assignment_interval_ms=0)  # targets computed at once


async def coordinator(log: MemoryShardLog, config: GroupConfig = NOW) -> GroupCoordinator:
    c = GroupCoordinator(0, log, config, topics=lambda: TOPICS)
    await c.load()
    return c


async def join(c: GroupCoordinator, mid: str, topics: list[str] | None = ("t1",), **kw: object) -> HeartbeatAnswer:  # type: ignore[assignment]
    kw.setdefault("rebalance_timeout_ms", 30000)
    hb = ConsumerHeartbeat("g", mid, 0, owned={},
                           subscribed_topic_names=None if topics is None else list(topics), **kw)  # type: ignore[arg-type]
    return await c.consumer_heartbeat(hb)


async def beat(c: GroupCoordinator, mid: str, epoch: int, owned: dict[uuid.UUID, set[int]] | None,
               **kw: object) -> HeartbeatAnswer:
    return await c.consumer_heartbeat(ConsumerHeartbeat("g", mid, epoch, owned=owned, **kw))  # type: ignore[arg-type]


def owned(a: HeartbeatAnswer) -> dict[uuid.UUID, set[int]]:
    assert a.assignment is not None
    return {t: set(p) for t, p in a.assignment.items()}


async def test_first_member_gets_everything_then_revokes_before_the_second_is_given_any() -> None:
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a")
    # A new group starts at epoch 1 (Kafka 4.3+); the first member's join moves it to 2.
    assert (a.error, a.member_epoch) == (0, 2) and owned(a) == {T1: {0, 1, 2, 3}}
    b = await join(c, "b")
    # The group moves to epoch 3; b may not take partitions a still owns.
    assert (b.error, b.member_epoch) == (0, 3) and owned(b) == {}
    cg = c.groups["g"].consumer
    assert cg is not None and cg.state.value == "Reconciling"
    a2 = await beat(c, "a", 2, owned(a))
    # a is asked to give up two partitions and stays at epoch 2 until it does.
    assert a2.member_epoch == 2 and len(owned(a2)[T1]) == 2
    b2 = await beat(c, "b", 3, {})
    assert b2.assignment is None and b2.member_epoch == 3  # still held by a
    a3 = await beat(c, "a", 2, owned(a2))
    assert a3.member_epoch == 3
    b3 = await beat(c, "b", 3, {})
    assert owned(b3)[T1] == {0, 1, 2, 3} - owned(a2)[T1]
    assert cg.state.value == "Stable" and cg.group_epoch == cg.assignment_epoch == 3


async def test_targets_wait_for_the_assignment_interval() -> None:
    c = await coordinator(MemoryShardLog(), dataclasses.replace(FAST, consumer_assignment_interval_ms=60000))
    a = await join(c, "a")
    assert a.member_epoch == 2 and owned(a) == {T1: {0, 1, 2, 3}}
    b = await join(c, "b")
    # Within the interval the group stays Assigning: b waits at the old target epoch.
    assert (b.error, b.member_epoch, owned(b)) == (0, 2, {})
    cg = c.groups["g"].consumer
    assert cg is not None and (cg.group_epoch, cg.assignment_epoch, cg.state.value) == (3, 2, "Assigning")
    c.unload()


async def test_epoch_errors_leave_and_unknown_members() -> None:
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a")
    assert (await beat(c, "a", 5, None)).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert (await beat(c, "zz", 1, None)).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await beat(c, "a", a.member_epoch, owned(a))).error == 0
    bad = await c.consumer_heartbeat(ConsumerHeartbeat("g", "", 0, rebalance_timeout_ms=1, owned={},
                                                       subscribed_topic_names=["t1"]))
    assert (bad.error, bad.message) == (ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    bad = await join(c, "x", server_assignor="sticky")
    assert bad.error == ErrorCode.UNSUPPORTED_ASSIGNOR
    left = await beat(c, "a", -1, None)
    assert (left.error, left.member_id, left.member_epoch) == (0, "a", -1)
    cg = c.groups["g"].consumer
    assert cg is not None and cg.state.value == "Empty" and cg.group_epoch == 3
    missing = await c.consumer_heartbeat(ConsumerHeartbeat("nope", "m", 3, owned=None))
    assert (missing.error, missing.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Consumer group nope not found.")


async def test_state_is_rebuilt_from_the_log() -> None:
    log = MemoryShardLog()
    c = await coordinator(log)
    a = await join(c, "a", topics=["t1", "t2"])
    b = await join(c, "b", topics=["t1", "t2"])
    await beat(c, "a", a.member_epoch, owned(a))
    cg = c.groups["g"].consumer
    assert cg is not None
    before = (cg.group_epoch, cg.assignment_epoch, dict(cg.members), dict(cg.targets))
    c.unload()
    c2 = await coordinator(log)
    cg2 = c2.groups["g"].consumer
    assert cg2 is not None
    assert (cg2.group_epoch, cg2.assignment_epoch, cg2.members, cg2.targets) == before
    # b carries on at its epoch with the reloaded coordinator.
    assert (await beat(c2, "b", b.member_epoch, {})).error == 0
    c2.unload()


async def test_static_member_leaves_and_comes_back_with_its_assignment() -> None:
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a", instance_id="i1")
    assert (await join(c, "a2", instance_id="i1")).error == ErrorCode.UNRELEASED_INSTANCE_ID
    left = await beat(c, "a", -2, None, instance_id="i1")
    assert left.member_epoch == -2
    back = await join(c, "a2", instance_id="i1")
    assert back.error == 0 and owned(back) == owned(a) and back.member_epoch == a.member_epoch
    cg = c.groups["g"].consumer
    assert cg is not None and set(cg.members) == {"a2"}


async def test_txn_offset_commit_checks_member_epochs_as_kafka_4_4() -> None:
    """A transactional commit of a consumer-protocol member: a newer epoch is stale; below v6
    (KIP-1319) the stale epoch is answered ILLEGAL_GENERATION; a producer naming no member
    commits; an unknown member is refused."""
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a")
    om = OffsetAndMetadata(offset=5)
    tp = ("t1", 0)
    assert await c.txn_commit_offsets("g", 7, 0, a.member_epoch, "a", None, {tp: om}) == {tp: 0}
    newer = a.member_epoch + 1
    assert await c.txn_commit_offsets("g", 7, 0, newer, "a", None, {tp: om}) == {tp: ErrorCode.ILLEGAL_GENERATION}
    v6 = await c.txn_commit_offsets("g", 7, 0, newer, "a", None, {tp: om}, api_version=6)
    assert v6 == {tp: ErrorCode.STALE_MEMBER_EPOCH}
    assert await c.txn_commit_offsets("g", 7, 0, -1, "", None, {tp: om}, api_version=6) == {tp: 0}
    unknown = await c.txn_commit_offsets("g", 7, 0, 1, "x", None, {tp: om}, api_version=6)
    assert unknown == {tp: ErrorCode.UNKNOWN_MEMBER_ID}


async def test_regex_subscription_follows_topics() -> None:
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a", topics=None, subscribed_topic_regex="t.*")
    assert owned(a) == {T1: {0, 1, 2, 3}, T2: {0, 1}}
    bad = await join(c, "b", topics=None, subscribed_topic_regex="t(")
    assert bad.error == ErrorCode.INVALID_REGULAR_EXPRESSION


async def test_offset_commit_and_fetch_check_member_epochs() -> None:
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a")
    om = OffsetAndMetadata(offset=5)
    assert await c.commit_offsets("g", a.member_epoch, "a", None, {("t1", 0): om}, api_version=9) == {("t1", 0): 0}
    stale = await c.commit_offsets("g", a.member_epoch + 1, "a", None, {("t1", 0): om}, api_version=9)
    assert stale == {("t1", 0): ErrorCode.STALE_MEMBER_EPOCH}
    unknown = await c.commit_offsets("g", 1, "x", None, {("t1", 0): om}, api_version=9)
    assert unknown == {("t1", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert c.fetch_offsets("g", [("t1", 0)], member_id="a", member_epoch=0)[0] == ErrorCode.STALE_MEMBER_EPOCH
    err, found = c.fetch_offsets("g", [("t1", 0)], member_id="a", member_epoch=a.member_epoch)
    assert err == 0 and found[0].offset == 5
    assert c.list_groups() == [("g", "consumer", "Stable", "consumer")]
    assert (await c.delete_groups(["g"]))["g"] == ErrorCode.NON_EMPTY_GROUP
    await beat(c, "a", -1, None)
    assert (await c.delete_groups(["g"]))["g"] == 0 and "g" not in c.groups


def _assignment(partitions: list[int], topic: str = "t1") -> bytes:
    from kafka_wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment as A

    return encode_versioned(A(assigned_partitions=[A.TopicPartition(topic=topic, partitions=partitions)]), 0)


def _sub(owned: list[int] | None = None) -> bytes:
    from kafka_wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription as S

    tps = [S.TopicPartition(topic="t1", partitions=owned)] if owned else []
    return encode_versioned(S(topics=["t1"], owned_partitions=tps), 1)


def _parts(blob: bytes) -> list[int]:
    from kafka_wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment as A

    _, a = decode_versioned(A, blob)
    return sorted(p for tp in a.assigned_partitions for p in tp.partitions)  # type: ignore[attr-defined]


async def test_online_upgrade_mixed_members_and_downgrade() -> None:
    c = await coordinator(MemoryShardLog())
    # A classic group of one member owning every partition.
    j = await c.join(req(protocols=[("cooperative-sticky", _sub())], client="a"))
    a = j.member_id
    s = await c.sync("g", j.generation_id, a, None, None, None, {a: _assignment([0, 1, 2, 3])})
    assert (s.error, j.generation_id) == (0, 1)
    # A consumer-protocol member joins: the group is upgraded at generation 1, then moves to 2.
    b = await join(c, "b")
    assert (b.error, b.member_epoch, owned(b)) == (0, 2, {})
    cg = c.groups["g"].consumer
    assert cg is not None and cg.members[a].classic is not None and cg.members[a].assigned == {T1: frozenset(range(4))}
    assert c.groups["g"].members == {}
    # The classic member learns of the new epoch from its heartbeat and rejoins, still owning all.
    assert c.heartbeat("g", 1, a, None) == ErrorCode.REBALANCE_IN_PROGRESS
    r = await c.join(req(member_id=a, protocols=[("cooperative-sticky", _sub([0, 1, 2, 3]))]))
    assert (r.error, r.generation_id, r.protocol_name, r.leader, r.members) == (0, 1, "cooperative-sticky", "", [])
    s = await c.sync("g", 1, a, None, "consumer", "cooperative-sticky", {})
    kept = _parts(s.assignment)
    assert s.error == 0 and len(kept) == 2  # two partitions to revoke before b gets them
    r = await c.join(req(member_id=a, protocols=[("cooperative-sticky", _sub(kept))]))
    assert r.generation_id == 2
    assert _parts((await c.sync("g", 2, a, None, None, None, {})).assignment) == kept
    assert c.heartbeat("g", 2, a, None) == 0
    assert owned(await beat(c, "b", 2, {}))[T1] == set(range(4)) - set(kept)
    assert await c.commit_offsets("g", 1, a, None, {("t1", 0): OffsetAndMetadata(offset=1)}) == {
        ("t1", 0): ErrorCode.ILLEGAL_GENERATION}
    # The last consumer-protocol member leaves: back to a classic group, which rebalances.
    assert (await beat(c, "b", -1, None)).error == 0
    g = c.groups["g"]
    assert g.consumer is None and list(g.members) == [a] and g.state.value == "PreparingRebalance"
    r = await c.join(req(member_id=a, protocols=[("cooperative-sticky", _sub(kept))]))
    assert r.error == 0 and r.generation_id == 3 and r.leader == a  # the group epoch (2), then a rebalance
    c.unload()


async def test_a_classic_group_of_another_protocol_is_not_upgraded() -> None:
    c = await make(MemoryShardLog())
    await stable_group(c, 1, protocol_type="connect")
    hb = ConsumerHeartbeat("g", "m", 0, rebalance_timeout_ms=1, owned={}, subscribed_topic_names=["t"])
    a = await c.consumer_heartbeat(hb)
    assert (a.error, a.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_assignors_cover_every_partition_once_and_balance(assignor: object) -> None:
    members = [AssignorMember(f"m{i}", None, frozenset({"t1", "t2"})) for i in range(4)]
    out = assignor(members, TOPICS, {})  # type: ignore[operator]
    got = sorted((t, p) for a in out.values() for t, ps in a.items() for p in ps)
    assert got == sorted([(T1, p) for p in range(4)] + [(T2, p) for p in range(2)])
    if assignor is uniform:
        counts = [sum(len(p) for p in a.values()) for a in out.values()]
        assert max(counts) - min(counts) <= 1


async def test_the_group_s_session_timeout_and_heartbeat_interval() -> None:
    """consumer.session.timeout.ms / consumer.heartbeat.interval.ms of the group (passed by the
    handler) over the group.consumer.* settings (1 s session here)."""
    clock = FakeClock()
    cfg = dataclasses.replace(NOW, consumer_session_timeout_ms=1000)
    c = GroupCoordinator(0, MemoryShardLog(), cfg, clock=clock, topics=lambda: TOPICS)
    await c.load()
    a = await join(c, "a", session_timeout_ms=3000, heartbeat_interval_ms=7000)
    assert (a.error, a.heartbeat_interval_ms) == (0, 7000)
    cg = c.groups["g"].consumer
    assert cg is not None
    await clock.advance(2)  # past the setting's 1 s, within the group's 3 s
    assert set(cg.members) == {"a"}
    await clock.advance(1.1)
    assert cg.members == {}
    c.unload()


async def test_session_expiry_and_rebalance_timeout_fence_members() -> None:
    clock = FakeClock()
    cfg = dataclasses.replace(NOW, consumer_session_timeout_ms=1000)
    c = GroupCoordinator(0, MemoryShardLog(), cfg, clock=clock, topics=lambda: TOPICS)
    await c.load()
    a = await join(c, "a")
    b = await join(c, "b")
    cg = c.groups["g"].consumer
    assert cg is not None
    # a is told to revoke but never reports it: fenced after its rebalance timeout (500 ms).
    a2 = await beat(c, "a", a.member_epoch, owned(a), rebalance_timeout_ms=500)
    assert len(owned(a2)[T1]) == 2
    await clock.advance(0.4)
    assert (await beat(c, "b", b.member_epoch, {})).error == 0
    assert "a" in cg.members
    await clock.advance(0.2)
    assert set(cg.members) == {"b"}
    b2 = await beat(c, "b", b.member_epoch, {})
    assert owned(b2) == {T1: {0, 1, 2, 3}}
    # b stops heartbeating: its session ends and the group is empty.
    await clock.advance(1.1)
    assert cg.members == {} and cg.state.value == "Empty"
    c.unload()


async def test_deferred_target_is_computed_when_the_interval_ends() -> None:
    clock = FakeClock()
    c = GroupCoordinator(0, MemoryShardLog(), dataclasses.replace(FAST, consumer_assignment_interval_ms=1000),
                         clock=clock, topics=lambda: TOPICS)
    await c.load()
    await join(c, "a")
    b = await join(c, "b")
    cg = c.groups["g"].consumer
    assert cg is not None and cg.state.value == "Assigning" and b.assignment == {}
    await clock.advance(1.0)
    assert cg.assignment_epoch == cg.group_epoch == 3 and len(cg.targets["b"][T1]) == 2
    c.unload()


async def test_the_group_s_assignment_interval() -> None:
    """consumer.assignment.interval.ms of the group (passed by the handler) over the setting: 0 here
    computes b's target at once although the setting says 60 s; 2 s defers it that long."""
    clock = FakeClock()
    c = GroupCoordinator(0, MemoryShardLog(), dataclasses.replace(FAST, consumer_assignment_interval_ms=60000),
                         clock=clock, topics=lambda: TOPICS)
    await c.load()
    await join(c, "a", assignment_interval_ms=0)
    b = await join(c, "b", assignment_interval_ms=0)
    cg = c.groups["g"].consumer
    assert cg is not None and cg.assignment_epoch == cg.group_epoch == 3 and len(cg.targets["b"][T1]) == 2
    assert b.error == 0
    await join(c, "c", assignment_interval_ms=2000)
    assert cg.state.value == "Assigning" and "c" not in cg.targets
    await clock.advance(2.0)
    assert cg.assignment_epoch == cg.group_epoch == 4 and "c" in cg.targets
    c.unload()


async def test_migration_policy_disabled_keeps_the_kinds_apart() -> None:
    c = await coordinator(MemoryShardLog(), dataclasses.replace(NOW, consumer_migration_policy="disabled"))
    j = await c.join(req(protocols=[("range", _sub())], client="a"))
    await c.sync("g", j.generation_id, j.member_id, None, None, None, {j.member_id: _assignment([0, 1, 2, 3])})
    a = await join(c, "b")
    assert (a.error, a.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    assert c.groups["g"].consumer is None and list(c.groups["g"].members) == [j.member_id]
    c.unload()


async def test_offsets_of_a_consumer_group_delete_and_group_deletion() -> None:
    c = await coordinator(MemoryShardLog())
    a = await join(c, "a")
    om = OffsetAndMetadata(offset=5)
    await c.commit_offsets("g", a.member_epoch, "a", None, {("t1", 0): om, ("t2", 0): om}, api_version=9)
    err, out = await c.delete_offsets("g", [("t1", 0), ("t2", 0)])
    # t1 is subscribed to: its offset stays; t2 is not.
    assert (err, out) == (0, {("t1", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("t2", 0): 0})
    await beat(c, "a", -1, None)
    assert (await c.delete_groups(["g"]))["g"] == 0
    c.unload()
