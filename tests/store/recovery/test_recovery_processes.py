"""Auto-recovery against real bookie processes: the auditor marks, workers re-replicate."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from prometheus_client import REGISTRY

from store.bookie.entry import unpack_entry
from store.ledger import LedgerClient
from store.ledger.body import unwrap
from store.ledger.metadata import LedgerMetadata
from store.meta.api import MetaStore
from store.recovery import marks
from store.recovery.auditor import Auditor
from store.recovery.service import status, under_replicated
from store.recovery.worker import ReplicationWorker
from tests.store.recovery.conftest import gone, payload, read_all, write_ledger
from tests.support.clock import FakeClock
from tests.support.wait import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_recovery_in_bookies(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests drive the auditor and the worker themselves."""
    monkeypatch.setenv("QUIRE_RECOVERY_ENABLE", "false")


async def test_auditor_marks_after_grace_and_worker_rereplicates_closed_ledgers(
    bookie_cluster: Any, meta: tuple[str, MetaStore]
) -> None:
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(5, url)}
    lc = LedgerClient(m)
    ledgers: list[LedgerMetadata] = []
    for _ in range(6):
        w = await write_ledger(lc, 200)
        ledgers.append(await lc.metadata(w.ledger_id))
    victim = ledgers[0].ensembles[0][1][0]
    # Placement is random (3 of 5): write ledgers until one avoids the victim, so the test can
    # check that only ledgers on it are marked.
    while all(victim in md.bookies() for md in ledgers) and len(ledgers) < 40:
        w = await write_ledger(lc, 200)
        ledgers.append(await lc.metadata(w.ledger_id))
    on_victim = {md.ledger_id for md in ledgers if victim in md.bookies()}
    assert on_victim != {md.ledger_id for md in ledgers}
    procs[victim].kill()
    await eventually(lambda: gone(m, victim))

    clock = FakeClock()
    auditor = Auditor(lc.env, "test-auditor", delay_s=30.0, clock=clock)
    assert await auditor.audit_bookies() == 0  # within the grace period: nothing marked
    assert await marks.marked_ledgers(m) == []
    await clock.advance(29.0)
    assert await auditor.audit_bookies() == 0
    await clock.advance(1.0)
    assert await auditor.audit_bookies() == len(on_victim)
    assert set(await marks.marked_ledgers(m)) == on_victim
    docs = await under_replicated(m)
    assert all(set(d["bookies"]) == {victim} and d["bookies"][victim]["reason"] == "lost" for d in docs)

    worker = ReplicationWorker(lc.env, "test-worker")
    copied_before = REGISTRY.get_sample_value("quire_recovery_rereplicated_bytes_total") or 0.0
    timed_before = REGISTRY.get_sample_value("quire_recovery_time_to_full_replication_seconds_count") or 0.0
    assert await worker.run_once() == len(on_victim)
    assert await marks.marked_ledgers(m) == []
    st = await status(m)
    assert st["under_replicated"] == 0 and st["ledgers_rereplicated"] == len(on_victim)
    assert st["bytes_rereplicated"] > 0
    assert REGISTRY.get_sample_value("quire_recovery_rereplicated_bytes_total") - copied_before == st[
        "bytes_rereplicated"]
    assert REGISTRY.get_sample_value("quire_recovery_time_to_full_replication_seconds_count") - timed_before == len(
        on_victim)
    for md in ledgers:
        after = await lc.metadata(md.ledger_id)
        assert victim not in after.bookies()
        if md.ledger_id not in on_victim:
            assert after.ensembles == md.ensembles  # untouched
        got = await read_all(m, md.ledger_id)
        assert got == [payload(md.ledger_id, i) for i in range(200)]

    # Every entry is on 3 live bookies again: the replacement holds its own copy of each ...
    for lid in on_victim:
        after = await lc.metadata(lid)
        (newcomer,) = after.bookies() - next(md for md in ledgers if md.ledger_id == lid).bookies()
        client = lc.env.bookies.get(newcomer)
        for i in range(200):
            packed = await client.read(lid, i)
            assert bytes(unwrap(unpack_entry(packed, lid, i)[3])[1]) == payload(lid, i)
    # ... so a second failure afterwards loses nothing.
    second = sorted(ledgers[0].bookies() - {victim})[0]
    procs[second].kill()
    for md in ledgers:
        assert await read_all(m, md.ledger_id) == [payload(md.ledger_id, i) for i in range(200)]
    await lc.close()


async def test_running_auditor_marks_when_the_grace_period_ends_not_at_its_next_periodic_audit(
    bookie_cluster: Any, meta: tuple[str, MetaStore]
) -> None:
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(4, url)}
    lc = LedgerClient(m)
    w = await write_ledger(lc, 20)
    victim = sorted((await lc.metadata(w.ledger_id)).bookies())[0]
    procs[victim].kill()
    await eventually(lambda: gone(m, victim))
    # Its polls (every 0.2 s) fall on either side of the grace period's end (1 s after the first
    # audit saw the bookie gone); the periodic audit is an hour away.
    auditor = Auditor(lc.env, "test-auditor", delay_s=1.0, interval_s=3600.0, poll_s=0.2)
    task = asyncio.create_task(auditor.run())
    try:
        await eventually(lambda: _marked(m), within=30, what="the lost bookie's ledger marked")
        assert await marks.marked_ledgers(m) == [w.ledger_id]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await lc.close()


async def _marked(m: MetaStore) -> bool:
    return await marks.marked_ledgers(m) != []


async def test_tail_recovery_moves_the_tail_off_a_gone_bookie(
    bookie_cluster: Any, meta: tuple[str, MetaStore]
) -> None:
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(4, url)}
    lc = LedgerClient(m, explicit_lac_interval=0)  # bookies learn LAC one entry behind: a tail to re-add
    w = await lc.create(3, 3, 2)
    for i in range(50):  # one at a time, so each entry carries the previous one as LAC
        await w.append(payload(w.ledger_id, i))
    await w.abort()
    before = await lc.metadata(w.ledger_id)
    victim = before.ensembles[0][1][1]
    procs[victim].kill()
    await eventually(lambda: gone(m, victim))

    r = await LedgerClient(m).open(w.ledger_id, recovery=True)
    md = await lc.metadata(w.ledger_id)
    assert md.state == "closed" and md.last_entry_id == 49
    assert len(md.ensembles) == 2 and md.ensembles[1][0] == 49  # the re-added tail, on a new fragment
    assert victim not in md.ensembles[1][1] and md.ensembles[0][1] == before.ensembles[0][1]
    (newcomer,) = set(md.ensembles[1][1]) - set(before.ensembles[0][1])
    packed = await lc.env.bookies.get(newcomer).read(w.ledger_id, 49)
    assert bytes(unwrap(unpack_entry(packed, w.ledger_id, 49)[3])[1]) == payload(w.ledger_id, 49)
    assert await r.read(0, 49) == [payload(w.ledger_id, i) for i in range(50)]
    await lc.close()


async def test_open_ledger_race_the_writers_ensemble_change_wins(
    bookie_cluster: Any, meta: tuple[str, MetaStore]
) -> None:
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(5, url)}
    lc = LedgerClient(m, explicit_lac_interval=0.05)
    w = await write_ledger(lc, 100, close=False)
    victim = w.metadata.ensembles[0][1][0]
    from store.ledger.fetch import bookie_lac

    async def lac_known() -> bool:
        return await bookie_lac(lc.env, await lc.metadata(w.ledger_id)) == 99

    await eventually(lac_known)
    procs[victim].kill()
    await eventually(lambda: gone(m, victim))
    await marks.mark(m, w.ledger_id, {victim: (marks.now_ms(), marks.LOST)})

    raced = []

    async def writer_moves_first(md: LedgerMetadata) -> None:
        if raced:
            return
        raced.append(md)
        # The writer replaces the same bookie before the worker's compare-and-set, as its
        # client's poll for lost bookies makes it (False if that poll did already). Left to
        # find the dead bookie through its own adds, it may see them acked by the other two
        # (AQ 2) before the failure comes back, and start its new fragment only after them.
        w.replace_bookies({victim})
        await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(100, 120)))
        assert victim not in w.metadata.ensembles[-1][1]

    worker = ReplicationWorker(lc.env, "racer", before_cas=writer_moves_first)
    assert await worker.process(w.ledger_id)
    assert raced, "the worker never reached its compare-and-set"
    md = await lc.metadata(w.ledger_id)
    assert victim not in md.bookies()
    assert md.ensembles[-1] == w.metadata.ensembles[-1]  # the writer's fragment stands
    assert md.ensembles[-1][0] == 100
    await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(120, 130)))
    await w.close()
    assert await read_all(m, w.ledger_id) == [payload(w.ledger_id, i) for i in range(130)]
    await lc.close()


async def test_open_ledger_idle_writer_confirmed_part_moves_writer_keeps_tail(
    bookie_cluster: Any, meta: tuple[str, MetaStore]
) -> None:
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(5, url)}
    # The worker alone (lost_poll_s=0: the writer's client does not look for lost bookies).
    lc = LedgerClient(m, explicit_lac_interval=0.05, lost_poll_s=0)
    w = await write_ledger(lc, 60, close=False)
    victim = w.metadata.ensembles[0][1][2]
    from store.ledger.fetch import bookie_lac

    async def lac_known() -> bool:
        return await bookie_lac(lc.env, await lc.metadata(w.ledger_id)) == 59

    await eventually(lac_known)
    procs[victim].kill()
    await eventually(lambda: gone(m, victim))
    await marks.mark(m, w.ledger_id, {victim: (marks.now_ms(), marks.LOST)})
    worker = ReplicationWorker(lc.env, "w")
    assert not await worker.process(w.ledger_id)  # the open tail stays the writer's to change
    md = await lc.metadata(w.ledger_id)
    assert md.state == "open" and [f for f, _ in md.ensembles] == [0, 60]
    assert victim not in md.ensembles[0][1] and md.ensembles[1][1] == w.metadata.ensembles[-1][1]
    # The writer notices on its next add, changes ensemble and closes over the worker's change.
    await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(60, 80)))
    await w.close()
    assert await worker.process(w.ledger_id)  # nothing left on the dead bookie: unmarked
    md = await lc.metadata(w.ledger_id)
    assert victim not in md.bookies() and md.state == "closed"
    assert await marks.marked_ledgers(m) == []
    assert await read_all(m, w.ledger_id) == [payload(w.ledger_id, i) for i in range(80)]
    await lc.close()


async def test_idle_writer_replaces_a_lost_bookie_so_its_open_ledger_is_unmarked(
    bookie_cluster: Any, meta: tuple[str, MetaStore]
) -> None:
    """Regression: an idle open ledger stayed marked under-replicated for as long as its writer
    added nothing (the worker leaves the open tail to the writer, which only learnt of the lost
    bookie from a failed add). The writer's client now replaces bookies marked lost itself."""
    url, m = meta
    procs = {b.address: b for b in await bookie_cluster(5, url)}
    lc = LedgerClient(m, explicit_lac_interval=0.05, lost_poll_s=0.1)
    w = await write_ledger(lc, 60, close=False)
    victim = w.metadata.ensembles[0][1][2]
    procs[victim].kill()
    await eventually(lambda: gone(m, victim))
    await marks.mark(m, w.ledger_id, {victim: (marks.now_ms(), marks.LOST)})

    async def writer_replaced_it() -> bool:
        return victim not in (await lc.metadata(w.ledger_id)).ensembles[-1][1]

    await eventually(writer_replaced_it)  # without a single add
    worker = ReplicationWorker(lc.env, "w")
    assert await worker.process(w.ledger_id)  # confirmed part moved, tail clean: unmarked
    md = await lc.metadata(w.ledger_id)
    assert md.state == "open" and victim not in md.bookies()
    assert await marks.marked_ledgers(m) == []
    # The writer carries on over both changes.
    await asyncio.gather(*(w.append(payload(w.ledger_id, i)) for i in range(60, 80)))
    await w.close()
    assert await read_all(m, w.ledger_id) == [payload(w.ledger_id, i) for i in range(80)]
    await lc.close()
