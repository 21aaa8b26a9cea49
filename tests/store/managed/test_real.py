"""Segmented logs over real bookie processes; owners that die run in their own process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from store.ledger.client import LedgerClient
from store.ledger.errors import NoSuchLedgerError
from store.managed.cache import EntryCache
from store.managed.config import LogConfig
from store.managed.log import ManagedLog
from store.managed.position import Entry, Position
from store.managed.readonly import ManagedLogReader
from store.meta.api import MetaStore
from store.meta.factory import open_meta

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


class Child:
    """A child process whose stdout lines we read as they come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    async def read_until(self, pred: Any, within: float) -> None:
        async def go() -> None:
            assert self.proc.stdout is not None
            while not pred():
                line = await self.proc.stdout.readline()
                if not line:
                    raise AssertionError(f"child exited early: {self.lines[-5:]}")
                self.lines.append(line.decode().strip())

        await asyncio.wait_for(go(), within)

    async def drain(self, within: float = 60) -> None:
        """Read to EOF (after the child died or exited)."""
        assert self.proc.stdout is not None
        data = await asyncio.wait_for(self.proc.stdout.read(), within)
        self.lines += [x for x in data.decode().splitlines() if x]

    def acks(self) -> dict[int, Position]:
        out = {}
        for line in self.lines:
            if line.startswith("ACK "):
                _, s, lid, eid = line.split()
                out[int(s)] = Position(int(lid), int(eid))
        return out

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
                os.kill(self.proc.pid, signal.SIGKILL)


class Children(list[Child]):
    log_dir: Path


@pytest.fixture
async def children(tmp_path: Path) -> AsyncIterator[Children]:
    out = Children()
    out.log_dir = tmp_path
    try:
        yield out
    finally:
        for c in out:
            c.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.proc.wait(), 10)


async def spawn(children: Children, *args: str) -> Child:
    """Start an owner_proc child; its stderr goes to owner-<n>.log in the test's tmp dir."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with (children.log_dir / f"owner-{len(children)}.log").open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.store.managed.owner_proc",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            stdin=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=str(ROOT),
        )
    child = Child(proc)
    children.append(child)
    return child


@pytest.fixture
async def store(meta_url: str) -> AsyncIterator[tuple[MetaStore, LedgerClient]]:
    meta = open_meta(meta_url)
    await meta.start()
    client = LedgerClient(meta)
    try:
        yield meta, client
    finally:
        await client.close()
        await meta.close()


async def read_all(mlog: ManagedLog) -> list[Entry]:
    out: list[Entry] = []
    pos = Position(0, 0)
    while True:
        got = await mlog.read(pos, max_entries=500, max_bytes=1 << 22)
        if not got:
            return out
        out += got
        pos = mlog.next_position(got[-1].position)


def check_acked_present(entries: list[Entry], acks: dict[int, Position]) -> None:
    seqs = [int(e.data) for e in entries]
    assert seqs == list(range(len(seqs))), "entries out of order, duplicated or with gaps"
    assert acks and max(acks) < len(seqs), "an acknowledged entry is missing"
    for s, p in acks.items():
        assert entries[s].position == p


async def test_owner_sigkilled_mid_stream_new_owner_has_every_ack(
    bookie_cluster: Any, meta_url: str, store: tuple[MetaStore, LedgerClient], children: Children
) -> None:
    await bookie_cluster(3, meta_url)
    meta, client = store
    a = await spawn(children, "append", "--meta", meta_url, "--log", "topic/part-0")
    await a.read_until(lambda: len(a.acks()) >= 300, 120)
    os.kill(a.proc.pid, signal.SIGKILL)
    await a.proc.wait()
    await a.drain()
    acks = a.acks()
    b = await ManagedLog.open(meta, client, "topic/part-0", cache=EntryCache())
    entries = await read_all(b)
    check_acked_present(entries, acks)
    assert len({p.ledger_id for p in acks.values()}) >= 3  # it rolled while appending
    assert b.current_ledger_id > max(p.ledger_id for p in acks.values())  # a new ledger
    assert (await b.append(b"next")).ledger_id == b.current_ledger_id
    await b.close()


# ZooKeeper only: a SIGSTOPped process can freeze while holding the embedded (SQLite) store's
# write lock, which blocks every other process until it resumes.
@pytest.mark.parametrize("meta_url", ["zk"], indirect=True)
async def test_sigstopped_owner_cannot_append_after_takeover(
    bookie_cluster: Any, meta_url: str, store: tuple[MetaStore, LedgerClient], children: Children
) -> None:
    await bookie_cluster(3, meta_url)
    meta, client = store
    a = await spawn(children, "append", "--meta", meta_url, "--log", "frozen")
    await a.read_until(lambda: len(a.acks()) >= 200, 120)
    os.kill(a.proc.pid, signal.SIGSTOP)
    b = await ManagedLog.open(meta, client, "frozen", cache=EntryCache())
    os.kill(a.proc.pid, signal.SIGCONT)
    assert await asyncio.wait_for(a.proc.wait(), 60) == 3
    await a.drain()
    assert "LOST" in a.lines
    entries = await read_all(b)
    check_acked_present(entries, a.acks())  # acks it got late were recovered entries too
    p = await b.append(b"b-1")
    assert p > entries[-1].position
    assert [e.data for e in await read_all(b)][len(entries) :] == [b"b-1"]
    await b.close()


@pytest.mark.parametrize("meta_url", ["embedded"], indirect=True)
async def test_random_acks_then_sigkill_cursor_recovers_exactly(
    bookie_cluster: Any,
    meta_url: str,
    store: tuple[MetaStore, LedgerClient],
    children: Children,
    tmp_path: Path,
) -> None:
    await bookie_cluster(3, meta_url)
    meta, client = store
    state_file = tmp_path / "state.json"
    n_entries, n_acks = 120_000, 100_000
    a = await spawn(
        children,
        "acks",
        "--meta",
        meta_url,
        "--log",
        "acks",
        "--state",
        str(state_file),
        "--entries",
        str(n_entries),
        "--acks",
        str(n_acks),
    )
    await a.read_until(lambda: any(x.startswith("DONE") for x in a.lines), 240)
    os.kill(a.proc.pid, signal.SIGKILL)
    await a.proc.wait()
    expect = json.loads(state_file.read_text())
    mlog = await ManagedLog.open(meta, client, "acks", cache=EntryCache())
    cur = mlog.cursors["sub"]
    assert list(cur.mark_delete) == expect["md"]
    assert [list(r) for r in cur.acked_ranges()] == expect["ranges"]
    assert cur.properties == expect["props"] == {"acked": str(n_acks)}
    assert cur.backlog() == n_entries - n_acks
    n_ranges = len(expect["ranges"])
    assert n_ranges > 5000
    # stored: the cursor ledger the new owner replayed, proportional to the ranges
    assert 24 * n_ranges <= cur.recovered_ledger_bytes <= 6 * 24 * n_ranges + 400_000
    await mlog.close()


@pytest.mark.parametrize("meta_url", ["embedded"], indirect=True)
async def test_rollover_tailing_catchup_and_retention(
    bookie_cluster: Any, meta_url: str, store: tuple[MetaStore, LedgerClient]
) -> None:
    await bookie_cluster(3, meta_url)
    meta, client = store
    cfg = LogConfig(ensemble_size=3, write_quorum=2, ack_quorum=2, max_entries=25, retention_ms=0)
    mlog = await ManagedLog.open(meta, client, "roll", config=cfg, cache=EntryCache(max_bytes=20_000))
    cur = await mlog.open_cursor("c", "earliest")
    n = 400
    seen: list[bytes] = []

    async def tail() -> None:
        pos = mlog.next_position(mlog.last_confirmed)
        while len(seen) < n:
            got = await mlog.read_or_wait(pos, max_entries=50, max_wait=10)
            assert got
            seen.extend(e.data for e in got)
            pos = mlog.next_position(got[-1].position)

    reader = asyncio.create_task(tail())
    payloads = [(b"%06d" % i) * 100 for i in range(n)]
    positions = await asyncio.gather(*(mlog.append(p) for p in payloads))
    await asyncio.wait_for(reader, 60)
    assert seen == payloads
    await mlog.flush()
    ledger_ids = sorted({p.ledger_id for p in positions})
    assert len(ledger_ids) == n // 25
    # catch-up from bookies: the 20 kB cache holds a few entries only
    got = await read_all(mlog)
    assert [e.data for e in got] == payloads
    # a reader that does not own the log (fences nothing) sees the same entries
    ro = await ManagedLogReader.open(meta, client, "roll")
    assert [e.data for e in await ro.read(Position(0, 0), max_entries=1000, max_bytes=1 << 30)] == payloads
    await ro.close()
    p = await mlog.append(b"still the owner")
    assert p.ledger_id == mlog.current_ledger_id
    # retention: nothing the cursor still needs goes
    assert await mlog.trim() == []
    await cur.mark_delete_to(positions[199])
    await asyncio.sleep(0.2)
    await mlog.trim()
    remaining = [li.ledger_id for li in mlog.ledgers]
    assert remaining[0] == positions[200].ledger_id
    with pytest.raises(NoSuchLedgerError):
        await client.metadata(positions[0].ledger_id)
    await client.metadata(positions[200].ledger_id)
    await mlog.close()
