"""A shard persisted on a real segmented log (embedded meta + a bookie process): a new owner
rebuilds every group and offset after the previous owner went away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from coordinator.group.group import GroupState, OffsetAndMetadata
from store.ledger.client import LedgerClient
from store.managed.config import LogConfig
from store.managed.errors import OwnershipLostError
from store.managed.log import ManagedLog
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.coordinator.helpers import make, stable_group
from tests.coordinator.shard_logs import ManagedShardLog

pytestmark = pytest.mark.slow


async def take_over(meta: MetaStore, client: LedgerClient) -> ManagedLog:
    # The old owner may still be finishing a rollover: a new owner retries, as G3's would.
    for _ in range(20):
        try:
            return await ManagedLog.open(meta, client, "groups/0")
        except OwnershipLostError:
            await asyncio.sleep(0.05)
    raise AssertionError("could not take the log over")


@pytest.fixture
async def store(tmp_path: Any) -> AsyncIterator[tuple[str, MetaStore, LedgerClient]]:
    url = f"embedded://{tmp_path / 'meta'}"
    meta = open_meta(url)
    await meta.start()
    client = LedgerClient(meta)
    try:
        yield url, meta, client
    finally:
        await client.close()
        await meta.close()


async def test_new_owner_replays_groups_and_offsets(
    bookie_cluster: Any, store: tuple[str, MetaStore, LedgerClient]
) -> None:
    url, meta, client = store
    await bookie_cluster(1, url)
    cfg = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=3, retention_ms=-1, retention_bytes=-1)
    ml = await ManagedLog.open(meta, client, "groups/0", config=cfg)
    c = await make(ManagedShardLog(ml))
    a, b = await stable_group(c, 2)
    for i in range(5):  # spread over several ledgers (3 entries each)
        res = await c.commit_offsets("g", 1, a.member_id, None, {("t", i % 2): OffsetAndMetadata(offset=i * 10)})
        assert set(res.values()) == {0}
    await c.commit_offsets("s", -1, "", None, {("x", 0): OffsetAndMetadata(offset=99, leader_epoch=2, metadata="meta")})
    assert await c.delete_groups(["s"]) == {"s": 0}
    await c.commit_offsets("s2", -1, "", None, {("x", 1): OffsetAndMetadata(offset=7)})
    c.unload()
    # The next owner opens the log (fencing the old tail) and replays it.
    ml2 = await take_over(meta, client)
    c2 = await make(ManagedShardLog(ml2))
    g = c2.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1
    assert set(g.members) == {a.member_id, b.member_id}
    assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 40, ("t", 1): 30}
    assert "s" not in c2.groups
    assert c2.groups["s2"].offsets[("x", 1)].offset == 7
    # The replayed shard keeps serving and persisting.
    res = await c2.commit_offsets("g", 1, b.member_id, None, {("t", 0): OffsetAndMetadata(offset=41)})
    assert res == {("t", 0): 0}
    c2.unload()
    await ml2.close()
    ml3 = await ManagedLog.open(meta, client, "groups/0")
    c3 = await make(ManagedShardLog(ml3))
    assert c3.groups["g"].offsets[("t", 0)].offset == 41
    c3.unload()
    await ml3.close()
    await ml.close()
