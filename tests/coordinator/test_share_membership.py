"""Share-group membership on a coordinator shard (coordinator/share/membership.py): joining
with epoch 0, the simple assignor (every member gets partitions, members share them), epochs
and fencing, leaving, session expiry on a fake clock, and share groups in ListGroups,
DescribeGroups and DeleteGroups."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from coordinator.group.coordinator import GroupCoordinator
from coordinator.share.config import ShareConfig
from coordinator.share.group import TopicsMetadata
from coordinator.share.membership import HeartbeatResult
from kafka_wire.errors import ErrorCode as E
from store.clock import SYSTEM_CLOCK
from tests.coordinator.helpers import FAST, join_all, req
from tests.coordinator.shard_logs import MemoryShardLog
from tests.support.clock import FakeClock

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS: TopicsMetadata = {"t1": (T1, 2), "t2": (T2, 1)}


async def resolve(names: Iterable[str]) -> TopicsMetadata:
    return {n: TOPICS[n] for n in names if n in TOPICS}


async def coordinator(clock: FakeClock | None = None) -> GroupCoordinator:
    c = GroupCoordinator(0, MemoryShardLog(), FAST, share_config=ShareConfig(session_timeout_ms=1000),
                         clock=clock or SYSTEM_CLOCK)
    await c.load()
    return c


async def hb(
    c: GroupCoordinator, member: str, epoch: int, topics: list[str] | None = None, group: str = "sg"
) -> HeartbeatResult:
    return await c.share_heartbeat(group, member, epoch, None, topics, "cli", "/127.0.0.1", resolve)


async def test_join_assign_share_and_leave() -> None:
    c = await coordinator()
    a = await hb(c, "a", 0, ["t1"])
    assert (a.error, a.member_epoch, a.heartbeat_interval_ms) == (E.NONE, 1, 5000)
    assert a.assignment == {T1: [0, 1]}
    b = await hb(c, "b", 0, ["t1"])
    assert b.member_epoch == 2 and b.assignment == {T1: [1]}
    a2 = await hb(c, "a", 1)
    assert a2.member_epoch == 2 and a2.assignment == {T1: [0]}
    assert (await hb(c, "a", 2)).assignment is None  # unchanged: not repeated
    # More members than partitions: every member gets one, partitions are shared.
    assert (await hb(c, "c", 0, ["t1", "t2"])).assignment == {T1: [0], T2: [0]}
    # The others move to the new epoch; their own partitions did not change, so they are not repeated.
    assert [(r.error, r.member_epoch, r.assignment) for r in [await hb(c, m, 2) for m in ("a", "b")]] == [
        (E.NONE, 3, None), (E.NONE, 3, None)]
    assert (await hb(c, "a", 2)).error == E.FENCED_MEMBER_EPOCH
    held = {m.member_id: m.assignment for m in c.describe_share_group("sg").members}
    assert held == {"a": {T1: [0]}, "b": {T1: [1]}, "c": {T1: [0], T2: [0]}}
    left = await hb(c, "c", -1)
    assert (left.error, left.member_epoch) == (E.NONE, -1)
    d = c.describe_share_group("sg")
    assert (d.state, d.group_epoch, sorted(m.member_id for m in d.members)) == ("Stable", 4, ["a", "b"])


async def test_errors() -> None:
    c = await coordinator()
    assert (await hb(c, "", 0, ["t1"])).error == E.INVALID_REQUEST
    assert (await hb(c, "a", 0, None)).error == E.INVALID_REQUEST
    assert (await hb(c, "a", -2, ["t1"])).error == E.INVALID_REQUEST
    assert (await hb(c, "a", 3)).error == E.UNKNOWN_MEMBER_ID
    await hb(c, "a", 0, ["t1"])
    assert (await hb(c, "a", 7)).error == E.FENCED_MEMBER_EPOCH
    assert (await hb(c, "a", 0, ["t1"])).member_epoch == 1  # a rejoin keeps its place
    assert c.describe_share_group("nope").error == E.GROUP_ID_NOT_FOUND
    # One namespace for classic and share groups.
    (j,) = await join_all(c, [req("sg")])
    assert j.error == E.INCONSISTENT_GROUP_PROTOCOL


async def test_session_expiry_reassigns() -> None:
    clock = FakeClock()
    c = await coordinator(clock)
    await hb(c, "a", 0, ["t1"])
    await hb(c, "b", 0, ["t1"])
    await clock.advance(0.6)
    assert (await hb(c, "a", 1)).member_epoch == 2
    await clock.advance(0.6)
    d = c.describe_share_group("sg")
    assert [m.member_id for m in d.members] == ["a"] and d.group_epoch == 3
    a = await hb(c, "a", 2)
    assert (a.error, a.member_epoch, a.assignment) == (E.NONE, 3, {T1: [0, 1]})
    assert (await hb(c, "b", 2)).error == E.UNKNOWN_MEMBER_ID


async def test_the_group_s_session_timeout_and_heartbeat_interval() -> None:
    """share.session.timeout.ms / share.heartbeat.interval.ms of the group, passed by the
    handler, over the group.share.* settings (1 s session here)."""
    clock = FakeClock()
    c = await coordinator(clock)
    a = await c.share_heartbeat("sg", "a", 0, None, ["t1"], "cli", "/h", resolve, session_timeout_ms=3000,
                                heartbeat_interval_ms=7000)
    assert (a.error, a.heartbeat_interval_ms) == (E.NONE, 7000)
    await clock.advance(2)  # past the setting's 1 s, within the group's 3 s
    assert [m.member_id for m in c.describe_share_group("sg").members] == ["a"]
    await clock.advance(1.1)
    assert c.describe_share_group("sg").members == []


async def test_list_describe_and_delete_share_groups() -> None:
    c = await coordinator()
    await hb(c, "a", 0, ["t1"])
    assert c.list_groups() == [("sg", "share", "Stable", "share")]
    assert c.list_groups(types=["classic"]) == []
    assert c.list_groups(types=["Share"], states=["stable"]) == [("sg", "share", "Stable", "share")]
    assert c.describe("sg").error == E.GROUP_ID_NOT_FOUND
    assert await c.delete_groups(["sg"]) == {"sg": E.NON_EMPTY_GROUP}
    await hb(c, "a", -1)
    assert c.list_groups() == [("sg", "share", "Empty", "share")]
    assert await c.delete_groups(["sg"]) == {"sg": E.NONE}
    assert c.list_groups() == []


async def test_groups_and_members_survive_a_coordinator_failover() -> None:
    log = MemoryShardLog()
    c = GroupCoordinator(0, log, FAST, share_config=ShareConfig(session_timeout_ms=1000))
    await c.load()
    await hb(c, "a", 0, ["t1"])
    await hb(c, "b", 0, ["t1"])
    await hb(c, "gone", 0, ["t1"], group="other")
    await hb(c, "gone", -1, group="other")
    await hb(c, "x", 0, ["t2"], group="deleted")
    await hb(c, "x", -1, group="deleted")
    assert await c.delete_groups(["deleted"]) == {"deleted": E.NONE}
    c.unload()
    again = GroupCoordinator(0, log, FAST, share_config=ShareConfig(session_timeout_ms=1000))
    await again.load()
    assert sorted(again.list_groups()) == [("other", "share", "Empty", "share"), ("sg", "share", "Stable", "share")]
    d = again.describe_share_group("sg")
    assert (d.group_epoch, sorted(m.member_id for m in d.members)) == (2, ["a", "b"])
    # b heartbeats on at its epoch; the topics are resolved again, so a new epoch and its assignment.
    b = await hb(again, "b", 2)
    assert (b.error, b.member_epoch, b.assignment) == (E.NONE, 3, {T1: [1]})
    again.unload()
