"""A read handle on a ledger: closed (read to its last entry) or still open (read to the LAC)."""

from __future__ import annotations

import asyncio

from store.bookie.errors import BookieError
from store.ledger.env import LedgerEnv
from store.ledger.errors import LedgerError, ReadBeyondLacError
from store.ledger.fetch import bookie_lac, read_entries, read_one
from store.ledger.metadata import LedgerMetadata
from store.retry import Backoff, Retry

# A bookie without the ledger yet (or unreachable) is asked again soon: a tailing reader waits.
LAC_POLL_BACKOFF = Backoff(initial=0.02, maximum=0.5)


class LedgerReader:
    def __init__(self, env: LedgerEnv, metadata: LedgerMetadata, last_add_confirmed: int) -> None:
        self._env = env
        self.ledger_id = metadata.ledger_id
        self.metadata = metadata
        self.last_add_confirmed = last_add_confirmed

    @property
    def is_closed(self) -> bool:
        return self.metadata.is_closed

    async def read(self, first: int, last: int, max_bytes: int | None = None) -> list[memoryview]:
        """Payloads of entries first..last (views of the bookies' responses, no copy); with
        max_bytes, possibly fewer, about that many bytes (at least one entry).
        ReadBeyondLacError past the LAC (those entries may never have been acknowledged,
        and recovery may drop them)."""
        if first < 0 or last < first:
            raise ValueError(f"bad entry range {first}..{last}")
        if last > self.last_add_confirmed:
            if not self.is_closed:
                await self.read_lac()
            if last > self.last_add_confirmed:
                raise ReadBeyondLacError(
                    f"ledger {self.ledger_id}: entry {last} is past the last add confirmed {self.last_add_confirmed}"
                )
        return [p for _, p in await read_entries(self._env, self.metadata, first, last, max_bytes)]

    async def read_unconfirmed(self, first: int, max_entries: int) -> list[bytes]:
        """Payloads of entries from `first` on, past the LAC, that some bookie of their write
        set holds, up to the first that none has (at most max_entries): BookKeeper's
        readUnconfirmedEntries. Entry by entry, as each may sit on different bookies; the span
        past the LAC is at most the writer's in-flight window. Nothing past a closed ledger's end."""
        out: list[bytes] = []
        md = self.metadata
        end = md.last_entry_id if self.is_closed else first + max_entries - 1
        for eid in range(first, min(end, first + max_entries - 1) + 1):
            try:
                _, payload = await read_one(self._env, md, md.ensemble_for(eid), eid)
            except LedgerError:
                break
            out.append(bytes(payload))
        return out

    async def _refresh_metadata(self) -> None:
        self.metadata = await self._env.read_metadata(self.ledger_id)
        if self.metadata.is_closed:
            self.last_add_confirmed = self.metadata.last_entry_id

    async def read_lac(self) -> int:
        """Refresh the LAC: from the metadata once closed, else the highest any bookie knows."""
        if self.is_closed:
            return self.last_add_confirmed
        await self._refresh_metadata()
        if not self.is_closed:
            self.last_add_confirmed = max(self.last_add_confirmed, await bookie_lac(self._env, self.metadata))
        return self.last_add_confirmed

    async def wait_lac(self, after: int, timeout: float) -> int:  # noqa: ASYNC109
        """Long-poll until the LAC passes `after`; returns the new LAC, or `after` on timeout.
        Bookies learn the LAC from the next entry, or from the writer's explicit LAC once it
        has been idle for its explicit_lac_interval (with 0, only from the next entry)."""
        if self.last_add_confirmed > after:
            return self.last_add_confirmed
        if self.is_closed:
            return after
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        polls = [
            asyncio.ensure_future(self._poll(a, after, deadline)) for a in self.metadata.ensembles[-1][1]
        ]
        best = after
        try:
            pending: set[asyncio.Future[int]] = set(polls)
            while pending and best <= after:
                left = deadline + self._env.read_timeout - loop.time()
                if left <= 0:
                    break
                done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for f in done:
                    best = max(best, f.result())
        finally:
            for f in polls:
                f.cancel()
        if best > after:
            self.last_add_confirmed = max(self.last_add_confirmed, best)
            return self.last_add_confirmed
        await self._refresh_metadata()  # closed meanwhile?
        return self.last_add_confirmed if self.last_add_confirmed > after else after

    async def _poll(self, address: str, after: int, deadline: float) -> int:
        """One bookie's long poll until `deadline`. A bookie that has no entry of the ledger
        yet, or cannot be reached, is asked again after a short backoff."""
        loop = asyncio.get_running_loop()
        retry = Retry(LAC_POLL_BACKOFF, within=deadline - loop.time(), clock=self._env.clock)
        while (left := deadline - loop.time()) > 0:
            try:
                return await self._env.bookies.get(address).wait_lac(self.ledger_id, after, left)
            except (BookieError, OSError, TimeoutError):
                if not await retry.pause():
                    break
        return after

    async def close(self) -> None:
        """Nothing to release: bookie connections belong to the client's pool."""
