"""The ledger client against real bookie processes and a real ZooKeeper: faults by signal."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from store.bookie.client import BookieClient
from store.bookie.entry import pack_entry, unpack_entry
from store.ledger import LedgerClient, LedgerFencedError, ReadBeyondLacError
from store.ledger.body import length_prefix, unwrap
from store.meta.api import MetaStore
from store.meta.factory import open_meta

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def zk_meta(zookeeper: Any) -> AsyncIterator[tuple[str, MetaStore]]:
    url = zookeeper.url()
    meta = open_meta(url)
    await meta.start()
    yield url, meta
    await meta.close()


def _payload(i: int) -> bytes:
    return b"%08d:" % i + bytes([i % 251]) * (i % 200)


async def test_bookie_killed_during_20k_pipelined_adds(
    bookie_cluster: Any, zk_meta: tuple[str, MetaStore]
) -> None:
    url, meta = zk_meta
    procs = {b.address: b for b in await bookie_cluster(4, url)}
    lc = LedgerClient(meta)
    w = await lc.create(3, 3, 2)
    victim = procs[w.metadata.ensembles[0][1][1]]
    total, window = 20_000, 1_000
    loop = asyncio.get_running_loop()
    submitted: dict[int, float] = {}
    latencies: list[float] = []
    acked: list[int] = []

    def on_ack(fut: asyncio.Future[int]) -> None:
        eid = fut.result()
        latencies.append(loop.time() - submitted[eid])
        acked.append(eid)

    inflight: set[asyncio.Future[int]] = set()
    for i in range(total):
        if i == total // 2:
            victim.kill()
        if len(inflight) >= window:
            _, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
        fut = w.append(_payload(i))
        submitted[i] = loop.time()
        fut.add_done_callback(on_ack)
        inflight.add(fut)
    await asyncio.gather(*inflight)
    await w.close()

    assert acked == list(range(total))
    assert max(latencies) < 2.0, f"an add waited {max(latencies):.3f} s"
    md = await lc.metadata(w.ledger_id)
    assert md.state == "closed" and md.last_entry_id == total - 1
    assert len(md.ensembles) == 2 and victim.address not in md.ensembles[1][1]
    assert md.ensembles[1][0] > 0
    assert md.length == sum(len(_payload(i)) for i in range(total))
    r = await LedgerClient(meta).open(w.ledger_id)
    got = await r.read(0, total - 1)
    assert len(got) == total
    for i in range(total):
        assert got[i] == _payload(i), f"entry {i} differs"
    await lc.close()


async def _lines(stream: asyncio.StreamReader, quiet: float) -> list[str]:
    """Lines until none arrives for `quiet` seconds (or EOF)."""
    out: list[str] = []
    while True:
        try:
            line = await asyncio.wait_for(stream.readline(), quiet)
        except TimeoutError:
            return out
        if not line:
            return out
        out.append(line.decode().strip())


async def test_sigstopped_writer_is_fenced_by_recovery(
    bookie_cluster: Any, zk_meta: tuple[str, MetaStore]
) -> None:
    url, meta = zk_meta
    await bookie_cluster(4, url)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.store.ledger.writer_child", url, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    try:
        lines: list[str] = []
        acks = 0
        while acks < 500:
            line = (await asyncio.wait_for(child.stdout.readline(), 60)).decode().strip()
            assert line, "writer exited early"
            lines.append(line)
            acks += line.startswith("ACK")
        os.kill(child.pid, signal.SIGSTOP)
        # Whatever it flushed before stopping is still in the pipe.
        lines += await _lines(child.stdout, 0.5)
        ledger_id = int(lines[0].split()[1])
        acked = [int(ln.split()[1]) for ln in lines if ln.startswith("ACK")]
        assert len(acked) >= 500 and acked == list(range(len(acked)))

        lc = LedgerClient(meta)
        r = await lc.open(ledger_id, recovery=True)
        assert r.is_closed and r.last_add_confirmed >= acked[-1]
        got = await r.read(0, r.last_add_confirmed)
        assert got == [b"entry-%d" % i for i in range(r.last_add_confirmed + 1)]
        last = r.last_add_confirmed

        os.kill(child.pid, signal.SIGCONT)
        tail = await _lines(child.stdout, 60)
        assert await asyncio.wait_for(child.wait(), 60) == 0
        fenced = [ln for ln in tail if ln.startswith("FENCED")]
        assert fenced, tail
        late_acks, attempts = map(int, fenced[0].split()[1:])
        assert late_acks == 0 and attempts >= 5
        # Any ACK the child printed after SIGCONT was for an entry recovery kept.
        assert all(int(ln.split()[1]) <= last for ln in tail if ln.startswith("ACK"))
        md = await lc.metadata(ledger_id)
        assert md.state == "closed" and md.last_entry_id == last
        with pytest.raises(ReadBeyondLacError):
            await (await lc.open(ledger_id)).read(last, last + 1)
        await lc.close()
    finally:
        if child.returncode is None:
            os.kill(child.pid, signal.SIGCONT)
            os.kill(child.pid, signal.SIGKILL)
            await child.wait()


async def test_restarted_bookie_serves_what_it_acknowledged(
    bookie_cluster: Any, zk_meta: tuple[str, MetaStore]
) -> None:
    url, meta = zk_meta
    procs = {b.address: b for b in await bookie_cluster(3, url)}
    lc = LedgerClient(meta)
    w = await lc.create(3, 3, 3)  # AQ = 3: every acknowledged entry was acknowledged by every bookie
    n = 3000
    assert await asyncio.gather(*(w.append(_payload(i)) for i in range(n))) == list(range(n))
    victim = procs[w.metadata.ensembles[0][1][0]]
    victim.kill()  # right after the acks: most entries are only in its journal
    await victim.restart()
    bc = BookieClient(victim.address)
    try:
        got: list[bytes] = []
        while len(got) < n:
            got += await bc.read_range(w.ledger_id, len(got), n - 1)
        for i, packed in enumerate(got):
            _, _, _, body = unpack_entry(packed, w.ledger_id, i)
            assert bytes(unwrap(body)[1]) == _payload(i)
    finally:
        await bc.close()
    await w.abort()
    await lc.close()


async def test_speculative_reads_around_a_stopped_bookie(
    bookie_cluster: Any, zk_meta: tuple[str, MetaStore]
) -> None:
    url, meta = zk_meta
    procs = {b.address: b for b in await bookie_cluster(3, url)}
    lc = LedgerClient(meta, read_timeout=5.0, speculative_read_timeout=0.1)
    w = await lc.create(3, 2, 2)  # striped: per-entry reads over each entry's write set
    await asyncio.gather(*(w.append(_payload(i)) for i in range(60)))
    await w.close()
    stopped = procs[w.metadata.ensembles[0][1][0]]
    r = await lc.open(w.ledger_id)
    stopped.stop()
    try:
        loop = asyncio.get_running_loop()
        for i in range(0, 60, 5):
            t0 = loop.time()
            assert await r.read(i, i + 4) == [_payload(j) for j in range(i, i + 5)]
            # Without speculation a read hitting the stopped bookie would wait the 5 s timeout.
            assert loop.time() - t0 < 2.0
    finally:
        stopped.cont()
    await lc.close()


async def test_tailing_reader_and_lac_embedded(bookie_cluster: Any, tmp_path: Path) -> None:
    url = f"embedded://{tmp_path / 'meta'}"
    await bookie_cluster(3, url)
    meta = open_meta(url)
    await meta.start()
    lc = LedgerClient(meta, explicit_lac_interval=0)  # the LAC lags one entry, as in BookKeeper without it
    w = await lc.create(3, 3, 2)
    for i in range(5):
        await w.append(_payload(i))
    reader_client = LedgerClient(meta)
    r = await reader_client.open(w.ledger_id)
    assert not r.is_closed and r.last_add_confirmed == 3  # entry 4 carries LAC 3
    with pytest.raises(ReadBeyondLacError):
        await r.read(0, 4)
    assert await r.read(0, 3) == [_payload(i) for i in range(4)]
    waiter = asyncio.ensure_future(r.wait_lac(3, 10.0))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await w.append(_payload(5))
    assert await asyncio.wait_for(waiter, 5.0) == 4
    assert await r.read(4, 4) == [_payload(4)]
    await w.close()
    assert await r.read_lac() == 5 and r.is_closed
    # A reader of a ledger no bookie has an entry of yet waits instead of returning at once.
    w2 = await lc.create(3, 3, 2)
    r2 = await reader_client.open(w2.ledger_id)
    waiter = asyncio.ensure_future(r2.wait_lac(-1, 10.0))
    await asyncio.sleep(0.3)
    assert not waiter.done()
    await w2.append(b"a")
    await w2.append(b"b")
    assert await asyncio.wait_for(waiter, 5.0) == 0
    await w2.close()
    await lc.delete(w.ledger_id)
    await lc.close()
    await reader_client.close()
    await meta.close()


async def test_recovery_races_and_partial_tail(bookie_cluster: Any, zk_meta: tuple[str, MetaStore]) -> None:
    url, meta = zk_meta
    await bookie_cluster(3, url)
    lc = LedgerClient(meta)
    empty = await lc.create(3, 3, 2)
    r = await lc.open(empty.ledger_id, recovery=True)
    assert r.is_closed and r.last_add_confirmed == -1 and r.metadata.length == 0
    with pytest.raises(LedgerFencedError):
        await empty.append(b"too late")

    w = await lc.create(3, 3, 2)
    await asyncio.gather(*(w.append(_payload(i)) for i in range(10)))
    total = sum(len(_payload(i)) for i in range(10))
    # The writer died after sending entry 10 to one bookie only.
    bc = BookieClient(w.metadata.ensembles[0][1][2])
    await bc.add(w.ledger_id, pack_entry(w.ledger_id, 10, 9, b"tail", prefix=length_prefix(total + 4)))
    await bc.close()
    await w.abort()
    clients = [LedgerClient(meta) for _ in range(3)]
    readers = await asyncio.gather(*(c.open(w.ledger_id, recovery=True) for c in clients))
    lasts = {rd.last_add_confirmed for rd in readers}
    assert len(lasts) == 1 and lasts <= {9, 10}
    last = lasts.pop()
    md = await lc.metadata(w.ledger_id)
    assert md.last_entry_id == last and md.length == (total + 4 if last == 10 else total)
    again = await LedgerClient(meta).open(w.ledger_id, recovery=True)
    expect = [_payload(i) for i in range(10)] + ([b"tail"] if last == 10 else [])
    assert await again.read(0, last) == expect
    for c in [lc, *clients]:
        await c.close()
