"""Segmented-log logic over the in-memory ledger client and the embedded metadata store."""

from __future__ import annotations

import asyncio

import pytest

from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.errors import NoSuchLogError, OwnershipLostError
from store.managed.log import ManagedLog, delete_log
from store.managed.metadata import LogMetadata
from store.managed.names import log_path
from store.managed.position import Position
from store.meta.api import MetaStore
from tests.store.managed.fakes import FakeLedgerClient
from tests.support.clock import FakeClock

CFG = LogConfig(
    ensemble_size=1,
    write_quorum=1,
    ack_quorum=1,
    cursor_ensemble_size=1,
    cursor_write_quorum=1,
    cursor_ack_quorum=1,
    max_entries=10,
    retention_ms=-1,
)


def abandon(mlog: ManagedLog) -> None:
    """Simulate the owner process dying: stop its background tasks, never close it."""
    mlog._timer.cancel()
    for c in mlog.cursors.values():
        c._task.cancel()


async def _append_all(mlog: ManagedLog, payloads: list[bytes]) -> list[Position]:
    return list(await asyncio.gather(*[mlog.append(p) for p in payloads]))


async def test_pipelined_appends_roll_by_count_and_read_back(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    mlog = await ManagedLog.open(meta, fake_client, "t/p-0", config=CFG, cache=EntryCache())
    payloads = [f"m{i}".encode() for i in range(95)]
    positions = await _append_all(mlog, payloads)
    assert positions == sorted(positions) and len(set(positions)) == 95
    assert mlog.last_confirmed == positions[-1]
    await mlog.flush()
    infos = mlog.ledgers
    assert len(infos) == 10 and all(li.entries == 10 for li in infos[:9]) and infos[9].entries == 5
    assert len({p.ledger_id for p in positions}) == 10
    got = await mlog.read(Position(0, 0), max_entries=1000)
    assert [e.data for e in got] == payloads and [e.position for e in got] == positions
    # limits: count, bytes (at least one entry), and a start in the middle of a ledger
    assert len(await mlog.read(positions[13], max_entries=25)) == 25
    assert [e.data for e in await mlog.read(positions[13], max_bytes=5)] == [b"m13", b"m14"]
    assert await mlog.read(mlog.next_position(mlog.last_confirmed)) == []
    await mlog.close()


async def test_reads_from_bookies_when_evicted_and_reopen(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    mlog = await ManagedLog.open(meta, fake_client, "t", config=CFG, cache=EntryCache(max_bytes=3000))
    payloads = [bytes([i % 256]) * 100 for i in range(200)]
    await _append_all(mlog, payloads)
    got = await mlog.read(Position(0, 0), max_entries=10_000, max_bytes=1 << 30)
    assert [e.data for e in got] == payloads
    assert fake_client.reads > 0
    await mlog.close()
    again = await ManagedLog.open(meta, fake_client, "t", cache=EntryCache())
    assert again.config == CFG  # stored with the log
    got = await again.read(Position(0, 0), max_entries=10_000, max_bytes=1 << 30)
    assert [e.data for e in got] == payloads
    assert (await again.append(b"next")).ledger_id == again.current_ledger_id
    await again.close()


async def test_roll_by_size_and_by_age(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    cfg = LogConfig(
        ensemble_size=1, write_quorum=1, ack_quorum=1, max_bytes=1000, max_age_s=0.3, retention_ms=-1
    )
    clock = FakeClock()
    mlog = await ManagedLog.open(meta, fake_client, "s", config=cfg, cache=EntryCache(), clock=clock)
    await _append_all(mlog, [bytes(300)] * 7)  # 4 per ledger (1200 >= 1000)
    await mlog.flush()
    assert [li.entries for li in mlog.ledgers] == [4, 3]
    first = mlog.current_ledger_id
    await clock.advance(0.2)
    await mlog.flush()
    assert mlog.current_ledger_id == first  # younger than max_age_s
    await clock.advance(0.2)  # the age timer rolls the non-empty ledger without any append
    await mlog.flush()
    assert mlog.current_ledger_id != first and mlog.ledgers[-2].entries == 3
    cur = mlog.current_ledger_id
    await clock.advance(1.0)  # an empty ledger never rolls
    await mlog.flush()
    assert mlog.current_ledger_id == cur
    await mlog.close()


async def test_min_age_holds_back_rollover(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    cfg = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=2, min_age_s=3600)
    mlog = await ManagedLog.open(meta, fake_client, "m", config=cfg, cache=EntryCache())
    await _append_all(mlog, [b"x"] * 20)
    assert len(mlog.ledgers) == 1
    await mlog.close()


async def test_tailing_reader_while_ledgers_roll(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    cfg = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=7, retention_ms=-1)
    mlog = await ManagedLog.open(meta, fake_client, "tail", config=cfg, cache=EntryCache())
    n = 500
    seen: list[bytes] = []

    async def reader() -> None:
        pos = mlog.next_position(mlog.last_confirmed)
        while len(seen) < n:
            got = await mlog.read_or_wait(pos, max_entries=13, max_wait=5)
            assert got, "woken without data"
            seen.extend(e.data for e in got)
            pos = mlog.next_position(got[-1].position)

    task = asyncio.create_task(reader())
    for i in range(n):
        mlog.append(f"{i}".encode())
        if i % 37 == 0:
            await asyncio.sleep(0.001)
    await asyncio.wait_for(task, 30)
    assert seen == [f"{i}".encode() for i in range(n)]
    assert len(mlog.ledgers) >= n // 7
    await mlog.close()


async def test_new_owner_fences_the_old_one(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    a = await ManagedLog.open(meta, fake_client, "own", config=CFG, cache=EntryCache())
    acked = await _append_all(a, [f"{i}".encode() for i in range(25)])
    pending = [a.append(b"late") for _ in range(3)]  # in flight when B takes over
    lost: list[Exception] = []
    a.add_ownership_listener(lost.append)
    b = await ManagedLog.open(meta, fake_client, "own", cache=EntryCache())
    results = await asyncio.gather(*pending, return_exceptions=True)
    survivors = [r for r in results if isinstance(r, Position)]
    got = [e.data for e in await b.read(Position(0, 0), max_entries=1000)]
    assert got[:25] == [f"{i}".encode() for i in range(25)] and got[25:] == [b"late"] * len(survivors)
    assert b.current_ledger_id > max(p.ledger_id for p in acked)
    with pytest.raises(OwnershipLostError):
        for _ in range(20):  # A finds out at its next append or rollover at the latest
            await a.append(b"nope")
    assert a.fenced and lost
    assert (await b.append(b"b")).ledger_id == b.current_ledger_id
    abandon(a)
    await b.close()


async def test_metadata_cas_loss_stops_the_owner(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    a = await ManagedLog.open(meta, fake_client, "cas", config=CFG, cache=EntryCache())
    data, stat = await meta.get(log_path("cas"))
    await meta.set(log_path("cas"), data, stat.version)  # someone else wrote the node
    with pytest.raises(OwnershipLostError):
        await a.set_properties({"k": "v"})
    with pytest.raises(OwnershipLostError):
        await a.append(b"x")
    abandon(a)


async def test_properties_and_new_ledger_props(meta: MetaStore, fake_client: FakeLedgerClient) -> None:
    counter = iter(range(100))
    cfg = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, max_entries=3, retention_ms=-1)
    mlog = await ManagedLog.open(
        meta,
        fake_client,
        "props",
        config=cfg,
        cache=EntryCache(),
        new_ledger_props=lambda: {"n": str(next(counter))},
    )
    await _append_all(mlog, [b"x"] * 7)
    await mlog.flush()
    await mlog.set_properties({"a": "1", "b": "2"})
    await mlog.set_properties({"b": None})
    await mlog.set_ledger_properties(mlog.ledgers[0].ledger_id, {"idx": "abc"})
    data, _ = await meta.get(log_path("props"))
    md = LogMetadata.from_bytes(data)
    assert md.props == {"a": "1"}
    assert [li.props.get("n") for li in md.ledgers] == ["0", "1", "2"]
    assert md.ledgers[0].props["idx"] == "abc"
    await mlog.close()


async def test_delete_log_removes_ledgers_and_metadata(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    mlog = await ManagedLog.open(meta, fake_client, "gone", config=CFG, cache=EntryCache())
    await _append_all(mlog, [b"x"] * 25)
    cur = await mlog.open_cursor("c", "earliest")
    await cur.ack([Position(mlog.ledgers[0].ledger_id, 3)])
    await mlog.delete()
    assert fake_client.ledgers == {}
    assert await meta.exists(log_path("gone")) is None
    with pytest.raises(NoSuchLogError):
        await ManagedLog.open(meta, fake_client, "gone", create=False)
    await delete_log(meta, fake_client, "never-existed")


async def test_empty_recovered_tail_is_deleted_only_after_a_grace(
    meta: MetaStore, fake_client: FakeLedgerClient
) -> None:
    cfg = LogConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, retention_ms=-1, deferred_delete_s=0.3)
    a = await ManagedLog.open(meta, fake_client, "empty", config=cfg, cache=EntryCache())
    tail = a.current_ledger_id
    b = await ManagedLog.open(meta, fake_client, "empty", cache=EntryCache())
    assert tail not in [li.ledger_id for li in b.ledgers]
    # still on the bookies, fenced: the paused owner's late appends fail instead of landing
    # in a ledger nobody lists
    assert tail in fake_client.ledgers
    with pytest.raises(OwnershipLostError):
        await a.append(b"late")
    assert await b.trim() == []
    await asyncio.sleep(0.4)
    assert await b.trim() == [tail]
    assert tail not in fake_client.ledgers
    abandon(a)
    await b.close()
