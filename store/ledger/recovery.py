"""Recovering a ledger whose writer is gone: fence, find the end, re-replicate the tail, close.

BookKeeper's LedgerRecoveryOp. When a bookie of the last fragment is gone, the re-added tail goes
to a replacement (a new fragment, as BookKeeper's recovery ensemble change). Safe to run twice or concurrently: every recoverer fences and
reads the same bookies, and the compare-and-set that closes the ledger decides; a loser adopts
the winner's closed metadata.
"""

from __future__ import annotations

import asyncio
import logging

from store.bookie.entry import EntryDigestError, unpack_entry
from store.bookie.errors import BookieError, NoEntryError, NoLedgerError
from store.ledger.body import unwrap
from store.ledger.env import LedgerEnv
from store.ledger.errors import LedgerRecoveryError, MetadataVersionError, NotEnoughBookiesError
from store.ledger.fetch import read_one
from store.ledger.metadata import CLOSED, IN_RECOVERY, OPEN, LedgerMetadata
from store.ledger.metrics import LEDGER_RECOVERIES
from store.ledger.placement import available_bookies
from store.ledger.quorum import is_covered, missing_for_absence, write_set
from store.tasks import retrieve_outcome, within

log = logging.getLogger(__name__)

_READ_AHEAD = 16  # recovery reads in flight


async def recover(env: LedgerEnv, ledger_id: int) -> LedgerMetadata:
    """Close the ledger where its last acknowledgeable entry ends; return the closed metadata."""
    LEDGER_RECOVERIES.inc()
    md = await _mark_in_recovery(env, ledger_id)
    if md.state == CLOSED:
        return md
    start = md.ensembles[-1][0]
    lac = max(await _fence(env, md), start - 1)
    last, length = lac, await _length_at(env, md, lac)
    # Reads use the fenced fragment; re-adds go to its ensemble, or to replacements of gone bookies.
    new_md = await _replace_gone(env, md, lac)
    if new_md.state == CLOSED:
        return new_md
    ensemble = new_md.ensembles[-1][1]
    readds: list[asyncio.Task[None]] = []
    try:
        eid = lac + 1
        done = False
        while not done:
            batch = [asyncio.ensure_future(_recovery_read(env, md, e)) for e in range(eid, eid + _READ_AHEAD)]
            try:
                for e, fut in zip(range(eid, eid + _READ_AHEAD), batch):
                    packed = await fut
                    if packed is None:
                        done = True
                        break
                    length = unwrap(unpack_entry(packed, ledger_id, e)[3])[0]
                    last = e
                    readds.append(asyncio.ensure_future(_recovery_add(env, md, ensemble, e, packed)))
            finally:
                for fut in batch:
                    fut.cancel()
                await asyncio.gather(*batch, return_exceptions=True)
            eid += _READ_AHEAD
        await asyncio.gather(*readds)
    finally:
        for t in readds:
            t.cancel()
    return await _close(env, new_md, last, length)


async def _replace_gone(env: LedgerEnv, md: LedgerMetadata, lac: int) -> LedgerMetadata:
    """A bookie of the last fragment that is no longer registered cannot take the re-added
    tail: start a new fragment at lac+1 on a replacement (recorded with compare-and-set before
    any re-add, as BookKeeper's recovery ensemble change). The entries up to lac stay where they
    are; auto-recovery re-replicates them."""
    ensemble = md.ensembles[-1][1]
    live = await available_bookies(env.meta)
    alive = {b.address for b in live}
    gone = {a for a in ensemble if a not in alive}
    if not gone:
        return md
    new = list(ensemble)
    for i, addr in enumerate(ensemble):
        if addr in gone:
            try:
                new[i] = env.placement.replace_bookie(new, i, md.write_quorum, live, exclude=gone)
            except NotEnoughBookiesError as e:
                log.warning("ledger %d: no replacement for %s during recovery: %s", md.ledger_id, addr, e)
    if new == ensemble:
        return md
    try:
        updated = await env.cas_metadata(md.with_ensemble(lac + 1, new))
    except MetadataVersionError:
        current = await env.read_metadata(md.ledger_id)
        first, ens = current.ensembles[-1]
        if current.state == CLOSED or (first == lac + 1 and not set(ens) & gone):
            return current  # another recoverer closed it, or made the same change
        raise LedgerRecoveryError(f"ledger {md.ledger_id}: metadata changed during recovery") from None
    log.info("ledger %d: recovery re-adds from %d to %s (gone: %s)", md.ledger_id, lac + 1, new, sorted(gone),
             extra={"fields": {"event": "ensemble_changed", "ledger": md.ledger_id, "first_entry": lac + 1,
                               "ensemble": new}})
    return updated


async def _mark_in_recovery(env: LedgerEnv, ledger_id: int) -> LedgerMetadata:
    md = await env.read_metadata(ledger_id)
    while md.state == OPEN:
        try:
            return await env.cas_metadata(md.copy(state=IN_RECOVERY))
        except MetadataVersionError:
            md = await env.read_metadata(ledger_id)
    return md


async def _fence(env: LedgerEnv, md: LedgerMetadata) -> int:
    """Fence every bookie of the last fragment; wait until the answers cover every write
    quorum (the old writer can then complete no add). Returns the highest LAC reported."""
    ensemble = md.ensembles[-1][1]
    lid = md.ledger_id

    async def one(idx: int) -> tuple[int, int]:
        try:
            lac, _ = await within(env.bookies.get(ensemble[idx]).fence(lid), env.read_timeout)
        except (NoLedgerError, NoEntryError):
            lac = -1  # a valid negative answer: fenced, holds nothing of this ledger
        return idx, lac

    pending = {asyncio.ensure_future(one(i)) for i in range(len(ensemble))}
    answered: set[int] = set()
    best = -1
    errors: list[BaseException] = []
    try:
        while pending and not is_covered(md.ensemble_size, md.write_quorum, md.ack_quorum, answered):
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for f in done:
                exc = f.exception()
                if exc is None:
                    idx, lac = f.result()
                    answered.add(idx)
                    best = max(best, lac)
                elif isinstance(exc, (BookieError, OSError, TimeoutError)):
                    errors.append(exc)
                else:
                    raise exc
    finally:
        for f in pending:
            f.cancel()
    if not is_covered(md.ensemble_size, md.write_quorum, md.ack_quorum, answered):
        raise LedgerRecoveryError(
            f"ledger {lid}: could fence only {sorted(ensemble[i] for i in answered)} of {ensemble}: {errors}"
        )
    return best


async def _length_at(env: LedgerEnv, md: LedgerMetadata, entry_id: int) -> int:
    if entry_id < 0:
        return 0
    length, _ = await read_one(env, md, md.ensemble_for(entry_id), entry_id)
    return length


async def _recovery_read(env: LedgerEnv, md: LedgerMetadata, entry_id: int) -> bytes | None:
    """The entry if any replica has a valid copy; None once enough of its write set deny it
    that it can never have reached an ack quorum."""
    lid = md.ledger_id
    ensemble = md.ensembles[-1][1]
    targets = [ensemble[i] for i in write_set(entry_id, md.ensemble_size, md.write_quorum)]
    need_absent = missing_for_absence(md.write_quorum, md.ack_quorum)

    async def one(addr: str) -> bytes | None:
        try:
            packed = await within(env.bookies.get(addr).read(lid, entry_id), env.read_timeout)
        except (NoEntryError, NoLedgerError):
            return None
        unpack_entry(packed, lid, entry_id)
        return bytes(packed)

    pending = {asyncio.ensure_future(one(a)) for a in targets}
    absent = 0
    errors: list[BaseException] = []
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for f in done:
                exc = f.exception()
                if exc is None:
                    packed = f.result()
                    if packed is not None:
                        return packed
                    absent += 1
                    if absent >= need_absent:
                        return None
                elif isinstance(exc, (BookieError, OSError, TimeoutError, EntryDigestError)):
                    errors.append(exc)
                else:
                    raise exc
    finally:
        for f in pending:
            f.cancel()
    raise LedgerRecoveryError(
        f"ledger {lid}: cannot tell whether entry {entry_id} exists ({absent} denials, errors {errors})"
    )


async def _recovery_add(
    env: LedgerEnv, md: LedgerMetadata, ensemble: list[str], entry_id: int, packed: bytes
) -> None:
    """Re-add a recovered entry to its whole write set (the recovery flag passes the fence).
    Done once AQ bookies have it; the adds to the others go on in the background."""
    targets = [ensemble[i] for i in write_set(entry_id, md.ensemble_size, md.write_quorum)]

    async def one(addr: str) -> None:
        await within(
            env.bookies.get(addr).add(md.ledger_id, packed, recovery=True), env.add_timeout * 2
        )

    pending = {asyncio.ensure_future(one(a)) for a in targets}
    ok = 0
    errors: list[BaseException] = []
    while pending and ok < md.ack_quorum:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for f in done:
            exc = f.exception()
            if exc is None:
                ok += 1
            else:
                errors.append(exc)
    for f in pending:
        _background.add(f)
        f.add_done_callback(_background.discard)
        f.add_done_callback(retrieve_outcome)
    if ok < md.ack_quorum:
        raise LedgerRecoveryError(
            f"ledger {md.ledger_id}: re-adding entry {entry_id} reached {ok} bookies: {errors}"
        )


_background: set[asyncio.Future[None]] = set()


async def _close(env: LedgerEnv, md: LedgerMetadata, last: int, length: int) -> LedgerMetadata:
    while True:
        try:
            closed = await env.cas_metadata(md.copy(state=CLOSED, last_entry_id=last, length=length))
            log.info("ledger %d recovered: last entry %d, %d bytes", md.ledger_id, last, length,
                     extra={"fields": {"event": "ledger_recovered", "ledger": md.ledger_id, "last_entry": last,
                                       "bytes": length}})
            return closed
        except MetadataVersionError:
            current = await env.read_metadata(md.ledger_id)
            if current.state == CLOSED:
                return current  # another recoverer won: its answer is the ledger's end
            if current.ensembles != md.ensembles:
                raise LedgerRecoveryError(
                    f"ledger {md.ledger_id}: ensembles changed during recovery"
                ) from None
            md = current
