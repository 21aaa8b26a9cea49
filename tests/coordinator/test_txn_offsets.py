"""TxnOffsetCommit in a group shard: offsets written in a producer's transaction stay pending
(OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT) until its marker: COMMIT makes
them the committed offsets, ABORT drops them; a shard replayed from its log agrees."""

from __future__ import annotations

from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.group import OffsetAndMetadata
from kafka_wire.errors import ErrorCode
from kafka_wire.records import build_end_txn_marker
from tests.coordinator.helpers import FAST
from tests.coordinator.shard_logs import MemoryShardLog

TP = ("in", 0)


def om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=1, expire_timestamp=-1)


async def shard(log: MemoryShardLog) -> GroupCoordinator:
    c = GroupCoordinator(0, log, FAST)
    await c.load()
    return c


def fetched(c: GroupCoordinator, require_stable: bool = False) -> tuple[int, int]:
    _, (f,) = c.fetch_offsets("g", [TP], require_stable)
    return f.offset, f.error


async def test_pending_until_commit_marker() -> None:
    log = MemoryShardLog()
    c = await shard(log)
    assert await c.txn_commit_offsets("g", 7, 0, -1, "", None, {TP: om(5)}) == {TP: ErrorCode.NONE}
    assert fetched(c) == (-1, ErrorCode.NONE)
    assert fetched(c, require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    # replayed before the marker: still pending
    assert fetched(await shard(log), require_stable=True)[1] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    await log.append(bytes(build_end_txn_marker(7, 0, True, 0)))
    c.complete_txn(7, commit=True)
    assert fetched(c, require_stable=True) == (5, ErrorCode.NONE)
    assert fetched(await shard(log), require_stable=True) == (5, ErrorCode.NONE)


async def test_abort_marker_drops_them() -> None:
    log = MemoryShardLog()
    c = await shard(log)
    await c.commit_offsets("g", -1, "", None, {TP: om(2)})
    await c.txn_commit_offsets("g", 7, 0, -1, "", None, {TP: om(9)})
    await log.append(bytes(build_end_txn_marker(7, 0, False, 0)))
    c.complete_txn(7, commit=False)
    assert fetched(c, require_stable=True) == (2, ErrorCode.NONE)
    assert fetched(await shard(log), require_stable=True) == (2, ErrorCode.NONE)


async def test_member_checks() -> None:
    c = await shard(MemoryShardLog())
    assert await c.txn_commit_offsets("g", 7, 0, 3, "", None, {TP: om(1)}) == {TP: ErrorCode.ILLEGAL_GENERATION}
    # v6 (KIP-1319) names the missing group instead
    v6 = await c.txn_commit_offsets("g", 7, 0, 3, "", None, {TP: om(1)}, api_version=6)
    assert v6 == {TP: ErrorCode.GROUP_ID_NOT_FOUND} and "g" not in c.groups
    assert await c.txn_commit_offsets("g", 7, 0, -1, "m", None, {TP: om(1)}) == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
