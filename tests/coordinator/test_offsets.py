"""Offsets, admin operations and replay of a shard over the in-memory log."""

from __future__ import annotations

import asyncio

from coordinator.group.group import GroupState, OffsetAndMetadata
from kafka_wire.errors import ErrorCode as E
from tests.coordinator.helpers import make, req, stable_group, subscription
from tests.coordinator.shard_logs import MemoryShardLog


def om(offset: int, metadata: str = "", epoch: int = -1) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=1000)


async def test_simple_commits_without_membership() -> None:
    c = await make(MemoryShardLog())
    res = await c.commit_offsets("simple", -1, "", None, {("t", 0): om(10, "m", 3), ("t", 1): om(20)})
    assert res == {("t", 0): E.NONE, ("t", 1): E.NONE}
    err, got = c.fetch_offsets("simple", [("t", 0), ("t", 1), ("t", 2)])
    assert err == E.NONE
    assert [(f.offset, f.leader_epoch, f.metadata) for f in got] == [(10, 3, "m"), (20, -1, ""), (-1, -1, "")]
    err, every = c.fetch_offsets("simple", None)
    assert [(f.topic, f.partition, f.offset) for f in every] == [("t", 0, 10), ("t", 1, 20)]
    err, none = c.fetch_offsets("unknown", [("t", 0)])
    assert err == E.NONE and none[0].offset == -1


async def test_commit_validation_error_codes() -> None:
    c = await make(MemoryShardLog())
    assert await c.commit_offsets("nogroup", 3, "m", None, {("t", 0): om(1)}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert "nogroup" not in c.groups
    [a] = await stable_group(c, 1)
    tp = ("t", 0)
    assert await c.commit_offsets("g", -1, "", None, {tp: om(1)}) == {tp: E.UNKNOWN_MEMBER_ID}
    assert await c.commit_offsets("g", 1, "ghost", None, {tp: om(1)}) == {tp: E.UNKNOWN_MEMBER_ID}
    assert await c.commit_offsets("g", 9, a.member_id, None, {tp: om(1)}) == {tp: E.ILLEGAL_GENERATION}
    assert await c.commit_offsets("g", 1, a.member_id, "nobody", {tp: om(1)}) == {tp: E.UNKNOWN_MEMBER_ID}
    big = "x" * 5000
    res = await c.commit_offsets("g", 1, a.member_id, None, {tp: om(1, big), ("t", 1): om(2)})
    assert res == {tp: E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    # A rebalance that has not completed yet: REBALANCE_IN_PROGRESS.
    newcomer = asyncio.ensure_future(c.join(req(client="n")))
    await asyncio.sleep(0)
    await c.join(req(member_id=a.member_id))
    await newcomer
    assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert await c.commit_offsets("g", 2, a.member_id, None, {tp: om(1)}) == {tp: E.REBALANCE_IN_PROGRESS}


class SlowLog(MemoryShardLog):
    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()

    async def append(self, batch: bytes) -> int:
        await self.gate.wait()
        return await super().append(batch)


async def test_require_stable_reports_commits_in_flight() -> None:
    log = SlowLog()
    c = await make(log)
    await c.commit_offsets("g", -1, "", None, {("t", 0): om(1)})
    log.gate.clear()
    pending = asyncio.ensure_future(c.commit_offsets("g", -1, "", None, {("t", 0): om(2)}))
    await asyncio.sleep(0)
    _, [f] = c.fetch_offsets("g", [("t", 0)], require_stable=True)
    assert f.error == E.UNSTABLE_OFFSET_COMMIT
    _, [f] = c.fetch_offsets("g", [("t", 0)], require_stable=False)
    assert (f.error, f.offset) == (E.NONE, 1)
    log.gate.set()
    assert await pending == {("t", 0): E.NONE}
    _, [f] = c.fetch_offsets("g", [("t", 0)], require_stable=True)
    assert (f.error, f.offset) == (E.NONE, 2)


async def test_replay_rebuilds_groups_and_offsets() -> None:
    log = MemoryShardLog()
    c = await make(log)
    a, b = await stable_group(c, 2)
    await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): om(5, "x"), ("t", 1): om(7)})
    await c.commit_offsets("g", 1, b.member_id, None, {("t", 0): om(6)})
    await c.commit_offsets("other", -1, "", None, {("u", 3): om(1)})
    c.unload()
    c2 = await make(log)
    g = c2.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.protocol_name == "range"
    assert set(g.members) == {a.member_id, b.member_id}
    assert g.members[a.member_id].assignment == a.member_id.encode()
    assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 6, ("t", 1): 7}
    assert c2.groups["other"].offsets[("u", 3)].offset == 1
    # Members carry on with the same generation; a rejoin rebalances to generation 2.
    assert c2.heartbeat("g", 1, a.member_id, None) == E.NONE
    assert (await c2.sync("g", 1, b.member_id, None, None, None, {})).assignment == b.member_id.encode()
    c2.unload()


async def test_describe_list_and_delete_groups() -> None:
    log = MemoryShardLog()
    c = await make(log)
    await stable_group(c, 1)
    await c.commit_offsets("idle", -1, "", None, {("t", 0): om(1)})
    d = c.describe("g")
    assert (d.error, d.state, d.protocol_type, d.protocol_data) == (E.NONE, "Stable", "consumer", "range")
    assert d.members[0].client_id == "c0" and d.members[0].metadata == subscription("t")
    assert c.describe("missing").error == E.GROUP_ID_NOT_FOUND
    assert sorted(c.list_groups()) == [("g", "consumer", "Stable", "classic"), ("idle", "", "Empty", "classic")]
    assert c.list_groups(states=["empty"]) == [("idle", "", "Empty", "classic")]
    assert c.list_groups(types=["consumer"]) == []
    assert await c.delete_groups(["g", "idle", "missing"]) == {
        "g": E.NON_EMPTY_GROUP,
        "idle": E.NONE,
        "missing": E.GROUP_ID_NOT_FOUND,
    }
    assert c.describe("idle").error == E.GROUP_ID_NOT_FOUND
    assert c.fetch_offsets("idle", None) == (E.NONE, [])
    c.unload()
    c2 = await make(log)
    assert "idle" not in c2.groups and "g" in c2.groups
    c2.unload()


async def test_offset_delete_rules() -> None:
    log = MemoryShardLog()
    c = await make(log)
    [a] = await stable_group(c, 1)  # subscribed to topic "t"
    await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): om(1), ("u", 0): om(2)})
    err, res = await c.delete_offsets("g", [("t", 0), ("u", 0), ("v", 9)])
    assert err == E.NONE
    assert res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE, ("v", 9): E.NONE}
    assert set(c.groups["g"].offsets) == {("t", 0)}
    assert (await c.delete_offsets("nope", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND
    c.leave("g", [(a.member_id, None)])
    await asyncio.sleep(0)
    assert (await c.delete_offsets("g", [("t", 0)])) == (E.NONE, {("t", 0): E.NONE})
    c.unload()
    c2 = await make(log)
    assert c2.groups["g"].offsets == {}
    c2.unload()


async def test_offsets_expire_like_kafka() -> None:
    from coordinator.group.config import GroupConfig

    log = MemoryShardLog()
    c = await make(log, GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0, offsets_retention_ms=1000))
    await c.commit_offsets("simple", -1, "", None, {("t", 0): OffsetAndMetadata(offset=1, leader_epoch=-1, metadata="", commit_timestamp=100)})
    await c.commit_offsets("simple", -1, "", None, {("t", 1): OffsetAndMetadata(offset=2, leader_epoch=-1, metadata="", commit_timestamp=5000)})
    await c.commit_offsets("explicit", -1, "", None, {("t", 0): OffsetAndMetadata(offset=3, leader_epoch=-1, metadata="", commit_timestamp=100, expire_timestamp=200)})
    [a] = await stable_group(c, 1)
    await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): OffsetAndMetadata(offset=4, leader_epoch=-1, metadata="", commit_timestamp=100)})
    assert await c.expire_offsets(2000) == 2  # simple t-0 (commit + 1 s) and the explicit expiry
    assert set(c.groups["simple"].offsets) == {("t", 1)}
    assert "explicit" not in c.groups  # empty group with no offsets left: deleted
    assert ("t", 0) in c.groups["g"].offsets  # a group with members keeps its offsets
    c.leave("g", [(a.member_id, None)])
    await asyncio.sleep(0)
    empty_since = c.groups["g"].state_timestamp
    assert await c.expire_offsets(empty_since + 999) == 1  # only simple's t-1 (committed at 5000)
    assert "g" in c.groups and "simple" not in c.groups
    assert await c.expire_offsets(empty_since + 1000) == 1
    assert "g" not in c.groups
    c.unload()
    c2 = await make(log)
    assert c2.groups == {}
    c2.unload()
