"""The classic group state machine over an in-memory shard log: joins, syncs, heartbeats,
leaves, timeouts, static membership, protocol selection and Kafka's error codes."""

from __future__ import annotations

import asyncio

from coordinator.group.config import GroupConfig
from coordinator.group.group import GroupState
from coordinator.group.shard_log import ShardLogError
from kafka_wire.errors import ErrorCode as E
from tests.coordinator.helpers import (
    FAST,
    join_all,
    make,
    req,
    stable_group,
    subscription,
    sync_all,
)
from tests.coordinator.shard_logs import MemoryShardLog
from tests.support.clock import FakeClock
from tests.support.wait import eventually


async def test_member_id_required_then_single_member_group() -> None:
    c = await make(MemoryShardLog())
    first = await c.join(req(require_known=True, client="cli"))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("cli-")
    j = await c.join(req(member_id=first.member_id, require_known=True))
    assert j.error == E.NONE and j.generation_id == 1
    assert j.leader == j.member_id == first.member_id
    assert [m[0] for m in j.members] == [j.member_id]
    assert j.protocol_name == "range" and j.protocol_type == "consumer"
    s = await c.sync("g", 1, j.member_id, None, "consumer", "range", {j.member_id: b"A"})
    assert (s.error, s.assignment, s.protocol_name) == (E.NONE, b"A", "range")
    assert c.heartbeat("g", 1, j.member_id, None) == E.NONE
    d = c.describe("g")
    assert d.state == "Stable" and d.protocol_data == "range"
    assert [(m.member_id, m.assignment) for m in d.members] == [(j.member_id, b"A")]


async def test_followers_wait_for_the_leaders_assignment() -> None:
    c = await make(MemoryShardLog())
    joined = await join_all(c, [req(client="a"), req(client="b"), req(client="c")])
    assert {j.generation_id for j in joined} == {1}
    leaders = [j for j in joined if j.leader == j.member_id]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    assert all(j.members == [] for j in joined if j is not leaders[0])
    followers = [j for j in joined if j is not leaders[0]]
    # Followers sync first: they wait (CompletingRebalance) until the leader's sync is stored.
    waiting = [asyncio.ensure_future(c.sync("g", 1, f.member_id, None, None, None, {})) for f in followers]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiting)
    assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
    lead = leaders[0]
    ls = await c.sync("g", 1, lead.member_id, None, None, None, {m[0]: m[0].encode() for m in lead.members})
    assert ls.assignment == lead.member_id.encode()
    for f, w in zip(followers, waiting):
        assert (await w).assignment == f.member_id.encode()
    assert c.groups["g"].state is GroupState.STABLE


async def test_new_member_triggers_rebalance_and_heartbeats_say_so() -> None:
    c = await make(MemoryShardLog())
    (a, b) = await stable_group(c, 2)
    newcomer = asyncio.ensure_future(c.join(req(client="new")))
    await asyncio.sleep(0)
    assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat("g", 1, a.member_id, None) == E.REBALANCE_IN_PROGRESS
    # Commits are still allowed while preparing (Kafka relies on the heartbeat signal).
    assert await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): om(5)}) == {("t", 0): E.NONE}
    rejoined = await join_all(c, [req(member_id=a.member_id), req(member_id=b.member_id)])
    n = await newcomer
    assert {r.generation_id for r in [*rejoined, n]} == {2}
    synced = await sync_all(c, "g", [*rejoined, n])
    assert all(s.error == E.NONE for s in synced)
    assert c.heartbeat("g", 1, a.member_id, None) == E.ILLEGAL_GENERATION
    assert c.heartbeat("g", 2, a.member_id, None) == E.NONE


def om(offset: int, metadata: str = ""):  # type: ignore[no-untyped-def]
    from coordinator.group.group import OffsetAndMetadata

    return OffsetAndMetadata(offset=offset, leader_epoch=-1, metadata=metadata, commit_timestamp=1)


async def test_protocol_selection_by_votes_among_common_protocols() -> None:
    c = await make(MemoryShardLog())
    joined = await join_all(
        c,
        [
            req(client="a", protocols=[("range", b"a"), ("roundrobin", b"a"), ("sticky", b"a")]),
            req(client="b", protocols=[("sticky", b"b"), ("roundrobin", b"b")]),
            req(client="c", protocols=[("sticky", b"c"), ("roundrobin", b"c")]),
            req(client="d", protocols=[("sticky", b"d"), ("roundrobin", b"d")]),
        ],
    )
    assert {j.protocol_name for j in joined} == {"sticky"}
    lead = next(j for j in joined if j.leader == j.member_id)
    assert sorted(m[2] for m in lead.members) == [b"a", b"b", b"c", b"d"]


async def test_inconsistent_protocols_are_refused() -> None:
    c = await make(MemoryShardLog())
    await stable_group(c, 1)
    other_type = await c.join(req(protocol_type="connect"))
    assert other_type.error == E.INCONSISTENT_GROUP_PROTOCOL
    no_common = await c.join(req(protocols=[("roundrobin", b"")]))
    assert no_common.error == E.INCONSISTENT_GROUP_PROTOCOL
    empty = await c.join(req(group="fresh", protocols=[]))
    assert empty.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert "fresh" not in c.groups


async def test_bad_input_error_codes() -> None:
    c = await make(MemoryShardLog())
    assert (await c.join(req(group=""))).error == E.INVALID_GROUP_ID
    assert (await c.join(req(session_ms=5))).error == E.INVALID_SESSION_TIMEOUT
    assert (await c.join(req(session_ms=10**9))).error == E.INVALID_SESSION_TIMEOUT
    assert (await c.join(req(group="nope", member_id="ghost"))).error == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("nope", 1, "ghost", None) == E.UNKNOWN_MEMBER_ID
    assert (await c.sync("nope", 1, "ghost", None, None, None, {})).error == E.UNKNOWN_MEMBER_ID
    [a] = await stable_group(c, 1)
    assert c.heartbeat("g", 1, "ghost", None) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", 7, a.member_id, None) == E.ILLEGAL_GENERATION
    assert (await c.sync("g", 7, a.member_id, None, None, None, {})).error == E.ILLEGAL_GENERATION
    assert (await c.sync("g", 1, a.member_id, None, "connect", None, {})).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await c.sync("g", 1, a.member_id, None, None, "roundrobin", {})).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await c.join(req(member_id="ghost"))).error == E.UNKNOWN_MEMBER_ID
    assert c.leave("g", [("ghost", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert c.leave("nope", [("x", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    c.unload()
    assert c.heartbeat("g", 1, a.member_id, None) == E.NOT_COORDINATOR
    assert (await c.join(req())).error == E.NOT_COORDINATOR


async def test_session_expiry_removes_member_and_rebalances() -> None:
    clock = FakeClock()
    c = await make(MemoryShardLog(), clock=clock)
    a, b = await clock.run_until_done(stable_group(c, 2, session_ms=150))
    # Only a heartbeats; b's session expires.
    await clock.advance(0.1)
    assert c.heartbeat("g", 1, a.member_id, None) == E.NONE
    assert b.member_id in c.groups["g"].members
    await clock.advance(0.1)
    assert c.heartbeat("g", 1, a.member_id, None) == E.REBALANCE_IN_PROGRESS
    assert b.member_id not in c.groups["g"].members
    j = await c.join(req(member_id=a.member_id, session_ms=150))
    assert j.generation_id == 2 and [m[0] for m in j.members] == [a.member_id]


async def test_members_not_rejoining_within_rebalance_timeout_are_dropped() -> None:
    c = await make(MemoryShardLog())
    a, b = await stable_group(c, 2, rebalance_ms=100)
    j = await c.join(req(member_id=a.member_id, rebalance_ms=100))  # b never rejoins
    assert j.error == E.NONE and j.generation_id == 2
    assert [m[0] for m in j.members] == [a.member_id]
    assert c.heartbeat("g", 1, b.member_id, None) == E.UNKNOWN_MEMBER_ID


async def test_leader_that_never_syncs_gets_members_dropped() -> None:
    c = await make(MemoryShardLog())
    joined = await join_all(c, [req(client="a", rebalance_ms=100), req(client="b", rebalance_ms=100)])
    follower = next(j for j in joined if j.leader != j.member_id)
    s = await c.sync("g", 1, follower.member_id, None, None, None, {})
    # The leader never synced: after the rebalance timeout it is removed and the follower is told.
    assert s.error == E.REBALANCE_IN_PROGRESS
    assert list(c.groups["g"].members) == [follower.member_id]


async def test_leave_batched_and_group_becomes_empty_and_stored() -> None:
    log = MemoryShardLog()
    c = await make(log)
    a, b, d = await stable_group(c, 3)
    assert c.leave("g", [(a.member_id, None), (b.member_id, None), ("ghost", None)]) == (
        E.NONE,
        [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID],
    )
    j = await c.join(req(member_id=d.member_id))
    assert j.generation_id == 2 and len(j.members) == 1
    await sync_all(c, "g", [j])
    assert c.leave("g", [(d.member_id, None)]) == (E.NONE, [E.NONE])
    g = c.groups["g"]
    assert g.state is GroupState.EMPTY and g.generation_id == 3

    async def stored() -> bool:  # the empty generation is written in the background
        g2 = (await make(log)).groups.get("g")
        return g2 is not None and g2.generation_id == 3

    await eventually(stored)
    c2 = await make(log)
    assert c2.groups["g"].state is GroupState.EMPTY and c2.groups["g"].generation_id == 3


async def test_pending_member_that_never_returns_expires() -> None:
    clock = FakeClock()
    c = await make(MemoryShardLog(), clock=clock)
    first = await c.join(req(require_known=True, session_ms=50))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id in c.groups["g"].pending_members
    await clock.advance(0.04)
    assert first.member_id in c.groups["g"].pending_members
    await clock.advance(0.02)
    assert "g" not in c.groups


async def test_static_member_restart_keeps_generation_without_rebalance() -> None:
    log = MemoryShardLog()
    c = await make(log)
    joined = await join_all(c, [req(client="a", instance="ia"), req(client="b", instance="ib")])
    await sync_all(c, "g", joined)
    follower = next(j for j in joined if j.leader != j.member_id)
    inst = "ia" if c.groups["g"].members[follower.member_id].group_instance_id == "ia" else "ib"
    # The follower restarts: same instance id, no member id.
    again = await c.join(req(instance=inst, client="again"))
    assert again.error == E.NONE and again.generation_id == 1 and again.member_id != follower.member_id
    assert c.groups["g"].state is GroupState.STABLE
    s = await c.sync("g", 1, again.member_id, inst, None, None, {})
    assert s.assignment == follower.member_id.encode()  # its old assignment, no rebalance
    # The old incarnation is fenced.
    assert c.heartbeat("g", 1, follower.member_id, inst) == E.FENCED_INSTANCE_ID
    assert (await c.join(req(member_id=follower.member_id, instance=inst))).error == E.FENCED_INSTANCE_ID
    assert (await c.commit_offsets("g", 1, follower.member_id, inst, {("t", 0): om(1)})) == {
        ("t", 0): E.FENCED_INSTANCE_ID
    }
    # The replacement was persisted: a new coordinator knows the new member id.
    c.unload()
    c2 = await make(log)
    assert c2.groups["g"].static_members[inst] == again.member_id
    assert c2.heartbeat("g", 1, again.member_id, inst) == E.NONE


async def test_static_leader_restart_skips_assignment() -> None:
    c = await make(MemoryShardLog())
    [a] = await stable_group(c, 1, instance="only")
    again = await c.join(req(instance="only"))
    assert again.error == E.NONE and again.skip_assignment and again.leader == again.member_id
    assert again.generation_id == 1 and [m[0] for m in again.members] == [again.member_id]
    assert again.member_id != a.member_id


async def test_static_member_with_new_protocol_triggers_rebalance() -> None:
    c = await make(MemoryShardLog())
    await stable_group(c, 1, instance="s", protocols=[("range", b"")])
    j = await c.join(req(instance="s", protocols=[("roundrobin", b""), ("range", b"")]))
    assert j.error == E.NONE and j.generation_id == 2 and j.protocol_name == "roundrobin"


async def test_admin_leave_by_instance_id() -> None:
    c = await make(MemoryShardLog())
    await stable_group(c, 1, instance="x")
    assert c.leave("g", [("", "x"), ("", "y")]) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    await asyncio.sleep(0)
    assert c.groups["g"].state is GroupState.EMPTY


async def test_initial_rebalance_delay_collects_late_joiners() -> None:
    clock = FakeClock()
    config = GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=100)
    c = await make(MemoryShardLog(), config, clock=clock)
    first = asyncio.ensure_future(c.join(req(client="a")))
    await clock.advance(0.05)
    assert not first.done()
    second = asyncio.ensure_future(c.join(req(client="b")))
    await clock.advance(0.05)  # the delay is extended: b came during it
    assert not first.done() and not second.done()
    await clock.advance(0.1)
    a, b = await first, await second
    assert a.generation_id == b.generation_id == 1  # one generation with both


async def test_failed_group_write_is_reported_and_group_rebalances() -> None:
    log = MemoryShardLog()
    c = await make(log)
    joined = await join_all(c, [req(client="a")])
    log.fail_next = ShardLogError("quorum lost")
    [s] = await sync_all(c, "g", joined)
    assert s.error == E.COORDINATOR_NOT_AVAILABLE
    assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
    log.fail_next = ShardLogError("fenced", lost=True)
    j = await c.join(req(member_id=joined[0].member_id))
    [s] = await sync_all(c, "g", [j])
    assert s.error == E.NOT_COORDINATOR


async def test_protocol_subscription_helper_encodes() -> None:
    assert subscription("a", "b")[:2] == b"\x00\x00"
    assert FAST.initial_rebalance_delay_ms < 100
