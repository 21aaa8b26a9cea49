"""A full disk turns a bookie read-only (and back); a wiped disk is refused until formatted,
then auto-recovery's sampled check refills it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from store.bookie.bookie import Bookie
from store.bookie.disk import DiskConfig, DiskMonitor
from store.bookie.entry import pack_entry, unpack_entry
from store.bookie.errors import ReadOnlyError, Status
from store.bookie.registration import Registration, check_cookie
from store.bookie.server import BookieServer
from store.ledger import LedgerClient
from store.ledger.body import unwrap
from store.ledger.placement import available_bookies
from store.meta.api import MetaStore
from store.recovery import marks
from store.recovery.auditor import Auditor
from store.recovery.worker import ReplicationWorker
from tests.store.recovery.conftest import gone, payload, read_all, write_ledger
from tests.support.bookies import ROOT, _env
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


async def test_full_disk_makes_the_bookie_read_only_and_writers_change_ensemble(
    bookie_cluster: Any, meta: tuple[str, MetaStore], tmp_path: Path
) -> None:
    url, m = meta
    await bookie_cluster(3, url)
    # One bookie in this process, with a fake disk-usage reading.
    bookie = Bookie(tmp_path / "inproc")
    server = BookieServer(bookie)
    await server.listen(start_serving=False)
    await bookie.start()
    await server.start_serving()
    iid = await check_cookie(m, server.address, bookie.data_dir, bookie.journal_dir)
    reg = Registration(m, server.address, None, iid, bookie.data_dir, bookie.journal_dir)
    await reg.register()
    used = [0.5]

    def mode(read_only: bool) -> None:
        bookie.read_only = reg.read_only = read_only

    monitor = DiskMonitor(lambda: used[0], DiskConfig(threshold=0.95, lwm=0.90), mode)
    lc = LedgerClient(m)
    try:
        w = None
        for _ in range(30):  # a ledger whose ensemble includes the in-process bookie
            w = await lc.create(3, 3, 2)
            if server.address in w.metadata.ensembles[0][1]:
                break
            await w.close()
        assert w is not None and server.address in w.metadata.ensembles[0][1]
        await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(20)))

        used[0] = 0.96
        assert monitor.check() and bookie.read_only
        await reg.refresh()
        client = lc.env.bookies.get(server.address)
        with pytest.raises(ReadOnlyError, match="read-only") as exc:
            await client.add(w.ledger_id, pack_entry(w.ledger_id, 20, 19, b"x"))
        assert exc.value.status == Status.READ_ONLY
        # Reads still served.
        assert bytes(unwrap(unpack_entry(await client.read(w.ledger_id, 3), w.ledger_id, 3)[3])[1]) == payload(
            w.ledger_id, 3)
        assert any(b.read_only for b in await available_bookies(m) if b.address == server.address)

        # The writer gets READ_ONLY, changes ensemble, and loses nothing.
        await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(20, 40)))
        # With AQ=2 the adds can be acknowledged before the READ_ONLY answer's ensemble change lands.
        await eventually(lambda: server.address not in w.metadata.ensembles[-1][1], what="ensemble change")
        await w.close()
        assert await read_all(m, w.ledger_id) == [payload(w.ledger_id, i) for i in range(40)]
        # Placement skips it for new ledgers: only the 3 process bookies are writable.
        for _ in range(5):
            w2 = await lc.create(3, 3, 2)
            assert server.address not in w2.metadata.ensembles[0][1]
            await w2.close()

        used[0] = 0.92  # between the marks: still read-only (hysteresis)
        assert monitor.check()
        used[0] = 0.80
        assert not monitor.check() and not bookie.read_only
        await reg.refresh()
        assert not any(b.read_only for b in await available_bookies(m))
        w3 = await lc.create(3, 3, 2)
        await w3.close()
        await client.add(w.ledger_id + 1000, pack_entry(w.ledger_id + 1000, 0, -1, b"writable again"))
    finally:
        await lc.close()
        await reg.unregister()
        await server.close()
        await bookie.close()


def quire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "quire", *args], capture_output=True, text=True, env=_env(),
                          cwd=ROOT, timeout=120)


async def test_wiped_disk_refused_until_formatted_then_refilled(
    bookie_cluster: Any, meta: tuple[str, MetaStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIRE_RECOVERY_ENABLE", "false")  # this test drives the auditor and worker itself
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(4, url)}
    lc = LedgerClient(m)
    ids = [(await write_ledger(lc, 120)).ledger_id for _ in range(3)]
    victim = procs[sorted((await lc.metadata(ids[0])).bookies())[0]]
    on_victim = [i for i in ids if victim.address in (await lc.metadata(i)).bookies()]
    victim.kill()
    shutil.rmtree(victim.data_dir)
    victim.spawn()
    code = await asyncio.to_thread(victim.wait_exit)
    assert code != 0
    assert "disk was wiped or replaced" in victim.output() and "quire bookie format" in victim.output()

    await eventually(lambda: gone(m, victim.address))
    fmt = quire("bookie", "format", "--data-dir", str(victim.data_dir), "--port", str(victim.port), "--meta", url)
    assert fmt.returncode == 0, fmt.stderr
    assert "formatted" in fmt.stdout
    await victim.start(m)

    auditor = Auditor(lc.env, "t", delay_s=30.0)
    assert await auditor.audit_bookies() == 0  # it is back: not lost
    assert await auditor.check_entries() == len(on_victim)  # but it lost its copies
    for d in await asyncio.gather(*(marks.get_mark(m, i) for i in on_victim)):
        assert d is not None and d.bookies[victim.address]["reason"] == "check"
    ensembles = {i: (await lc.metadata(i)).ensembles for i in ids}
    assert await ReplicationWorker(lc.env, "w").run_once() == len(on_victim)
    client = lc.env.bookies.get(victim.address)
    for i in on_victim:
        assert (await lc.metadata(i)).ensembles == ensembles[i]  # refilled in place
        for n in range(120):
            assert bytes(unwrap(unpack_entry(await client.read(i, n), i, n)[3])[1]) == payload(i, n)
    assert await auditor.check_entries() == 0
    await lc.close()


async def test_refill_reads_from_another_bookie_being_refilled(
    bookie_cluster: Any, meta: tuple[str, MetaStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a ledger marked for two live bookies (a wiped one, one whose sampled check
    failed) and with its third bookie gone could not be re-replicated: the worker read entries
    only from bookies it was not writing to, and found none ("no surviving replica ... from []"),
    though the second suspect held every entry."""
    monkeypatch.setenv("QUIRE_RECOVERY_ENABLE", "false")
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(5, url)}
    lc = LedgerClient(m)
    lid = (await write_ledger(lc, 40)).ledger_id
    wiped, suspect, lost = (procs[a] for a in (await lc.metadata(lid)).ensembles[0][1])
    wiped.kill()
    shutil.rmtree(wiped.data_dir)
    await eventually(lambda: gone(m, wiped.address))
    fmt = quire("bookie", "format", "--data-dir", str(wiped.data_dir), "--port", str(wiped.port), "--meta", url)
    assert fmt.returncode == 0, fmt.stderr
    await wiped.start(m)
    lost.kill()
    await eventually(lambda: gone(m, lost.address))
    await marks.mark(m, lid, {wiped.address: (marks.now_ms(), marks.CHECK),
                              suspect.address: (marks.now_ms(), marks.CHECK)})
    assert await ReplicationWorker(lc.env, "w").process(lid)
    md = await lc.metadata(lid)
    assert lost.address not in md.bookies() and {wiped.address, suspect.address} <= md.bookies()
    for addr in md.ensembles[0][1]:
        client = lc.env.bookies.get(addr)
        for n in range(40):
            assert bytes(unwrap(unpack_entry(await client.read(lid, n), lid, n)[3])[1]) == payload(lid, n)
    await lc.close()
