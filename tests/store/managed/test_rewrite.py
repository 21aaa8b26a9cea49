"""Replacing closed ledgers by rewrites (the store half of log compaction): one
compare-and-set, positions kept, a crash before the switch leaves the old ledgers in place."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from store.managed import log_retention
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.managed.log_retention import Rewrite, RewriteConflictError
from store.managed.position import Position
from store.meta.api import MetaStore
from tests.store.managed.fakes import FakeLedgerClient
from tests.store.managed.test_log import abandon

CFG = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=4, retention_ms=-1,
                deferred_delete_s=0.0)


async def _filled(meta: MetaStore, client: FakeLedgerClient, name: str) -> ManagedLog:
    mlog = await ManagedLog.open(meta, client, name, config=CFG, cache=EntryCache())
    await asyncio.gather(*[mlog.append(f"e{i}".encode()) for i in range(10)])
    await mlog.flush()
    return mlog


async def _rewrite(mlog: ManagedLog, lid: int, tag: bytes) -> Rewrite:
    li = next(x for x in mlog.ledgers if x.ledger_id == lid)
    w = await mlog.create_rewrite_ledger()
    for e in await mlog.read(Position(lid, 0), max_entries=li.entries):
        await w.append(tag + bytes(e.data))
    await w.close()
    return Rewrite(w.ledger_id, li.entries, w.length, li.data, {"c": "1"})


async def test_replace_switches_consecutive_ledgers_in_one_cas(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    mlog = await _filled(meta, fake_client, "rw")
    first, second = [li.ledger_id for li in mlog.ledgers[:2]]
    before = mlog.ledgers
    rws = {first: await _rewrite(mlog, first, b"A"), second: await _rewrite(mlog, second, b"B")}
    cur = await mlog.open_cursor("c", Position(first, 2))
    await mlog.replace_ledgers(rws)
    after = mlog.ledgers
    assert [li.ledger_id for li in after] == [li.ledger_id for li in before]  # ids and places kept
    assert after[0].data == rws[first].data and after[0].props["c"] == "1"
    got = await mlog.read(Position(first, 2), max_entries=4)
    # the same positions, now served from the rewrites; a cursor inside keeps its position
    assert [(e.position, bytes(e.data)) for e in got] == [
        (Position(first, 2), b"Ae2"), (Position(first, 3), b"Ae3"), (Position(second, 0), b"Be4"),
        (Position(second, 1), b"Be5")]
    assert cur.mark_delete == Position(first, 1)
    # the replaced copies are deleted by the next retention pass (grace 0 here)
    assert first in fake_client.ledgers
    await mlog.trim()
    assert first not in fake_client.ledgers and second not in fake_client.ledgers
    assert rws[first].data in fake_client.ledgers
    # a stale rewrite (made from the copy replaced since) is refused, nothing changes
    stale = Rewrite(rws[first].data, 4, 1, None)
    with pytest.raises(RewriteConflictError):
        await mlog.replace_ledgers({first: stale})
    # not consecutive: refused as a whole
    third = after[2].ledger_id
    with pytest.raises(RewriteConflictError):
        await mlog.replace_ledgers({first: Rewrite(99, 4, 1, rws[first].data), third: Rewrite(98, 2, 1, None)})
    assert mlog.ledgers[0].data == rws[first].data
    # trimming a rewritten ledger deletes its rewrite too
    await mlog.truncate_before(Position(third, 0))
    assert rws[first].data not in fake_client.ledgers
    await mlog.close()


async def test_crash_mid_rewrite_leaves_old_ledgers_and_orphan_is_deleted(
    meta: MetaStore, fake_client: FakeLedgerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_retention, "REWRITE_ORPHAN_MS", 0)
    a = await _filled(meta, fake_client, "crash")
    first = a.ledgers[0].ledger_id
    w = await a.create_rewrite_ledger()
    await w.append(b"half")
    abandon(a)  # the owner dies before the switch
    b = await ManagedLog.open(meta, fake_client, "crash", cache=EntryCache())
    assert b.ledgers[0].data is None
    assert [bytes(e.data) for e in await b.read(Position(first, 0), max_entries=2)] == [b"e0", b"e1"]
    assert w.ledger_id in fake_client.ledgers
    await b.trim()  # the orphan was listed for deferred deletion before it got any data
    assert w.ledger_id not in fake_client.ledgers
    await b.close()


async def test_reader_in_the_middle_of_a_switch_keeps_reading(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    from store.managed.readonly import ManagedLogReader

    cfg = dataclasses.replace(CFG, deferred_delete_s=300.0)
    mlog = await ManagedLog.open(meta, fake_client, "mid", config=cfg, cache=EntryCache())
    await asyncio.gather(*[mlog.append(f"e{i}".encode()) for i in range(10)])
    await mlog.flush()
    first = mlog.ledgers[0].ledger_id
    reader = await ManagedLogReader.open(meta, fake_client, "mid")
    head = await reader.read(Position(first, 0), max_entries=2)
    await mlog.replace_ledgers({first: await _rewrite(mlog, first, b"R")})
    await mlog.trim()  # the replaced copy stays for the grace period
    # the reader's snapshot still names the old copy, which is still there: it reads on
    rest = await reader.read(Position(first, 2), max_entries=2)
    assert [bytes(e.data) for e in head + rest] == [b"e0", b"e1", b"e2", b"e3"]
    await reader.refresh()  # a fresh look sees the rewrite at the same positions
    assert [bytes(e.data) for e in await reader.read(Position(first, 2), max_entries=2)] == [b"Re2", b"Re3"]
    await reader.close()
    await mlog.close()
