"""Reading entries from replicas: failover, speculative reads, digest checks, LAC queries."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from store.bookie.entry import EntryDigestError, unpack_entry
from store.bookie.errors import BookieError, NoEntryError, NoLedgerError
from store.framing import Buffer
from store.ledger.body import unwrap
from store.ledger.env import LedgerEnv
from store.ledger.errors import LedgerReadError
from store.ledger.metadata import LedgerMetadata
from store.ledger.quorum import write_set
from store.tasks import retrieve_outcome, within

T = TypeVar("T")
_RANGE_BYTES = 4 << 20
# A range read asks a replica for up to _RANGE_BYTES: its speculative delay grows with the
# bytes asked at this rate, so a busy but healthy bookie streaming 4 MiB is not raced by a
# second replica doing the same work (which halved catch-up reads on a loaded machine).
_SPECULATIVE_BYTES_PER_S = 10 << 20
_PARALLEL_READS = 64  # per-entry reads in flight when a ledger is striped (E > WQ)
_READ_ERRORS = (BookieError, OSError, TimeoutError, EntryDigestError, ValueError)


async def first_success(
    calls: Sequence[Callable[[], Awaitable[T]]], *, speculative: float, attempt_timeout: float, what: str
) -> T:
    """Try `calls` (one per replica) in order: the next starts when the current one fails or
    has not answered within `speculative` seconds; the first success wins, the rest are
    cancelled. Each call gets `attempt_timeout` seconds. LedgerReadError if all fail."""
    tasks: set[asyncio.Task[T]] = set()
    errors: list[BaseException] = []
    started = 0

    async def attempt(call: Callable[[], Awaitable[T]]) -> T:
        return await within(call(), attempt_timeout)  # in the attempt's task: a call failing to start fails it alone

    def launch() -> None:
        nonlocal started
        tasks.add(asyncio.ensure_future(attempt(calls[started])))
        started += 1

    launch()
    try:
        while tasks:
            wait = speculative if started < len(calls) else None
            done, _ = await asyncio.wait(tasks, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                launch()
                continue
            for t in done:
                tasks.discard(t)
                exc = t.exception()
                if exc is None:
                    return t.result()
                if not isinstance(exc, _READ_ERRORS):
                    raise exc
                errors.append(exc)
            if started < len(calls):
                launch()
    finally:
        for t in tasks:
            # A losing attempt may still end with an error (its connection lost as it is
            # cancelled): nobody awaits it, so it must not be logged as never retrieved.
            t.cancel()
            t.add_done_callback(retrieve_outcome)
    raise LedgerReadError(f"{what}: every replica failed: {'; '.join(repr(e) for e in errors)}")


def _check(ledger_id: int, entry_id: int, packed: Buffer) -> tuple[int, memoryview]:
    _, _, _, body = unpack_entry(packed, ledger_id, entry_id)
    return unwrap(body)


async def read_entries(
    env: LedgerEnv, md: LedgerMetadata, first: int, last: int, max_bytes: int | None = None
) -> list[tuple[int, memoryview]]:
    """Entries first..last as (cumulative length, payload), verified. The caller checks LAC.
    With max_bytes, it may stop early once that many payload bytes are read (at least one
    entry): payloads are views of the bookies' responses, so a bound keeps memory bounded."""
    out: list[tuple[int, memoryview]] = []
    budget = [max_bytes if max_bytes is not None else 1 << 62]
    for index, (start, ensemble) in enumerate(md.ensembles):
        end = md.fragment_end(index)
        lo = max(first, start)
        hi = last if end is None else min(last, end)
        if lo > hi:
            continue
        if md.write_quorum == md.ensemble_size:
            out.extend(await _read_fragment_range(env, md, ensemble, lo, hi, budget))
        else:
            out.extend(await _read_fragment_striped(env, md, ensemble, lo, hi, budget))
        if budget[0] <= 0:
            break
    return out


async def _read_fragment_range(
    env: LedgerEnv, md: LedgerMetadata, ensemble: list[str], first: int, last: int, budget: list[int]
) -> list[tuple[int, memoryview]]:
    """Every bookie holds every entry (WQ == E): read whole ranges from one replica at a time,
    until `last` or until budget[0] (bytes left, decremented here) is spent."""
    lid = md.ledger_id
    out: list[tuple[int, memoryview]] = []
    nxt = first
    while nxt <= last and budget[0] > 0:
        want = max(1, min(_RANGE_BYTES, budget[0]))
        # Rotate the starting replica so concurrent readers spread their load.
        order = [ensemble[(nxt + i) % len(ensemble)] for i in range(len(ensemble))]

        def call(addr: str, lo: int = nxt, want: int = want) -> Callable[[], Awaitable[list[tuple[int, memoryview]]]]:
            async def go() -> list[tuple[int, memoryview]]:
                got = await env.bookies.get(addr).read_range(lid, lo, last, want)
                if not got:
                    raise NoEntryError(f"{addr} returned no entries from {lo}")
                return [_check(lid, lo + i, packed) for i, packed in enumerate(got[: last - lo + 1])]

            return go

        batch = await first_success(
            [call(a) for a in order],
            speculative=env.speculative_read_timeout + want / _SPECULATIVE_BYTES_PER_S,
            attempt_timeout=env.read_timeout,
            what=f"ledger {lid} entries {nxt}..{last}",
        )
        out.extend(batch)
        nxt += len(batch)
        budget[0] -= sum(len(b) for _, b in batch)
    return out


async def read_one(
    env: LedgerEnv, md: LedgerMetadata, ensemble: list[str], entry_id: int
) -> tuple[int, memoryview]:
    lid = md.ledger_id

    def call(addr: str) -> Callable[[], Awaitable[tuple[int, memoryview]]]:
        async def go() -> tuple[int, memoryview]:
            return _check(lid, entry_id, await env.bookies.get(addr).read(lid, entry_id))

        return go

    order = [ensemble[i] for i in write_set(entry_id, md.ensemble_size, md.write_quorum)]
    return await first_success(
        [call(a) for a in order],
        speculative=env.speculative_read_timeout,
        attempt_timeout=env.read_timeout,
        what=f"ledger {lid} entry {entry_id}",
    )


async def _read_fragment_striped(
    env: LedgerEnv, md: LedgerMetadata, ensemble: list[str], first: int, last: int, budget: list[int]
) -> list[tuple[int, memoryview]]:
    out: list[tuple[int, memoryview]] = []
    for lo in range(first, last + 1, _PARALLEL_READS):
        if budget[0] <= 0:
            break
        hi = min(last, lo + _PARALLEL_READS - 1)
        got = await asyncio.gather(*(read_one(env, md, ensemble, e) for e in range(lo, hi + 1)))
        out.extend(got)
        budget[0] -= sum(len(b) for _, b in got)
    return out


async def bookie_lac(env: LedgerEnv, md: LedgerMetadata) -> int:
    """The highest LAC any bookie of the last fragment knows (at least the entry before that
    fragment, which the writer had acknowledged when it started the fragment)."""
    start, ensemble = md.ensembles[-1]

    async def one(addr: str) -> int:
        try:
            lac, _ = await within(env.bookies.get(addr).read_lac(md.ledger_id), env.read_timeout)
        except (NoLedgerError, NoEntryError):
            return -1
        return lac

    results = await asyncio.gather(*(one(a) for a in ensemble), return_exceptions=True)
    lacs = [r for r in results if isinstance(r, int)]
    if not lacs:
        raise LedgerReadError(f"ledger {md.ledger_id}: no bookie answered read_lac: {results}")
    return max(max(lacs), start - 1)
