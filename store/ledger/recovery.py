"""Recovering a ledger whose writer is gone: fence, find the end, re-replicate the tail, close.

BookKeeper's LedgerRecoveryOp. Safe to run twice or concurrently: every recoverer fences and
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
from store.ledger.errors import LedgerRecoveryError, MetadataVersionError
from store.ledger.fetch import read_one
from store.ledger.metadata import CLOSED, IN_RECOVERY, OPEN, LedgerMetadata
from store.ledger.metrics import LEDGER_RECOVERIES
from store.ledger.quorum import is_covered, missing_for_absence, write_set

log = logging.getLogger(__name__)

_READ_AHEAD = 16  # recovery reads in flight


async def recover(env: LedgerEnv, ledger_id: int) -> LedgerMetadata:
    """Close the ledger where its last acknowledgeable entry ends; return the closed metadata."""
    LEDGER_RECOVERIES.inc()
    md = await _mark_in_recovery(env, ledger_id)
    if md.state == CLOSED:
        return md
    start, ensemble = md.ensembles[-1]
    lac = max(await _fence(env, md), start - 1)
    last, length = lac, await _length_at(env, md, lac)
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
    return await _close(env, md, last, length)


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
            lac, _ = await asyncio.wait_for(env.bookies.get(ensemble[idx]).fence(lid), env.read_timeout)
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
            packed = await asyncio.wait_for(env.bookies.get(addr).read(lid, entry_id), env.read_timeout)
        except (NoEntryError, NoLedgerError):
            return None
        unpack_entry(packed, lid, entry_id)
        return packed

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
        await asyncio.wait_for(
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
        f.add_done_callback(lambda f: f.cancelled() or f.exception())
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
