"""Explicit LAC from an idle writer: readers that are not the writer see its last entry without
a further add. Real bookie processes with the embedded metadata store, plus in-memory bookies
for the writer's timer logic (faults, fencing, disabled)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from store.ledger import LedgerClient, LedgerFencedError
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.store.ledger.memory_bookies import MemoryBookies
from tests.support.bookies import BookieCluster
from tests.support.clock import FakeClock

N = 20


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[tuple[str, MetaStore]]:
    url = f"embedded://{tmp_path / 'meta'}"
    store = open_meta(url)
    await store.start()
    yield url, store
    await store.close()


async def _fill(lc: LedgerClient, n: int = N) -> tuple[object, int]:
    w = await lc.create(3, 3, 2)
    for i in range(n):  # one at a time: each add carries the previous entry as the LAC
        await w.append(b"entry-%d" % i)
    assert w.last_add_confirmed == n - 1
    return w, w.ledger_id


async def _lac_seen(lc: LedgerClient, lid: int, want: int, within: float) -> int:
    """The LAC a fresh non-recovery open sees, polled until it is `want` or time runs out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        r = await lc.open(lid, recovery=False)
        if r.last_add_confirmed >= want or loop.time() > deadline:
            return r.last_add_confirmed
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_idle_writer_lac_reaches_other_clients(
    bookie_cluster: BookieCluster, meta: tuple[str, MetaStore]
) -> None:
    url, store = meta
    await bookie_cluster(3, url)
    wc, rc = LedgerClient(store, explicit_lac_interval=0.1), LedgerClient(store)
    try:
        w, lid = await _fill(wc)
        # The writer's interval is 0.1 s; the brief allows a second.
        assert await _lac_seen(rc, lid, N - 1, within=1.0) == N - 1
        r = await rc.open(lid, recovery=False)
        assert await r.read(N - 1, N - 1) == [b"entry-%d" % (N - 1)]

        # A tailing reader's long poll wakes for the last entry of a burst, no add after it.
        after = r.last_add_confirmed
        burst = [w.append(b"burst-%d" % i) for i in range(10)]  # type: ignore[attr-defined]
        last = max(await asyncio.gather(*burst))
        while after < last:
            got = await r.wait_lac(after, timeout=10)
            assert got >= after
            if got == after:
                break  # timed out
            after = got
        assert after == last == N + 9
        assert await r.read(last, last) == [b"burst-9"]

        # Recovery is unaffected: it still ends the ledger at the last acknowledged entry.
        rec = await rc.open(lid, recovery=True)
        assert rec.is_closed and rec.last_add_confirmed == last
        assert len(await rec.read(0, last)) == last + 1
        with pytest.raises(LedgerFencedError):
            await w.append(b"late")  # type: ignore[attr-defined]
    finally:
        await wc.close()
        await rc.close()


@pytest.mark.slow
async def test_disabled_keeps_the_lac_one_behind(
    bookie_cluster: BookieCluster, meta: tuple[str, MetaStore]
) -> None:
    url, store = meta
    await bookie_cluster(3, url)
    clock = FakeClock()
    wc, rc = LedgerClient(store, explicit_lac_interval=0, clock=clock), LedgerClient(store)
    try:
        _, lid = await _fill(wc)
        await clock.advance(0.5)  # five 0.1 s intervals: an explicit LAC would be there by now
        assert (await rc.open(lid, recovery=False)).last_add_confirmed == N - 2
    finally:
        await wc.close()
        await rc.close()


# -- the writer's timer against in-memory bookies ------------------------------------------


@pytest.fixture
async def bookies(meta: tuple[str, MetaStore]) -> MemoryBookies:
    b = MemoryBookies(3)
    await b.register(meta[1])
    return b


def _lacs(bookies: MemoryBookies, lid: int) -> list[int]:
    return [b.explicit_lac.get(lid, -1) for b in bookies.bookies.values()]


async def _until(cond: Callable[[], bool], within: float = 5.0) -> None:
    """Return once cond() holds or `within` s passed (the caller asserts cond itself)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if cond():
            return
        await asyncio.sleep(0.01)


async def test_idle_writer_sends_its_lac_once_to_the_whole_ensemble(
    meta: tuple[str, MetaStore], bookies: MemoryBookies
) -> None:
    clock = FakeClock()
    lc = LedgerClient(meta[1], bookies=bookies, explicit_lac_interval=0.05, clock=clock)
    w = await lc.create(3, 2, 2)
    await asyncio.gather(*(w.append(b"x%d" % i) for i in range(10)))
    await clock.advance(0.04)
    assert _lacs(bookies, w.ledger_id) == [-1, -1, -1]  # not idle for an interval yet
    await clock.advance(0.01)
    await _until(lambda: _lacs(bookies, w.ledger_id) == [9, 9, 9])
    assert _lacs(bookies, w.ledger_id) == [9, 9, 9]
    await clock.advance(0.3)  # idle with nothing new: no more WRITE_LACs
    assert sum(b.write_lacs for b in bookies.bookies.values()) == 3
    await w.close()
    await lc.close()


async def test_explicit_lac_never_names_an_unacked_entry(
    meta: tuple[str, MetaStore], bookies: MemoryBookies
) -> None:
    clock = FakeClock()
    lc = LedgerClient(meta[1], bookies=bookies, explicit_lac_interval=0.02, clock=clock)
    w = await lc.create(3, 3, 2)
    ensemble = w.metadata.ensembles[-1][1]
    for a in ensemble[1:]:
        bookies.get(a).add_delay = 0.6  # only one bookie has the entries for a while: AQ=2 unmet
    futs = [w.append(b"x%d" % i) for i in range(5)]
    await _until(lambda: len(bookies.get(ensemble[0]).ledgers.get(w.ledger_id, {})) == 5)
    await clock.advance(0.3)  # many intervals, idle, entries on one bookie: still nothing to tell
    assert not any(f.done() for f in futs)
    assert _lacs(bookies, w.ledger_id) == [-1, -1, -1]
    assert await asyncio.gather(*futs) == [0, 1, 2, 3, 4]
    await clock.advance(0.02)
    await _until(lambda: _lacs(bookies, w.ledger_id) == [4, 4, 4])
    assert _lacs(bookies, w.ledger_id) == [4, 4, 4]
    await w.close()
    await lc.close()


async def test_write_lac_failures_never_fail_the_writer(
    meta: tuple[str, MetaStore], bookies: MemoryBookies
) -> None:
    clock = FakeClock()
    lc = LedgerClient(meta[1], bookies=bookies, explicit_lac_interval=0.02, clock=clock)
    w = await lc.create(3, 3, 2)
    ensemble = w.metadata.ensembles[-1][1]
    await w.append(b"a")
    down = bookies.get(ensemble[0])
    down.down = True  # WRITE_LAC to it fails; the others still get it
    in_order = lambda: [bookies.get(a).explicit_lac.get(w.ledger_id, -1) for a in ensemble]  # noqa: E731
    await clock.advance(0.02)
    await _until(lambda: in_order() == [-1, 0, 0])
    assert in_order() == [-1, 0, 0]
    down.down = False
    assert await w.append(b"b") == 1  # not failed, no ensemble change
    assert w.metadata.ensembles[-1][1] == ensemble
    await clock.advance(0.02)
    await _until(lambda: _lacs(bookies, w.ledger_id) == [1, 1, 1])
    assert _lacs(bookies, w.ledger_id) == [1, 1, 1]
    # Fenced meanwhile (recovery by another client): the WRITE_LAC is refused quietly; the
    # writer learns of the fence from its next add, as before.
    assert await w.append(b"c") == 2
    for b in bookies.bookies.values():  # before the writer's timer fires (no await since the ack)
        b.fenced.add(w.ledger_id)
    await clock.advance(0.2)  # the timer fires: WRITE_LACs sent and refused
    assert _lacs(bookies, w.ledger_id) == [1, 1, 1]  # refused
    assert w.last_add_confirmed == 2
    with pytest.raises(LedgerFencedError):
        await w.append(b"d")
    await w.abort()
    await lc.close()
