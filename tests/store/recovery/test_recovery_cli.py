"""Auto-recovery as processes run it: workers inside bookies, `quire recovery` auditors taking
over from each other, and the operator's commands (`quire admin recovery status`, `ledgers
under-replicated`, `bookies decommission`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from store.ledger import LedgerClient
from store.meta.api import MetaStore
from store.recovery import marks
from store.recovery.auditor import current_auditor
from tests.store.recovery.conftest import payload, read_all, write_ledger
from tests.support.bookies import ROOT, _env
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


def admin(url: str, *args: str) -> tuple[int, Any]:
    out = subprocess.run([sys.executable, "-m", "quire", "admin", "--meta", url, "--json", *args],
                         capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else out.stderr


async def test_bookies_rereplicate_by_themselves_and_admin_shows_it(
    bookie_cluster: Any, meta: tuple[str, MetaStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIRE_RECOVERY_DELAY_S", "1")
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(5, url)}
    lc = LedgerClient(m)
    ids = [(await write_ledger(lc, 100)).ledger_id for _ in range(3)]
    victim = sorted((await lc.metadata(ids[0])).bookies())[0]
    procs[victim].kill()

    async def drained() -> bool:
        return all([victim not in (await lc.metadata(i)).bookies() for i in ids])

    await eventually(drained, within=90)
    await eventually(lambda: _no_marks(m), within=30)
    for i in ids:
        assert await read_all(m, i) == [payload(i, n) for n in range(100)]
    code, doc = admin(url, "recovery", "status")
    assert code == 0, doc
    assert doc["auditor"].startswith("bookie 127.0.0.1:") and doc["auditor"] != f"bookie {victim}"
    assert doc["under_replicated"] == 0 and doc["ledgers_rereplicated"] >= 1 and doc["bytes_rereplicated"] > 0
    code, doc = admin(url, "ledgers", "under-replicated")
    assert code == 0 and doc == []

    # Decommission drains a live bookie through the same path.
    leaving = sorted((await lc.metadata(ids[1])).bookies())[0]
    code, doc = admin(url, "bookies", "decommission", leaving, "--wait", "90")
    assert code == 0, doc
    assert doc["remaining"] == [] and doc["ledgers"] >= 1
    for i in ids:
        assert leaving not in (await lc.metadata(i)).bookies()
        assert await read_all(m, i) == [payload(i, n) for n in range(100)]
    for _ in range(5):  # and placement no longer picks it for new ledgers
        w = await lc.create(3, 3, 2)
        assert leaving not in w.metadata.ensembles[0][1]
        await w.close()
    code, doc = admin(url, "recovery", "status")
    assert code == 0 and doc["decommissioning"] == [leaving]
    await lc.close()


def spawn_recovery(url: str, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "quire", "--log-level", "INFO", "recovery", "--meta", url],
                                stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)


async def _no_marks(m: MetaStore) -> bool:
    return await marks.marked_ledgers(m) == []


async def test_second_auditor_takes_over_when_the_first_dies(tmp_path: Path, meta: tuple[str, MetaStore]) -> None:
    url, m = meta
    procs = []
    try:
        for i in range(2):
            procs.append(spawn_recovery(url, tmp_path / f"recovery-{i}.log"))

        async def elected() -> bool:
            return await current_auditor(m) is not None

        await eventually(elected)
        first = await current_auditor(m)
        assert first is not None
        pids = {p.pid: p for p in procs}
        holder = pids[int(first.rsplit(":", 1)[1])]
        other = next(p for p in procs if p is not holder)
        # Only one is active: the other's candidacy leaves the node alone.
        assert await current_auditor(m) == first
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()

        async def taken_over() -> bool:
            now = await current_auditor(m)
            return now is not None and now.endswith(f":{other.pid}")

        await eventually(taken_over, within=60)
        assert other.poll() is None
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
