"""Writer, reader and recovery logic against in-memory bookies and the embedded metadata store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import layout
from store.bookie.entry import pack_entry
from store.clock import SYSTEM_CLOCK, Clock
from store.ledger import (
    LedgerClient,
    LedgerClosedError,
    LedgerFencedError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
    ReadBeyondLacError,
)
from store.ledger.body import length_prefix
from store.ledger.metadata import CLOSED
from store.meta.api import MetaStore
from store.meta.factory import open_meta
from tests.store.ledger.memory_bookies import MemoryBookies
from tests.support.clock import FakeClock


@pytest.fixture
async def meta(tmp_path: Path) -> AsyncIterator[MetaStore]:
    store = open_meta(f"embedded://{tmp_path / 'meta'}")
    await store.start()
    yield store
    await store.close()


@pytest.fixture
async def bookies(meta: MetaStore) -> MemoryBookies:
    b = MemoryBookies(5)
    await b.register(meta)
    return b


def _client(
    meta: MetaStore,
    bookies: MemoryBookies,
    *,
    add_timeout: float = 2.0,
    read_timeout: float = 5.0,
    speculative_read_timeout: float = 0.2,
    explicit_lac_interval: float = 0.1,
    clock: Clock = SYSTEM_CLOCK,
) -> LedgerClient:
    return LedgerClient(
        meta,
        bookies=bookies,
        add_timeout=add_timeout,
        read_timeout=read_timeout,
        speculative_read_timeout=speculative_read_timeout,
        explicit_lac_interval=explicit_lac_interval,
        clock=clock,
    )


async def test_write_close_read_back(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 2, 2, properties={"owner": "t"})
    futs = [w.append(f"entry-{i}".encode()) for i in range(100)]
    assert await asyncio.gather(*futs) == list(range(100))
    assert w.last_add_confirmed == 99
    assert w.length == sum(len(f"entry-{i}") for i in range(100))
    await w.close()
    with pytest.raises(LedgerClosedError):
        w.append(b"late")
    md = await lc.metadata(w.ledger_id)
    assert md.state == CLOSED and md.last_entry_id == 99 and md.length == w.length
    assert md.properties == {"owner": "t"}
    r = await lc.open(w.ledger_id)
    assert r.is_closed and r.last_add_confirmed == 99
    assert await r.read(0, 99) == [f"entry-{i}".encode() for i in range(100)]
    # Striping: with E=3, WQ=2 each bookie of the ensemble holds two thirds of the entries.
    held = [len(bookies.get(a).ledgers.get(w.ledger_id, {})) for a in md.ensembles[0][1]]
    assert sorted(held) == [66, 67, 67]
    with pytest.raises(ReadBeyondLacError):
        await r.read(95, 100)


async def test_acks_in_order_with_slow_bookie(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 3)
    slow = bookies.get(w.metadata.ensembles[0][1][0])
    order: list[int] = []
    futs = []
    for i in range(30):
        slow.add_delay = 0.05 if i == 0 else 0.0
        f = w.append(b"x")
        f.add_done_callback(lambda f: order.append(f.result()))
        futs.append(f)
    await asyncio.gather(*futs)
    assert order == list(range(30))
    await w.close()


async def test_ensemble_change_on_failure(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    first = list(w.metadata.ensembles[0][1])
    acked = await asyncio.gather(*(w.append(b"a%d" % i) for i in range(50)))
    victim = bookies.get(first[1])
    victim.down = True
    futs = [w.append(b"b%d" % i) for i in range(50)]
    acked += await asyncio.gather(*futs)
    assert acked == list(range(100))
    md = w.metadata
    # The new fragment starts after the LAC at failure time (some entries may have completed
    # on the two healthy bookies before the failure was seen).
    start = md.ensembles[1][0]
    assert len(md.ensembles) == 2 and 50 <= start < 100
    assert first[1] not in md.ensembles[1][1]
    replacement = bookies.get(md.ensembles[1][1][1])
    assert sorted(replacement.ledgers[w.ledger_id]) == list(range(start, 100))
    await w.close()
    r = await lc.open(w.ledger_id)
    assert await r.read(0, 99) == [b"a%d" % i for i in range(50)] + [b"b%d" % i for i in range(50)]
    stored = await lc.metadata(w.ledger_id)
    assert stored.ensembles == md.ensembles


async def test_stalled_bookie_replaced_after_add_timeout(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies, add_timeout=0.3)
    w = await lc.create(3, 3, 3)  # AQ = WQ: nothing completes until the stalled bookie is replaced
    stalled = w.metadata.ensembles[0][1][2]
    bookies.get(stalled).hang = True
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await asyncio.gather(*(w.append(b"x") for _ in range(10))) == list(range(10))
    assert loop.time() - t0 < 2.0
    # No entry was acknowledged before the change: the first fragment is replaced in place.
    assert len(w.metadata.ensembles) == 1 and stalled not in w.metadata.ensembles[0][1]
    assert (await lc.metadata(w.ledger_id)).ensembles == w.metadata.ensembles
    await w.close()


async def test_not_enough_bookies(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    with pytest.raises(NotEnoughBookiesError, match="need 6 bookies but only 5"):
        await lc.create(6, 3, 2)


async def test_fencing_stops_writer_and_recovery_closes(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    assert await asyncio.gather(*(w.append(b"%d" % i) for i in range(20))) == list(range(20))
    other = _client(meta, bookies)
    r = await other.open(w.ledger_id, recovery=True)
    assert r.is_closed and r.last_add_confirmed == 19
    assert r.metadata.length == sum(len(b"%d" % i) for i in range(20))
    fut = w.append(b"after fence")
    with pytest.raises(LedgerFencedError):
        await fut
    with pytest.raises(LedgerFencedError):
        w.append(b"again")
    with pytest.raises(LedgerFencedError):
        await w.close()
    assert (await lc.metadata(w.ledger_id)).last_entry_id == 19
    assert await r.read(19, 19) == [b"19"]


async def _entry_on(
    bookies: MemoryBookies, addr: str, lid: int, eid: int, lac: int, payload: bytes, total: int
) -> None:
    await bookies.get(addr).add(lid, pack_entry(lid, eid, lac, payload, prefix=length_prefix(total)))


async def test_recovery_empty_and_partial_tail(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    empty = await lc.create(3, 3, 2)
    r = await lc.open(empty.ledger_id, recovery=True)
    assert r.is_closed and r.last_add_confirmed == -1 and r.metadata.length == 0
    with pytest.raises(LedgerFencedError):
        await empty.append(b"x")

    w = await lc.create(3, 3, 2)
    await asyncio.gather(*(w.append(b"e%d" % i) for i in range(5)))
    total = sum(len(b"e%d" % i) for i in range(5))
    ens = w.metadata.ensembles[0][1]
    # The writer died after entry 5 reached a single bookie (never acknowledged).
    await _entry_on(bookies, ens[0], w.ledger_id, 5, 4, b"e5", total + 2)
    await w.abort()
    results = await asyncio.gather(
        *(_client(meta, bookies).open(w.ledger_id, recovery=True) for _ in range(3))
    )
    lasts = {r.last_add_confirmed for r in results}
    assert len(lasts) == 1 and lasts <= {4, 5}  # recovered or not, but everyone agrees
    last = lasts.pop()
    md = await lc.metadata(w.ledger_id)
    assert md.state == CLOSED and md.last_entry_id == last
    assert md.length == (total + 2 if last == 5 else total)
    again = await lc.open(w.ledger_id, recovery=True)
    assert again.last_add_confirmed == last
    assert await again.read(0, last) == [b"e%d" % i for i in range(last + 1)]
    if last == 5:
        # Recovered entries are re-replicated to their whole write set.
        assert all(5 in bookies.get(a).ledgers[w.ledger_id] for a in ens)


async def test_recovery_finds_entry_on_one_bookie_when_others_silent(
    meta: MetaStore, bookies: MemoryBookies
) -> None:
    lc = _client(meta, bookies, read_timeout=0.3)
    w = await lc.create(3, 3, 2)
    await asyncio.gather(*(w.append(b"e%d" % i) for i in range(3)))
    ens = w.metadata.ensembles[0][1]
    await _entry_on(bookies, ens[2], w.ledger_id, 3, 2, b"e3", 8)
    await w.abort()
    bookies.get(ens[1]).hang = True  # only one denial possible: entry 3 cannot be ruled out
    r = await lc.open(w.ledger_id, recovery=True)
    assert r.last_add_confirmed == 3
    assert await r.read(3, 3) == [b"e3"]


async def test_open_without_recovery_reads_to_lac_and_waits(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies, explicit_lac_interval=0)
    w = await lc.create(3, 3, 2)
    for i in range(10):
        await w.append(b"%d" % i)
    r = await lc.open(w.ledger_id)
    # Bookies learn the LAC from the next entry: entry 9 carries LAC 8.
    assert not r.is_closed and r.last_add_confirmed == 8
    assert await r.read(0, 8) == [b"%d" % i for i in range(9)]
    with pytest.raises(ReadBeyondLacError):
        await r.read(0, 9)
    assert await r.wait_lac(8, 0.1) == 8  # nothing new: times out
    waiter = asyncio.ensure_future(r.wait_lac(8, 5.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await w.append(b"10")
    assert await waiter == 9
    assert await r.read(9, 9) == [b"9"]
    await w.close()
    assert await r.read_lac() == 10 and r.is_closed
    # The writer is unaffected by the reader: no fencing happened.
    assert (await lc.metadata(w.ledger_id)).last_entry_id == 10


async def test_speculative_read_around_stalled_replica(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies, speculative_read_timeout=0.05, read_timeout=5.0)
    w = await lc.create(3, 3, 2)
    await asyncio.gather(*(w.append(b"%d" % i) for i in range(30)))
    await w.close()
    for addr in w.metadata.ensembles[0][1][:2]:
        bookies.get(addr).hang = True
    r = await lc.open(w.ledger_id)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for i in range(30):
        assert await r.read(i, i) == [b"%d" % i]
    assert loop.time() - t0 < 30 * 0.5  # far below the 5 s read timeout per entry


async def test_delete(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 2, 2)
    await asyncio.gather(*(w.append(b"x") for _ in range(6)))
    await w.close()
    await lc.delete(w.ledger_id)
    assert all(w.ledger_id not in b.ledgers for b in bookies.bookies.values())
    from store.ledger import NoSuchLedgerError

    with pytest.raises(NoSuchLedgerError):
        await lc.metadata(w.ledger_id)
    with pytest.raises(NoSuchLedgerError):
        await lc.open(w.ledger_id)


async def test_ensemble_change_after_recovery_started_fences_writer(
    meta: MetaStore, bookies: MemoryBookies
) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    assert await asyncio.gather(*(w.append(b"x") for _ in range(5))) == list(range(5))
    # A recoverer has done step one (OPEN -> IN_RECOVERY) but not fenced any bookie yet.
    from store.ledger.env import LedgerEnv

    env: LedgerEnv = lc._env
    md = await env.read_metadata(w.ledger_id)
    await env.cas_metadata(md.copy(state="in_recovery"))
    bookies.get(w.metadata.ensembles[0][1][0]).down = True
    fut = w.append(b"y")
    with pytest.raises(LedgerFencedError):
        await fut
    stored = await lc.metadata(w.ledger_id)
    assert stored.state == "in_recovery" and stored.ensembles == md.ensembles  # the CAS lost


async def test_rack_aware_create_uses_registered_racks(meta: MetaStore) -> None:
    b = MemoryBookies(6)
    await b.register(meta, racks=["r1", "r1", "r2", "r2", "r3", "r3"])
    rack = {addr: ["r1", "r1", "r2", "r2", "r3", "r3"][i] for i, addr in enumerate(b.bookies)}
    lc = _client(meta, b)
    for _ in range(5):
        w = await lc.create(3, 2, 2)
        assert {rack[a] for a in w.metadata.ensembles[0][1]} == {"r1", "r2", "r3"}
        await w.close()


async def test_close_is_idempotent_and_conflicts_reported(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    await asyncio.gather(*(w.append(b"x") for _ in range(3)))
    await w.close()
    await w.close()
    md = await lc.metadata(w.ledger_id)
    assert md.state == "closed" and md.last_entry_id == 2 and md.length == 3
    # Recovering a closed ledger changes nothing.
    r = await lc.open(w.ledger_id, recovery=True)
    assert r.last_add_confirmed == 2 and (await lc.metadata(w.ledger_id)).version == md.version


async def test_wait_lac_on_a_ledger_without_entries(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    r = await lc.open(w.ledger_id)
    assert r.last_add_confirmed == -1
    # The bookies do not know the ledger yet: the poll keeps asking instead of returning early.
    waiter = asyncio.ensure_future(r.wait_lac(-1, 5.0))
    await asyncio.sleep(0.1)
    assert not waiter.done()
    await w.append(b"a")
    await asyncio.sleep(0.1)
    assert not waiter.done()  # entry 0 carries LAC -1: nothing confirmed to readers yet
    await w.append(b"b")
    assert await waiter == 0
    await w.close()


async def test_bad_digest_on_one_replica_reads_from_another(meta: MetaStore, bookies: MemoryBookies) -> None:
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 3)
    await asyncio.gather(*(w.append(b"payload-%d" % i) for i in range(10)))
    await w.close()
    for addr in w.metadata.ensembles[0][1][:2]:
        stored = bookies.get(addr).ledgers[w.ledger_id]
        for eid, packed in stored.items():
            stored[eid] = packed[:-1] + bytes([packed[-1] ^ 0xFF])  # flip the last payload byte
    r = await lc.open(w.ledger_id)
    assert await r.read(0, 9) == [b"payload-%d" % i for i in range(10)]
    for i in range(10):
        assert await r.read(i, i) == [b"payload-%d" % i]


async def test_oversized_entry_is_refused_before_it_gets_an_id(
    meta: MetaStore, bookies: MemoryBookies
) -> None:
    from store.ledger.writer import MAX_PAYLOAD

    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    with pytest.raises(ValueError, match="exceeds"):
        w.append(b"x" * (MAX_PAYLOAD + 1))
    assert await w.append(b"fine") == 0
    await w.close()


async def test_writer_fails_when_no_replacement_bookie(meta: MetaStore) -> None:
    b = MemoryBookies(3)
    await b.register(meta)
    lc = _client(meta, b, add_timeout=0.2)
    w = await lc.create(3, 3, 3)
    dead = w.metadata.ensembles[0][1][0]
    b.get(dead).down = True
    await b.unregister(meta, dead)  # as its ephemeral node goes when its session ends
    fut = w.append(b"x")
    with pytest.raises(NotEnoughBookiesError):
        await fut
    assert (await lc.metadata(w.ledger_id)).state == "open"  # nothing recorded; recovery will close it


async def test_stalled_bookie_without_spare_is_retried_in_place(meta: MetaStore) -> None:
    b = MemoryBookies(3)
    await b.register(meta)
    clock = FakeClock()
    lc = _client(meta, b, add_timeout=0.2, clock=clock)
    w = await lc.create(3, 3, 3)
    stalled = b.get(w.metadata.ensembles[0][1][1])
    stalled.hang = True
    futs = [w.append(b"%d" % i) for i in range(5)]
    for _ in range(6):  # several add timeouts: no spare bookie, so it is kept and retried
        await clock.advance(0.1)
    assert not any(f.done() for f in futs)
    assert w.metadata.ensembles == [(0, w.metadata.ensembles[0][1])]  # never replaced
    stalled.hang = False
    assert await clock.run_until_done(asyncio.gather(*futs)) == list(range(5))
    await w.close()
    md = await lc.metadata(w.ledger_id)
    assert md.ensembles == [(0, w.metadata.ensembles[0][1])] and md.last_entry_id == 4


async def test_a_restarted_bookie_is_a_replacement_once_no_other_spare_is_left(meta: MetaStore) -> None:
    """Regression (fault run): a writer excluded every bookie that had ever failed it, so after a
    restart or two a long-lived ledger had no spare left and its writer failed, with a live,
    re-registered bookie to spare."""
    b = MemoryBookies(4)
    await b.register(meta)
    lc = _client(meta, b, add_timeout=0.2)
    w = await lc.create(3, 3, 2)
    first, second = w.metadata.ensembles[0][1][:2]
    b.get(first).down = True
    await b.unregister(meta, first)
    assert await w.append(b"a") == 0  # replaced by the spare
    b.get(first).down = False
    await meta.create(layout.bookie_available(first), b"{}", ephemeral=True)  # restarted: registered again
    b.get(second).down = True
    await b.unregister(meta, second)
    assert await w.append(b"b") == 1  # the only candidate left is the restarted one
    assert first in w.metadata.ensembles[-1][1] and second not in w.metadata.ensembles[-1][1]
    await w.close()
    await lc.close()


async def test_a_delete_cut_short_leaves_the_ledger_whole(
    meta: MetaStore, bookies: MemoryBookies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (fault run): delete removed the bookie copies first, so a metadata delete lost
    to a ZooKeeper outage left metadata naming copies that were gone; auto-recovery's sampled
    check marked the ledger and no worker could ever refill it. Metadata goes first now."""
    lc = _client(meta, bookies)
    w = await lc.create(3, 3, 2)
    assert await asyncio.gather(*(w.append(b"%d" % i) for i in range(5))) == list(range(5))
    await w.close()
    real_delete = meta.delete

    async def unreachable(*args: object, **kwargs: object) -> None:
        raise ConnectionError("metadata store unreachable")

    monkeypatch.setattr(meta, "delete", unreachable)
    with pytest.raises(ConnectionError):
        await lc.delete(w.ledger_id)
    monkeypatch.setattr(meta, "delete", real_delete)
    r = await lc.open(w.ledger_id)
    assert await r.read(0, 4) == [b"%d" % i for i in range(5)]  # nothing deleted: a retry can finish
    await lc.delete(w.ledger_id)
    with pytest.raises(NoSuchLedgerError):
        await lc.metadata(w.ledger_id)
    await lc.close()
