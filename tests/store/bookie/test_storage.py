"""Ledger storage through an in-process Bookie: flush, index, reads from disk, compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.bookie import journal as jr
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.entry import pack_entry, unpack_entry
from store.bookie.errors import DigestMismatchError, FencedError, NoEntryError, NoLedgerError
from store.bookie.protocol import decode_range
from store.bookie.storage import StorageConfig


def _config(**storage: float) -> BookieConfig:
    sc = StorageConfig(flush_interval=3600, compaction_interval=3600, **storage)  # type: ignore[arg-type]
    return BookieConfig(storage=sc, journal_file_size=4096)


def _payload(lid: int, eid: int, n: int = 300) -> bytes:
    return (f"{lid}:{eid}:".encode() * n)[:n]


async def _fill(b: Bookie, lid: int, count: int, n: int = 300) -> None:
    for eid in range(count):
        await b.add(lid, pack_entry(lid, eid, eid - 1, _payload(lid, eid, n)))


def _check(entries: list[bytes], lid: int, first: int, n: int = 300) -> None:
    for i, e in enumerate(entries):
        got_lid, eid, lac, payload = unpack_entry(e, lid, first + i)
        assert (got_lid, eid, lac) == (lid, first + i, first + i - 1)
        assert bytes(payload) == _payload(lid, first + i, n)


async def test_flush_then_read_from_disk_after_journal_is_gone(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    await _fill(b, 1, 100)
    await _fill(b, 2, 50)
    assert len(jr.journal_files(b.journal_dir)) > 3  # small roll size: many journal files
    await b.storage.checkpoint()
    # Entries now live in entry logs + index; the journal before the mark is gone.
    assert len(jr.journal_files(b.journal_dir)) == 1
    assert (tmp_path / "d" / "ledgers" / "1.idx").stat().st_size == 100 * 16
    assert any(p.stat().st_size > 100 * 300 for p in (tmp_path / "d" / "entrylogs").glob("*.log"))
    await b.close()

    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    assert b.replayed == 0
    assert b.read_lac(1) == (98, 99) and b.read_lac(2) == (48, 49)
    _check(await b.read_range(1, 0, 99, 1 << 30), 1, 0)  # from disk, one pread per run
    _check(await b.read_range(2, 10, 49, 1 << 30), 2, 10)
    _check([await b.read(1, 57)], 1, 57)
    _check([await b.read(2, -1)], 2, 49)  # -1: the last entry
    with pytest.raises(NoEntryError):
        await b.read(1, 100)
    with pytest.raises(NoLedgerError):
        await b.read(3, 0)
    await b.close()


async def test_unflushed_entries_replayed_from_journal(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    await _fill(b, 5, 30)
    await b.fence(5)
    await _fill(b, 6, 3)
    await b.delete_ledger(6)
    # Simulate a crash: nothing flushed, journal files left as they are.
    await b.journal.close()
    b.storage._pool.shutdown()
    b.storage.logs.close()

    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    assert b.replayed == 30 + 1 + 3 + 1
    _check(await b.read_range(5, 0, 29, 1 << 30), 5, 0)
    assert b.storage.ledgers[5].fenced
    with pytest.raises(NoLedgerError):
        b.read_lac(6)
    with pytest.raises(FencedError):
        await b.add(5, pack_entry(5, 30, 29, b"late"))
    await b.add(5, pack_entry(5, 30, 29, b"recovery"), recovery=True)
    await b.close()


async def test_read_range_respects_max_bytes(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    await _fill(b, 1, 20, n=1000)
    entry_size = 1000 + 28
    for flushed in (False, True):
        got = await b.read_range(1, 0, 19, 5 * entry_size)
        assert len(got) == 5
        _check(got, 1, 0, n=1000)
        got = await b.read_range(1, 3, 19, 5 * entry_size - 1)
        assert len(got) == 4
        got = await b.read_range(1, 7, 19, 10)  # always at least one whole entry
        assert len(got) == 1
        _check(got, 1, 7, n=1000)
        got = await b.read_range(1, 15, 40, 1 << 20)  # stops at the last entry
        assert len(got) == 5
        with pytest.raises(NoEntryError):
            await b.read_range(1, 20, 25, 1 << 20)
        if not flushed:
            await b.storage.checkpoint()
            b.storage.read_cache.clear()
    await b.close()


async def test_read_range_prefixed_is_read_range_as_the_wire_sends_it(tmp_path: Path) -> None:
    # READ_RANGE's body: runs on disk go out as the one buffer read from the entry log, prefixes
    # and all; cached entries get a prefix each; both in entry order, and nothing is cached.
    b = Bookie(tmp_path / "d", config=_config(entry_log_size=16 << 10))
    await b.start()
    await _fill(b, 1, 60, n=1000)  # ~60 KB over several 16 KB entry logs
    await _fill(b, 2, 5)
    await b.storage.checkpoint()
    for first, last, max_bytes in ((0, 59, 1 << 30), (15, 59, 10 * 1100), (58, 70, 1 << 20), (7, 7, 1)):
        b.storage.read_cache.clear()
        await b.read_range(1, 20, 21, 1 << 20)  # cached entries amid the disk runs
        cached = set(b.storage.read_cache._entries)
        parts = await b.read_range_prefixed(1, first, last, max_bytes)
        assert set(b.storage.read_cache._entries) == cached  # a scan does not fill the read cache
        got = [bytes(e) for e in decode_range(b"".join(parts))]
        assert got == [bytes(e) for e in await b.read_range(1, first, last, max_bytes)]
        _check(got, 1, first, n=1000)
        assert len(parts) < 2 * len(got) or len(got) == 1  # whole runs, not an entry and a prefix each
    with pytest.raises(NoEntryError):
        await b.read_range_prefixed(1, 60, 61, 1 << 20)
    await b.close()


async def test_bad_checksum_refused(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    e = bytearray(pack_entry(1, 0, -1, b"hello"))
    e[-1] ^= 1
    with pytest.raises(DigestMismatchError):
        await b.add(1, bytes(e))
    with pytest.raises(NoLedgerError):
        b.read_lac(1)
    await b.close()


async def test_compaction_frees_space_and_keeps_live_entries(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config(entry_log_size=64 << 10))
    await b.start()
    logs_dir = tmp_path / "d" / "entrylogs"
    # Interleave three ledgers so each entry log holds all of them.
    for round_ in range(6):
        for lid in (1, 2, 3):
            for eid in range(round_ * 10, round_ * 10 + 10):
                await b.add(lid, pack_entry(lid, eid, eid - 1, _payload(lid, eid, 2000)))
        await b.storage.checkpoint()
    size_before = sum(p.stat().st_size for p in logs_dir.glob("*.log"))
    await b.delete_ledger(1)
    await b.delete_ledger(2)
    await b.storage.checkpoint()
    assert not (tmp_path / "d" / "ledgers" / "1.idx").exists()
    n = await b.storage.compact()
    assert n >= 2
    size_after = sum(p.stat().st_size for p in logs_dir.glob("*.log"))
    assert size_after < size_before * 0.5, (size_before, size_after)
    _check(await b.read_range(3, 0, 59, 1 << 30), 3, 0, n=2000)
    await b.close()
    # The moved locations are durable.
    b = Bookie(tmp_path / "d", config=_config(entry_log_size=64 << 10))
    await b.start()
    b.storage.read_cache.clear()
    _check(await b.read_range(3, 0, 59, 1 << 30), 3, 0, n=2000)
    with pytest.raises(NoLedgerError):
        await b.read(1, 0)
    await b.close()


async def test_write_cache_full_triggers_flush_and_reads_continue(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config(write_cache_bytes=20_000))
    await b.start()
    await _fill(b, 9, 200)
    assert b.storage.checkpointer.checkpoints >= 3
    _check(await b.read_range(9, 0, 199, 1 << 30), 9, 0)
    await b.close()


@pytest.mark.parametrize("checkpoint", [False, True], ids=["from-journal", "from-state-file"])
async def test_deleted_ledger_stays_dead_across_restart(tmp_path: Path, checkpoint: bool) -> None:
    # A writer paused across a deletion must not re-create the ledger with its late adds.
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    await _fill(b, 7, 5)
    await b.delete_ledger(7)
    if checkpoint:
        await b.storage.checkpoint()
    with pytest.raises(FencedError):
        await b.add(7, pack_entry(7, 5, 4, _payload(7, 5)))
    await b.close()

    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    for late in (5, 0):
        with pytest.raises(FencedError):
            await b.add(7, pack_entry(7, late, late - 1, _payload(7, late)))
    with pytest.raises(NoLedgerError):
        await b.add(7, pack_entry(7, 5, 4, _payload(7, 5)), recovery=True)
    with pytest.raises(NoLedgerError):
        await b.fence(7)
    with pytest.raises(NoLedgerError):
        await b.read(7, 0)
    await _fill(b, 8, 3)  # other ledgers are unaffected
    await b.close()


async def test_flushed_but_not_checkpointed_entries_survive_a_crash(tmp_path: Path) -> None:
    # A flush moves entries to the entry log and index without moving the journal mark:
    # after a crash the journal replays them again, and nothing is lost or doubled.
    b = Bookie(tmp_path / "d", config=BookieConfig(storage=StorageConfig(flush_interval=3600)))
    await b.start()
    await _fill(b, 1, 40)
    checkpoints = b.storage.checkpointer.checkpoints
    await b.storage.flush()
    assert b.storage.checkpointer.checkpoints == checkpoints  # no mark moved, no journal file deleted
    assert b.storage.cached_bytes == 0 and (tmp_path / "d" / "ledgers" / "1.idx").stat().st_size == 40 * 16
    await _fill(b, 2, 10)
    await b.journal.close()  # crash: no checkpoint
    b.storage._pool.shutdown()
    b.storage.logs.close()

    b = Bookie(tmp_path / "d", config=BookieConfig(storage=StorageConfig(flush_interval=3600)))
    await b.start()
    assert b.replayed == 50
    b.storage.read_cache.clear()
    _check(await b.read_range(1, 0, 39, 1 << 30), 1, 0)
    _check(await b.read_range(2, 0, 9, 1 << 30), 2, 0)
    assert b.read_lac(1) == (38, 39)
    # The first copies of ledger 1 are dead bytes now; live accounting knows it.
    live = sum(b.storage.compactor.live.values())
    assert live == 50 * (300 + 28 + 4)
    await b.close()
