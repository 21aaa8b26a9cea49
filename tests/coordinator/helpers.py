"""Shared helpers for coordinator tests: a coordinator over an in-memory shard log, and
shortcuts to drive members through join/sync."""

from __future__ import annotations

import asyncio

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator import GroupCoordinator, JoinRequest
from coordinator.group.group import JoinResult, SyncResult
from coordinator.group.shard_log import ShardLog
from kafka_wire.api import encode_versioned, schema_class
from store.clock import SYSTEM_CLOCK, Clock

FAST = GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=20)


def subscription(*topics: str) -> bytes:
    cls = schema_class("ConsumerProtocolSubscription")
    return encode_versioned(cls(topics=list(topics)), 0)


def req(
    group: str = "g",
    member_id: str = "",
    *,
    instance: str | None = None,
    session_ms: int = 10000,
    rebalance_ms: int = 10000,
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
    client: str = "c",
    require_known: bool = False,
) -> JoinRequest:
    return JoinRequest(
        group,
        member_id,
        instance,
        client,
        "/127.0.0.1",
        session_ms,
        rebalance_ms,
        protocol_type,
        protocols if protocols is not None else [("range", subscription("t"))],
        require_known,
    )


async def make(
    log: ShardLog, config: GroupConfig = FAST, shard: int = 0, *, clock: Clock = SYSTEM_CLOCK
) -> GroupCoordinator:
    c = GroupCoordinator(shard, log, config, clock=clock)
    await c.load()
    return c


async def join_all(c: GroupCoordinator, reqs: list[JoinRequest]) -> list[JoinResult]:
    return list(await asyncio.gather(*(c.join(r) for r in reqs)))


async def sync_all(c: GroupCoordinator, group: str, joined: list[JoinResult]) -> list[SyncResult]:
    """Every member syncs; the leader assigns each member its own id as the assignment."""
    coros = []
    for j in joined:
        assignments = {m[0]: m[0].encode() for m in j.members} if j.leader == j.member_id else {}
        coros.append(c.sync(group, j.generation_id, j.member_id, None, None, None, assignments))
    return list(await asyncio.gather(*coros))


async def stable_group(c: GroupCoordinator, n: int, group: str = "g", **kw: object) -> list[JoinResult]:
    joined = await join_all(c, [req(group, client=f"c{i}", **kw) for i in range(n)])  # type: ignore[arg-type]
    assert all(j.error == 0 for j in joined), joined
    synced = await sync_all(c, group, joined)
    assert [s.error for s in synced] == [0] * n
    return joined

