"""Cursors and retention over the in-memory ledger client and the embedded metadata store."""

from __future__ import annotations

import asyncio
import random

import pytest

from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.cursor_codec import decode_meta
from store.managed.errors import NoSuchCursorError, OwnershipLostError
from store.managed.log import ManagedLog
from store.managed.position import Position
from store.managed.readonly import ManagedLogReader
from store.meta.api import MetaStore
from tests.store.managed.fakes import FakeLedgerClient
from tests.store.managed.test_log import abandon

ONE = dict(
    ensemble_size=1,
    write_quorum=1,
    ack_quorum=1,
    cursor_ensemble_size=1,
    cursor_write_quorum=1,
    cursor_ack_quorum=1,
)


async def _fill(mlog: ManagedLog, n: int, size: int = 10) -> list[Position]:
    return list(await asyncio.gather(*[mlog.append(bytes(size)) for _ in range(n)]))


async def test_acks_advance_mark_delete_across_ledgers(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    mlog = await ManagedLog.open(
        meta, fake_client, "c", config=LogConfig(**ONE, max_entries=5, retention_ms=-1), cache=EntryCache()
    )
    cur = await mlog.open_cursor("sub", "earliest")
    pos = await _fill(mlog, 12)
    assert cur.backlog() == 12 and cur.first_unacked() == pos[0]
    await cur.ack([pos[1], pos[2], pos[6], pos[5]])
    assert cur.mark_delete < pos[0] and cur.backlog() == 8
    assert cur.acked_ranges() == [(pos[1].ledger_id, 1, 2), (pos[5].ledger_id, 0, 1)]
    await cur.ack([pos[0]])
    assert cur.mark_delete == pos[2]
    await cur.ack([pos[3], pos[4]])  # closes the gap up to the end of ledger 1, then into ledger 2
    assert cur.mark_delete == pos[6] and cur.acked_ranges() == [] and cur.backlog() == 5
    assert cur.is_acked(pos[4]) and not cur.is_acked(pos[7])
    await cur.mark_delete_to(pos[9])
    assert cur.mark_delete == pos[9] and cur.backlog() == 2
    await cur.seek(pos[3])
    assert cur.mark_delete == Position(pos[3].ledger_id, 2) and cur.backlog() == 9
    await cur.set_properties({"a": "1", "b": "2"})
    await cur.set_properties({"a": None})
    latest = await mlog.open_cursor("late")  # "latest": nothing to consume yet
    assert latest.backlog() == 0 and latest.mark_delete == pos[-1]
    state = cur.state()
    await mlog.close()
    again = await ManagedLog.open(meta, fake_client, "c", cache=EntryCache())
    assert again.cursors["sub"].state() == state and again.cursors["sub"].properties == {"b": "2"}
    assert set(again.cursors) == {"sub", "late"}
    await again.delete_cursor("late")
    with pytest.raises(NoSuchCursorError):
        await again.delete_cursor("late")
    await again.close()


async def test_random_acks_then_crash_recover_exactly(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    cfg = LogConfig(**ONE, max_entries=20_000, retention_ms=-1)
    mlog = await ManagedLog.open(meta, fake_client, "big", config=cfg, cache=EntryCache())
    cur = await mlog.open_cursor("sub", "earliest")
    pos = await _fill(mlog, 120_000, size=1)
    rng = random.Random(7)
    order = rng.sample(range(len(pos)), 100_000)
    for i in range(0, len(order), 1000):
        # several batches in flight at once: they pipeline into the cursor ledger
        await asyncio.gather(
            *(cur.ack([pos[j] for j in order[k : k + 250]]) for k in range(i, i + 1000, 250))
        )
    expect = cur.state()
    assert len(expect.acked) > 1000
    abandon(mlog)  # crash: no clean close
    again = await ManagedLog.open(meta, fake_client, "big", cache=EntryCache())
    rec = again.cursors["sub"]
    assert rec.state() == expect
    acked = set(order)
    assert rec.backlog() == len(pos) - len(acked)
    # What was stored is proportional to the ranges, not to the 100k acknowledgements.
    n_ranges = len(expect.acked)
    assert rec.recovered_ledger_bytes <= 6 * 24 * n_ranges + 400_000
    # Acknowledge everything else: one range left, so the stored state collapses.
    rest = [pos[j] for j in range(len(pos)) if j not in acked]
    for i in range(0, len(rest), 5000):
        await rec.ack(rest[i : i + 5000])
    assert rec.mark_delete == pos[-1] and rec.acked_ranges() == []
    await rec.set_properties({"x": "y"})
    assert rec.persisted_bytes < 300_000
    await again.close()
    lid, complete, snap = decode_meta((await meta.get(again.cursor_path("sub")))[0])
    assert lid == -1 and complete and snap.mark_delete == pos[-1]


async def test_retention_keeps_what_a_cursor_needs(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    cfg = LogConfig(**ONE, max_entries=10, retention_ms=0)
    mlog = await ManagedLog.open(meta, fake_client, "r", config=cfg, cache=EntryCache())
    slow = await mlog.open_cursor("slow", "earliest")
    fast = await mlog.open_cursor("fast", "earliest")
    pos = await _fill(mlog, 50)
    await mlog.flush()
    assert await mlog.trim() == []
    await fast.mark_delete_to(pos[-1])
    await slow.mark_delete_to(pos[24])  # wholly consumed: ledgers of pos[0..19]
    await asyncio.sleep(0)
    await mlog.trim()
    ids = [li.ledger_id for li in mlog.ledgers]
    assert ids[0] == pos[20].ledger_id
    assert pos[0].ledger_id not in fake_client.ledgers and pos[20].ledger_id in fake_client.ledgers
    got = await mlog.read(Position(0, 0), max_entries=100)
    assert got[0].position == pos[20] and len(got) == 30
    assert slow.backlog() == 25
    await mlog.delete_cursor("slow")
    await asyncio.sleep(0)
    await mlog.trim()
    assert [li.ledger_id for li in mlog.ledgers] == [mlog.current_ledger_id]
    await mlog.close()


async def test_time_and_size_retention_without_cursors(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    cfg = LogConfig(**ONE, max_entries=10, retention_ms=-1, retention_bytes=250)
    mlog = await ManagedLog.open(meta, fake_client, "sz", config=cfg, cache=EntryCache())
    await _fill(mlog, 60, size=10)  # 6 ledgers of 100 bytes (the last one current, empty)
    await mlog.flush()
    await mlog.trim()
    assert sum(li.size for li in mlog.ledgers) >= 250
    assert len([li for li in mlog.ledgers if li.entries]) == 3  # 300 bytes kept, 200 would be too few
    await mlog.close()
    cfg_t = LogConfig(**ONE, max_entries=10, retention_ms=300, retention_bytes=-1)
    tlog = await ManagedLog.open(meta, fake_client, "tm", config=cfg_t, cache=EntryCache())
    await _fill(tlog, 30)
    await tlog.flush()
    assert len(tlog.ledgers) == 4 and await tlog.trim() == []
    await asyncio.sleep(0.4)
    assert len(await tlog.trim()) == 3
    await tlog.close()


async def test_truncate_before_moves_cursors_and_deletes(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    cfg = LogConfig(**ONE, max_entries=10, retention_ms=-1)
    mlog = await ManagedLog.open(meta, fake_client, "tr", config=cfg, cache=EntryCache())
    cur = await mlog.open_cursor("c", "earliest")
    pos = await _fill(mlog, 35)
    await mlog.flush()
    deleted = await mlog.truncate_before(pos[23])
    assert deleted == [pos[0].ledger_id, pos[10].ledger_id]
    assert cur.mark_delete == pos[22] and cur.backlog() == 12
    got = await mlog.read(Position(0, 0))
    assert got[0].position == pos[23]
    assert mlog.start == pos[23]
    await mlog.close()
    again = await ManagedLog.open(meta, fake_client, "tr", cache=EntryCache())
    assert again.start == pos[23] and (await again.read(Position(0, 0)))[0].position == pos[23]
    await again.close()


async def test_previous_owner_cursor_cannot_write_after_takeover(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    cfg = LogConfig(**ONE, max_entries=100, retention_ms=-1)
    a = await ManagedLog.open(meta, fake_client, "two", config=cfg, cache=EntryCache())
    ca = await a.open_cursor("c", "earliest")
    pos = await _fill(a, 10)
    await ca.ack([pos[0], pos[3]])
    cd = await a.open_cursor("d", "earliest")  # no cursor ledger yet: its first write switches
    b = await ManagedLog.open(meta, fake_client, "two", cache=EntryCache())
    cb = b.cursors["c"]
    assert cb.state() == ca.state()
    with pytest.raises(OwnershipLostError):
        await ca.ack([pos[5]])  # its cursor ledger was fenced by B's recovery
    with pytest.raises(OwnershipLostError):
        await cd.ack([pos[0]])  # B claimed the node: the switch to a new ledger loses its CAS
    await cb.ack([pos[1], pos[2]])
    assert cb.mark_delete == pos[3]
    abandon(a)
    await b.close()


async def test_reader_without_ownership(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    cfg = LogConfig(**ONE, max_entries=10, retention_ms=-1)
    owner = await ManagedLog.open(meta, fake_client, "ro", config=cfg, cache=EntryCache())
    pos = await _fill(owner, 25)
    reader = await ManagedLogReader.open(meta, fake_client, "ro")
    got = await reader.read(Position(0, 0), max_entries=100)
    assert [e.position for e in got] == pos
    more = await _fill(owner, 20)  # owner keeps writing (nothing was fenced), ledgers roll
    await reader.refresh()
    got = await reader.read(Position(0, 0), max_entries=100)
    assert [e.position for e in got] == pos + more
    assert [e.position for e in await reader.read(more[3], max_entries=4)] == more[3:7]
    await reader.close()
    await owner.close()
