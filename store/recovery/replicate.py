"""Re-replicating one ledger: copy the entries a lost (or emptied) bookie held to replacements
chosen by the placement policy, then record the new ensembles with compare-and-set.

BookKeeper's LedgerFragmentReplicator, fence-free. Fragments followed by a newer one are
immutable: their entries are copied whole, each verified by its digest, and the fragment's
bookie is swapped in the metadata. The last fragment of a closed ledger ends at its last entry.
The last fragment of an OPEN ledger is still being written: it is split at the LAC the bookies
know (entries up to it are acknowledged, hence on a surviving replica), the confirmed part moves
to the replacement and the open rest keeps the writer's ensemble, which the writer changes
itself when its adds fail. The writer's change wins any race: on a compare-and-set failure the
worker re-reads and plans again, and never fences a ledger it does not own. A bookie that is
alive but lacks entries (a wiped disk, a corrupt copy) is refilled in place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from store.bookie.entry import EntryDigestError, unpack_entry
from store.bookie.errors import BookieError, NoEntryError, NoLedgerError
from store.ledger.env import LedgerEnv
from store.ledger.errors import LedgerReadError, MetadataVersionError, NoSuchLedgerError
from store.ledger.fetch import bookie_lac
from store.ledger.metadata import IN_RECOVERY, LedgerMetadata
from store.ledger.placement import BookieInfo, available_bookies
from store.ledger.quorum import write_set
from store.tasks import within

log = logging.getLogger(__name__)

_PARALLEL = 32  # entries copied at a time
_ATTEMPTS = 5  # plans tried when compare-and-set keeps losing to the writer
_READ_ERRORS = (BookieError, OSError, TimeoutError, EntryDigestError, ValueError)


class ReplicationError(Exception):
    """No surviving replica of an entry could be read, or a copy could not be written."""


@dataclass
class Outcome:
    done: bool  # no fragment of the ledger names a bad bookie any more (or it is gone)
    entries: int = 0
    bytes: int = 0
    deferred: str = ""  # why not done


@dataclass
class _Copy:
    """One fragment's work: entries [first, last] whose position p goes to targets[p]."""

    first: int
    last: int
    ensemble: list[str]
    targets: dict[int, str]  # ensemble position -> bookie receiving its entries
    refill: frozenset[int]  # positions refilled in place (copy only what the bookie lacks)


async def rereplicate(
    env: LedgerEnv,
    ledger_id: int,
    suspects: Collection[str] = (),
    *,
    excluded: Collection[str] = (),
    before_cas: Callable[[LedgerMetadata], Awaitable[None]] | None = None,
) -> Outcome:
    """Make every fragment of the ledger fully replicated on live bookies.

    A bookie of the ledger that is not registered, or is in `excluded` (decommissioning), is
    replaced; one in `suspects` that is alive is refilled in place. `before_cas` (tests) runs
    just before the metadata compare-and-set."""
    total = Outcome(done=False)
    for _ in range(_ATTEMPTS):
        try:
            md = await env.read_metadata(ledger_id)
        except NoSuchLedgerError:
            total.done = True
            return total
        if md.state == IN_RECOVERY:
            total.deferred = "ledger is being recovered"
            return total
        live = await available_bookies(env.meta)
        alive = {b.address for b in live}
        bad = {a for a in md.bookies() if a not in alive or a in excluded}
        refill = {a for a in suspects if a in alive and a not in excluded}
        writable = [b for b in live if b.address not in excluded and not b.read_only]
        plan, new_ensembles, open_tail_bad = await _plan(env, md, bad, refill, writable, set(excluded))
        for c in plan:
            n, size = await _copy_fragment(env, md, c)
            total.entries += n
            total.bytes += size
        if new_ensembles == md.ensembles:
            total.done = not open_tail_bad
            total.deferred = "the open ledger's writer replaces its own bookies" if open_tail_bad else ""
            return total
        if before_cas is not None:
            await before_cas(md)
        try:
            await env.cas_metadata(md.copy(ensembles=new_ensembles))
        except MetadataVersionError:
            log.info("ledger %d: metadata changed while re-replicating (the writer wins): re-planning", ledger_id)
            continue
        log.info("ledger %d re-replicated: %s -> %s", ledger_id, md.ensembles, new_ensembles,
                 extra={"fields": {"event": "ledger_rereplicated", "ledger": ledger_id, "entries": total.entries,
                                   "bytes": total.bytes}})
        total.done = not open_tail_bad
        total.deferred = "the open ledger's writer replaces its own bookies" if open_tail_bad else ""
        return total
    total.deferred = "metadata kept changing"
    return total


async def _plan(
    env: LedgerEnv,
    md: LedgerMetadata,
    bad: set[str],
    refill: set[str],
    writable: list[BookieInfo],
    excluded: set[str],
) -> tuple[list[_Copy], list[tuple[int, list[str]]], bool]:
    """(fragments to copy, the ensembles afterwards, whether the open tail still has a bad bookie)."""
    plan: list[_Copy] = []
    out: list[tuple[int, list[str]]] = []
    open_tail_bad = False
    for i, (first, ensemble) in enumerate(md.ensembles):
        end = md.fragment_end(i)
        open_tail = end is None and not md.is_closed
        if md.is_closed:
            end = md.last_entry_id if end is None else min(end, md.last_entry_id)
        bad_pos = [p for p, a in enumerate(ensemble) if a in bad]
        refill_pos = frozenset(p for p, a in enumerate(ensemble) if a in refill)
        if open_tail:
            end = await bookie_lac(env, md) if (bad_pos or refill_pos) else first - 1
        assert end is not None
        if not bad_pos and not refill_pos:
            out.append((first, list(ensemble)))
            continue
        new = list(ensemble)
        for p in bad_pos:
            new[p] = env.placement.replace_bookie(new, p, md.write_quorum, writable, exclude=bad | excluded)
        targets = {p: new[p] for p in bad_pos} | {p: ensemble[p] for p in refill_pos}
        if end >= first:
            plan.append(_Copy(first, end, list(ensemble), targets, refill_pos))
        if open_tail and bad_pos:
            open_tail_bad = True
            if end >= first:
                # Confirmed part to the replacements; the writer keeps its ensemble from LAC+1.
                out.append((first, new))
                out.append((end + 1, list(ensemble)))
            else:
                out.append((first, list(ensemble)))
        else:
            out.append((first, new))
    return plan, out, open_tail_bad


async def _copy_fragment(env: LedgerEnv, md: LedgerMetadata, c: _Copy) -> tuple[int, int]:
    """Copy entries [c.first, c.last] to their targets; (entries written, bytes written)."""
    sem = asyncio.Semaphore(_PARALLEL)
    counts = [0, 0]
    lid = md.ledger_id

    async def one(eid: int) -> None:
        ws = write_set(eid, md.ensemble_size, md.write_quorum)
        dests = [p for p in ws if p in c.targets]
        if not dests:
            return
        async with sem:
            if c.refill:
                dests = [p for p in dests if p not in c.refill or not await _has(env, c.targets[p], lid, eid)]
                if not dests:
                    return
            # Bookies being refilled in place are sources too (after the untouched ones): one
            # lacking this entry answers NoEntry and the next is read.
            sources = [c.ensemble[q] for q in ws if q not in c.targets] + [c.ensemble[q] for q in ws if q in c.refill]
            packed = await _read_valid(env, sources, lid, eid)
            for p in dests:
                await within(
                    env.bookies.get(c.targets[p]).add(lid, packed, recovery=True), env.add_timeout * 2
                )
                counts[0] += 1
                counts[1] += len(packed)

    tasks = [asyncio.ensure_future(one(e)) for e in range(c.first, c.last + 1)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
    return counts[0], counts[1]


async def _has(env: LedgerEnv, addr: str, lid: int, eid: int) -> bool:
    """Whether the bookie holds a digest-valid copy of the entry."""
    try:
        packed = await within(env.bookies.get(addr).read(lid, eid), env.read_timeout)
        unpack_entry(packed, lid, eid)
        return True
    except (NoEntryError, NoLedgerError, EntryDigestError):
        return False
    except _READ_ERRORS:
        return False


async def _read_valid(env: LedgerEnv, sources: list[str], lid: int, eid: int) -> bytes:
    errors: list[BaseException] = []
    for addr in sources:
        try:
            packed = await within(env.bookies.get(addr).read(lid, eid), env.read_timeout)
            unpack_entry(packed, lid, eid)  # verifies the digest: never spread a corrupt copy
            return bytes(packed)
        except _READ_ERRORS as e:
            errors.append(e)
    raise ReplicationError(
        f"ledger {lid}: no surviving replica of entry {eid} could be read from {sources}: {errors}"
    ) from (errors[-1] if errors else LedgerReadError("no sources"))
