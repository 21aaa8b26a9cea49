"""Offload of segmented logs over real bookie processes, to a directory and to SeaweedFS S3."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from store.ledger.client import LedgerClient
from store.ledger.errors import NoSuchLedgerError
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.managed.position import Position
from store.managed.readonly import ManagedLogReader
from store.meta.api import MetaStore
from store.offload.offloader import Offloader, cleanup
from store.offload.tier import Tier

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("meta_url", ["embedded"], indirect=True)]

CFG = LogConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, max_entries=40, retention_ms=-1)


def payloads(n: int) -> list[bytes]:
    return [os.urandom(200 + (i * 7919) % 3000) for i in range(n)]


async def read_all(reader: Any, upto: int = 1 << 30) -> list[bytes]:
    out: list[bytes] = []
    pos = Position(0, 0)
    while len(out) < upto:
        got = await reader.read(pos, max_entries=300, max_bytes=1 << 20)
        if not got:
            break
        out += [e.data for e in got]
        pos = Position(got[-1].position.ledger_id, got[-1].position.entry_id + 1)
    return out


async def test_offloaded_ledgers_read_back_with_bookies_gone(
    bookie_cluster: Any, meta_url: str, store: tuple[MetaStore, LedgerClient], tier: Tier
) -> None:
    bookies = await bookie_cluster(3, meta_url)
    meta, client = store
    off = Offloader(tier, deletion_lag_ms=0)
    ml = await ManagedLog.open(meta, client, "t", config=CFG, cache=EntryCache(max_bytes=10_000), offloader=off)
    data = payloads(300)
    await asyncio.gather(*(ml.append(p) for p in data))
    await ml.roll()
    closed = [li.ledger_id for li in ml.ledgers[:-1]]
    assert len(closed) == 300 // 40 + 1
    res = await off.run(ml, force=True)
    assert res.offloaded == closed and res.bookie_deleted == closed
    assert res.bytes == sum(map(len, data))
    for lid in closed:
        with pytest.raises(NoSuchLedgerError):
            await client.metadata(lid)
    # the owner reads offloaded ledgers through the same reader (cache too small to help)
    assert await read_all(ml) == data
    await ml.close()
    # with every bookie stopped, a non-owning reader still reads all of it from the tier
    for b in bookies:
        b.kill()
    ro = await ManagedLogReader.open(meta, client, "t", offloaded=tier)
    assert await read_all(ro) == data
    await ro.close()
    # nothing orphaned: every object is named by the metadata
    assert await cleanup(meta, tier, margin_ms=0) == []
    assert len(await tier.objects()) == 2 * len(closed)


async def test_policy_offloads_by_size_and_retention_deletes_objects(
    bookie_cluster: Any, meta_url: str, store: tuple[MetaStore, LedgerClient], tier: Tier
) -> None:
    await bookie_cluster(3, meta_url)
    meta, client = store
    off = Offloader(tier, deletion_lag_ms=3_600_000)
    cfg = LogConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, max_entries=20, retention_ms=-1,
                    offload=True, offload_bytes=0)
    ml = await ManagedLog.open(meta, client, "p", config=cfg, cache=EntryCache(), offloader=off)
    cur = await ml.open_cursor("c", "earliest")
    data = [b"%05d" % i * 50 for i in range(100)]
    positions = await asyncio.gather(*(ml.append(p) for p in data))
    await ml.roll()
    closed = [li.ledger_id for li in ml.ledgers[:-1]]
    # rollovers ran the policy in the background: every closed ledger offloaded, none deleted yet
    await off.wait_for(lambda: all(li.offload is not None for li in ml.ledgers[:-1]))
    assert all(not li.offload.bookie_deleted for li in ml.ledgers[:-1] if li.offload)
    for lid in closed:
        await client.metadata(lid)  # bookie copies kept for the deletion lag
    assert len(await tier.objects()) == 2 * len(closed)
    # retention (now 0 ms) removes the consumed ledgers from both tiers
    ml.config = LogConfig(**{**cfg.to_dict(), "retention_ms": 0})
    await cur.mark_delete_to(positions[59])  # schedules a retention pass
    await ml.wait_trimmed()
    await ml.trim()
    assert [li.ledger_id for li in ml.ledgers[:-1]] == closed[3:]
    keys = {k.key for k in await tier.objects()}
    for li in ml.ledgers[:-1]:
        assert li.offload is not None and {li.offload.data, li.offload.index} <= keys
    assert len(keys) == 2 * (len(closed) - 3)
    assert await read_all(ml) == data[60:]
    # deleting the log deletes its offloaded objects too
    await ml.delete()
    assert await tier.objects() == []


async def test_ledgers_offloaded_concurrently_lose_no_switch(
    bookie_cluster: Any, meta_url: str, store: tuple[MetaStore, LedgerClient], tier: Tier
) -> None:
    await bookie_cluster(3, meta_url)
    meta, client = store
    width = 4
    off = Offloader(tier, deletion_lag_ms=0, max_concurrent_ledgers=width)
    ml = await ManagedLog.open(meta, client, "c", config=CFG, cache=EntryCache(max_bytes=10_000), offloader=off)
    data = payloads(400)
    await asyncio.gather(*(ml.append(p) for p in data))
    await ml.roll()
    closed = [li.ledger_id for li in ml.ledgers[:-1]]
    assert len(closed) == 10
    # every copy waits until `width` are in flight: a pass that copied one at a time would hang
    copy = tier.copy_ledger
    started, in_flight, peak, wide = 0, 0, 0, asyncio.Event()

    async def gated(*args: Any) -> Any:
        nonlocal started, in_flight, peak
        started += 1
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == width:
            wide.set()
        try:
            if started <= width:  # the first wave
                await asyncio.wait_for(wide.wait(), 30)
            return await copy(*args)
        finally:
            in_flight -= 1

    tier.copy_ledger = gated  # type: ignore[method-assign]
    res = await off.run(ml, force=True)
    assert wide.is_set() and peak == width
    # the switches raced on the log's metadata: none lost (in memory and in the store)
    assert res.offloaded == closed and res.bookie_deleted == closed
    assert all(li.offload is not None and li.offload.bookie_deleted for li in ml.ledgers[:-1])
    await ml.close()
    ro = await ManagedLogReader.open(meta, client, "c", offloaded=tier)
    assert await read_all(ro) == data
    await ro.close()
    assert await cleanup(meta, tier, margin_ms=0) == []
