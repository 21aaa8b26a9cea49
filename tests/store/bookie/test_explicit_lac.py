"""WRITE_LAC on the bookie: it raises READ_LAC answers, wakes long polls, is refused on fenced
or deleted ledgers, and is journaled (replayed after a crash, checkpointed on a clean stop)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.bookie import journal as jr
from store.bookie import protocol as p
from store.bookie.bookie import Bookie, BookieConfig
from store.bookie.client import BookieClient
from store.bookie.entry import pack_entry
from store.bookie.errors import BadRequestError, FencedError, NoEntryError, NoLedgerError
from store.bookie.server import BookieServer
from store.bookie.storage import StorageConfig
from tests.support.bookies import BookieCluster


def _config() -> BookieConfig:
    return BookieConfig(storage=StorageConfig(flush_interval=3600, compaction_interval=3600))


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Bookie, BookieClient]]:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    s = BookieServer(b)
    await s.listen()
    c = BookieClient(s.address, request_timeout=5)
    yield b, c
    await c.close()
    await s.close()
    await b.close()


async def _add(c: BookieClient, lid: int, n: int) -> None:
    for i in range(n):
        await c.add(lid, pack_entry(lid, i, i - 1, b"e%d" % i))


async def test_write_lac_raises_read_lac_and_never_lowers_it(served: tuple[Bookie, BookieClient]) -> None:
    _, c = served
    await _add(c, 5, 5)
    assert await c.read_lac(5) == (3, 4)  # piggybacked: one behind
    await c.write_lac(5, 4)
    assert await c.read_lac(5) == (4, 4)
    await c.write_lac(5, 2)  # older news changes nothing
    assert await c.read_lac(5) == (4, 4)
    await c.add(5, pack_entry(5, 5, 4, b"e5"))
    assert await c.read_lac(5) == (4, 5)
    with pytest.raises(BadRequestError):
        await c.write_lac(5, -7)


async def test_write_lac_wakes_long_polls(served: tuple[Bookie, BookieClient]) -> None:
    _, c = served
    await _add(c, 6, 3)
    poll = asyncio.ensure_future(c.wait_lac(6, 1, 30))
    await asyncio.sleep(0.05)
    assert not poll.done()
    await c.write_lac(6, 2)
    assert await asyncio.wait_for(poll, 10) == 2
    # A poll on a ledger this bookie has not seen yet is woken by a WRITE_LAC too.
    parked = asyncio.ensure_future(c.wait_lac(7, -1, 30))
    await asyncio.sleep(0.05)
    await c.write_lac(7, 0)
    assert await asyncio.wait_for(parked, 10) == 0
    assert await c.read_lac(7) == (0, -1)
    with pytest.raises(NoEntryError):
        await c.read(7, -1)


async def test_write_lac_refused_on_fenced_and_deleted_ledgers(served: tuple[Bookie, BookieClient]) -> None:
    _, c = served
    await _add(c, 8, 3)
    assert await c.fence(8) == (1, 2)
    with pytest.raises(FencedError):
        await c.write_lac(8, 2)
    assert await c.read_lac(8) == (1, 2)
    await _add(c, 9, 2)
    await c.delete_ledger(9)
    with pytest.raises(NoLedgerError):
        await c.write_lac(9, 1)


async def test_explicit_lac_is_checkpointed_on_clean_stop(tmp_path: Path) -> None:
    b = Bookie(tmp_path / "d", config=_config())
    await b.start()
    await b.add(3, pack_entry(3, 0, -1, b"x"))
    await b.add(3, pack_entry(3, 1, 0, b"y"))
    await b.write_lac(3, 1)
    await b.close()
    b2 = Bookie(tmp_path / "d", config=_config())
    await b2.start()
    try:
        assert b2.read_lac(3) == (1, 1)
    finally:
        await b2.close()


@pytest.mark.slow
async def test_explicit_lac_survives_sigkill_by_journal_replay(
    bookie_cluster: BookieCluster, tmp_path: Path
) -> None:
    url = f"embedded://{tmp_path / 'meta'}"
    (b,) = await bookie_cluster(1, url)
    c = BookieClient(b.address)
    try:
        await _add(c, 11, 4)
        await c.write_lac(11, 3)
        b.kill()
        records: list[tuple[int, bytes]] = []
        jr.replay(b.data_dir / "journal", jr.JournalMark(0, 0), lambda t, pl: records.append((t, bytes(pl))))
        assert (jr.REC_LAC, p.WRITE_LAC_REQ.pack(11, 3)) in records
        await b.restart()
        assert await c.read_lac(11) == (3, 3)
        # Fenced after the restart: still refused.
        await c.fence(11)
        with pytest.raises(FencedError):
            await c.write_lac(11, 3)
    finally:
        await c.close()
