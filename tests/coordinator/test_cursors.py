"""Committed offsets as cursors: coordinators publish {group: offset} per partition (merged by
compare-and-set), the partition owner moves one durable cursor per group, and retention keeps
what a group has not consumed."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from coordinator.group.cursors import CursorMover, OffsetPublisher, offsets_path, read_group_offsets
from store.ledger.client import LedgerClient
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.managed.position import Position
from store.meta.api import MetaStore
from store.meta.factory import open_meta

TID = uuid.UUID(int=7)


@pytest.fixture
async def meta(tmp_path: Any) -> AsyncIterator[MetaStore]:
    m = open_meta(f"embedded://{tmp_path / 'meta'}")
    await m.start()
    try:
        yield m
    finally:
        await m.close()


async def topic_id_of(name: str) -> uuid.UUID | None:
    return TID if name == "t" else None


async def test_publishers_merge_and_remove(meta: MetaStore) -> None:
    a = OffsetPublisher(meta, topic_id_of)
    b = OffsetPublisher(meta, topic_id_of)
    assert await a.publish({"g1": {("t", 0): 3, ("t", 1): 4}, "g9": {("unknown", 0): 1}}) == 2
    assert await b.publish({"g2": {("t", 0): 1}}) == 1
    assert await read_group_offsets(meta, TID, 0) == ({"g1": 3, "g2": 1}, 1)
    assert (await read_group_offsets(meta, TID, 1))[0] == {"g1": 4}
    assert await a.publish({"g1": {("t", 0): 3, ("t", 1): 4}, "g9": {("unknown", 0): 1}}) == 0  # unchanged
    # g1 deleted its offsets of partition 0; b's g2 stays.
    await a.publish({"g1": {("t", 1): 5}})
    assert (await read_group_offsets(meta, TID, 0))[0] == {"g2": 1}
    assert json.loads((await meta.get(offsets_path(TID, 1)))[0]) == {"g1": 5}
    a.forget({"g1"})
    assert await a.publish({}) == 0  # a forgotten group is left to its new coordinator


@pytest.mark.slow
async def test_owner_moves_cursors_and_retention_keeps_unconsumed(bookie_cluster: Any, meta: MetaStore, tmp_path: Any) -> None:
    client = LedgerClient(meta)
    try:
        await bookie_cluster(1, f"embedded://{tmp_path / 'meta'}")
        cfg = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=2, retention_ms=0,
                        cursor_ensemble_size=1, cursor_write_quorum=1, cursor_ack_quorum=1)
        ml = await ManagedLog.open(meta, client, "kafka/t/0", config=cfg)
        positions: list[Position] = []

        async def position_of(offset: int) -> Position:
            return positions[offset] if offset < len(positions) else ml.next_position(ml.last_confirmed)

        pub, mover = OffsetPublisher(meta, topic_id_of), CursorMover(meta)
        # The groups commit offset 0 before anything is written: their cursors exist from the start.
        await pub.publish({"slow": {("t", 0): 0}, "fast": {("t", 0): 0}})
        await mover.apply(TID, 0, ml, position_of)
        positions += [await ml.append(f"offset-{i}".encode()) for i in range(8)]  # offset i = entry i
        await pub.publish({"slow": {("t", 0): 3}, "fast": {("t", 0): 7}})
        assert await mover.apply(TID, 0, ml, position_of)
        assert not await mover.apply(TID, 0, ml, position_of)  # nothing new
        cursors = ml.cursors
        assert cursors["group:slow"].mark_delete == positions[2]
        assert cursors["group:fast"].mark_delete == positions[6]
        assert cursors["group:slow"].backlog() == 5 and cursors["group:fast"].backlog() == 1
        # Retention (retention.ms=0 here: delete as soon as consumed) keeps what "slow" still needs.
        await ml.trim()
        first_kept = ml.ledgers[0].ledger_id
        assert first_kept <= positions[3].ledger_id
        got = await ml.read(positions[3], 10)
        assert [e.data for e in got][:5] == [f"offset-{i}".encode() for i in range(3, 8)]
        # The group catches up, then is deleted: its cursor follows, then goes.
        await pub.publish({"slow": {("t", 0): 8}, "fast": {("t", 0): 8}})
        await mover.apply(TID, 0, ml, position_of)
        assert ml.cursors["group:slow"].backlog() == 0
        await pub.publish({"fast": {("t", 0): 2}})  # offsets reset backwards
        await mover.apply(TID, 0, ml, position_of)
        assert set(ml.cursors) == {"group:fast"}
        # Back to offset 2, or to the log start if that was trimmed meanwhile.
        assert ml.cursors["group:fast"].mark_delete < positions[7]
        await ml.close()
    finally:
        await client.close()
