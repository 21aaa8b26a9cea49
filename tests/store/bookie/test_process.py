"""Real `quire bookie` processes: crash replay, torn journal, fencing, cookies, registration."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from store import layout
from store.bookie import journal as jr
from store.bookie.client import BookieClient
from store.bookie.entry import pack_entry
from store.bookie.errors import FencedError, NoEntryError
from tests.support.bookies import BookieCluster, start_bookies, stop_all
from tests.support.embedded_meta import db_file, stop_outside_write

pytestmark = pytest.mark.slow


async def test_acknowledged_adds_survive_sigkill(bookie_cluster: BookieCluster, meta_url: str) -> None:
    (b,) = await bookie_cluster(1, meta_url, racks=["rack-a"])
    meta = await bookie_cluster.meta(meta_url)
    raw, stat = await meta.get(layout.bookie_available(b.address))
    info = json.loads(raw)
    assert info["address"] == b.address and info["rack"] == "rack-a"
    assert info["disk_free_bytes"] > 0 and info["disk_used_bytes"] > 0 and info["instance_id"]
    assert stat.ephemeral_owner != 0
    c = BookieClient(b.address)
    entries = {lid: [pack_entry(lid, i, i - 1, b"%d-%d" % (lid, i) * 50) for i in range(300)] for lid in (1, 2)}
    await asyncio.gather(*(c.add(lid, e) for lid, es in entries.items() for e in es))
    b.kill()
    await b.restart()
    for lid, es in entries.items():
        assert await c.read_range(lid, 0, 299, 1 << 30) == es
        assert await c.read_lac(lid) == (298, 299)
    await c.close()


def _last_record_end(path: Path) -> int:
    """Where the file's last record other than page padding ends."""
    data, pos, end = path.read_bytes(), len(jr.MAGIC), len(jr.MAGIC)
    while pos + jr.REC_SIZE <= len(data):
        n, _crc, rtype = jr.REC.unpack_from(data, pos)
        if n == 0 and rtype == 0:
            break
        pos += jr.REC_SIZE + n
        if rtype != jr.REC_PAD:
            end = pos
    return end


async def test_torn_journal_tail_restarts_cleanly(bookie_cluster: BookieCluster, meta_url: str) -> None:
    (b,) = await bookie_cluster(1, meta_url)
    c = BookieClient(b.address)
    entries = [pack_entry(7, i, i - 1, bytes([i]) * 200) for i in range(10)]
    for e in entries:
        await c.add(7, e)
    flushed = (b.data_dir / "ledgers" / "7.idx").exists()
    b.kill()
    _fid, newest = jr.journal_files(b.data_dir / "journal")[-1]
    newest.write_bytes(newest.read_bytes()[: _last_record_end(newest) - 5])  # tear the last record
    await b.restart()
    assert await c.read_range(7, 0, 8, 1 << 30) == entries[:9]
    if not flushed:  # the torn record was the only copy of entry 9
        with pytest.raises(NoEntryError):
            await c.read(7, 9)
    # Garbage appended after the last record is dropped too.
    await c.add(7, pack_entry(7, 9, 8, b"again"))
    b.kill()
    _fid, newest = jr.journal_files(b.data_dir / "journal")[-1]
    newest.write_bytes(newest.read_bytes() + b"\x00\x00\x10\x00garbage")
    await b.restart()
    assert await c.read(7, 9) == pack_entry(7, 9, 8, b"again")
    await c.add(7, pack_entry(7, 10, 9, b"more"))
    assert await c.read_lac(7) == (9, 10)
    await c.close()


async def test_fencing_is_durable_across_restart(bookie_cluster: BookieCluster, meta_url: str) -> None:
    (b,) = await bookie_cluster(1, meta_url)
    c = BookieClient(b.address)
    await c.add(3, pack_entry(3, 0, -1, b"a"))
    assert await c.fence(3) == (-1, 0)
    assert await c.fence(33) == (-1, -1)  # a ledger this bookie never saw
    b.kill()
    await b.restart()
    for lid in (3, 33):
        with pytest.raises(FencedError):
            await c.add(lid, pack_entry(lid, 1, 0, b"old writer"))
    await c.add(3, pack_entry(3, 1, 0, b"recovery"), recovery=True)
    # SIGTERM: clean shutdown, nothing left to replay; the ephemeral node goes away.
    assert b.terminate() == 0
    meta = await bookie_cluster.meta(meta_url)
    assert await meta.exists(layout.bookie_available(b.address)) is None
    await b.restart()
    assert "0 journal records replayed" in b.output()
    assert await c.read(3, 1) == pack_entry(3, 1, 0, b"recovery")
    with pytest.raises(FencedError):
        await c.add(3, pack_entry(3, 2, 1, b"old writer"))
    await c.close()


async def test_wiped_data_dir_is_refused(bookie_cluster: BookieCluster, meta_url: str) -> None:
    (b,) = await bookie_cluster(1, meta_url)
    assert b.terminate() == 0
    shutil.rmtree(b.data_dir)
    b.spawn()
    assert b.wait_exit() != 0
    out = b.output()
    assert "no cookie" in out and "wiped" in out, out[-2000:]


async def test_swapped_dirs_are_refused(bookie_cluster: BookieCluster, meta_url: str) -> None:
    x, y = await bookie_cluster(2, meta_url)
    assert x.terminate() == 0 and y.terminate() == 0
    tmp = x.data_dir.with_name("swap")
    x.data_dir.rename(tmp)
    y.data_dir.rename(x.data_dir)
    tmp.rename(y.data_dir)
    for b, other in ((x, y), (y, x)):
        b.spawn()
        assert b.wait_exit() != 0
        out = b.output()
        assert f"belongs to bookie {other.address}" in out, out[-2000:]


async def test_bookie_exits_when_its_metadata_session_is_lost(bookie_cluster: BookieCluster, meta_url: str) -> None:
    (b,) = await bookie_cluster(1, meta_url)
    meta = await bookie_cluster.meta(meta_url)
    # Frozen past the 10 s session timeout: it can no longer be trusted as alive.
    if meta_url.startswith("embedded://"):
        await asyncio.to_thread(stop_outside_write, b.stop, b.cont, db_file(meta_url))
    else:
        b.stop()
    deadline = asyncio.get_running_loop().time() + 60
    while await meta.exists(layout.bookie_available(b.address)) is not None:
        assert asyncio.get_running_loop().time() < deadline, "ephemeral node outlived the session"
        await asyncio.sleep(0.5)
    b.cont()
    assert await asyncio.to_thread(b.wait_exit, 60) == 3
    assert "session lost" in b.output()


def test_sync_start_bookies(meta_url: str, tmp_path: Path) -> None:
    bookies = start_bookies(2, meta_url, tmp_path / "sync", racks=["r1", "r2"])
    try:
        assert all(b.alive for b in bookies)
        assert len({b.address for b in bookies}) == 2
    finally:
        stop_all(bookies)
    assert not any(b.alive for b in bookies)


async def test_tuning_flags_and_no_fsync(
    bookie_cluster: BookieCluster, meta_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.support.bookies as support

    real = support.subprocess.Popen
    extra = ["--no-fsync", "--write-cache-mb", "1", "--flush-interval", "0.2", "--journal-batch-wait", "0.001"]
    monkeypatch.setattr(support.subprocess, "Popen", lambda cmd, *a, **k: real([*cmd, *extra], *a, **k))
    b = await bookie_cluster.start_one(meta_url)
    monkeypatch.undo()
    assert "--no-fsync" in b.output() and "UNSAFE" in b.output()  # loudly logged
    c = BookieClient(b.address)
    entries = [pack_entry(3, i, i - 1, bytes([i % 256]) * 8000) for i in range(600)]  # ~5 MB > 1 MB cache
    await asyncio.gather(*(c.add(3, e) for e in entries))
    assert await c.read_range(3, 0, 599, 1 << 30) == entries
    # Small cache, short interval: flushed to the index files already.
    assert (b.data_dir / "ledgers" / "3.idx").exists()
    await c.close()
    assert b.terminate() == 0
