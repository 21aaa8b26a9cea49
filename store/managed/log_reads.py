"""The read side of an owned segmented log (the owning mode of store/managed/reader.py):
confirmed entries from the entry cache, or from bookies on a miss; tailing readers wait on
append notifications."""

from __future__ import annotations

import asyncio
import bisect
import time

from store.managed.cache import EntryCache
from store.managed.errors import ManagedLogError
from store.managed.position import Entry, Position
from store.managed.reader import DEFAULT_MAX_READ_BYTES, LogReader
from store.tasks import within


class LogReads(LogReader):
    """Base of ManagedLog (which owns the state declared here)."""

    _cache: EntryCache
    _token: int
    _last_confirmed: Position
    _tail_waiters: list[asyncio.Future[None]]
    _failure: ManagedLogError | None
    _closed: bool

    def _confirmed_in_current(self) -> int:
        lc = self._last_confirmed
        return lc.entry_id + 1 if lc.ledger_id == self._ids[-1] else 0

    def _ledger_last(self, idx: int) -> int:
        """Last readable entry id of the idx-th ledger."""
        if idx == len(self._ids) - 1:
            return self._confirmed_in_current() - 1
        return self._md.ledgers[idx].entries - 1

    def next_position(self, pos: Position) -> Position:
        """The position right after `pos` (possibly not written yet)."""
        ids = self._ids
        i = bisect.bisect_left(ids, pos.ledger_id)
        if i < len(ids) and ids[i] == pos.ledger_id:
            if i == len(ids) - 1 or pos.entry_id < self._md.ledgers[i].entries - 1:
                return Position(pos.ledger_id, pos.entry_id + 1)
            i += 1
        if i >= len(ids):
            return Position(ids[-1], self._confirmed_in_current())
        return Position(ids[i], 0)

    def entries_after(self, pos: Position) -> int:
        """Number of confirmed entries strictly after `pos`."""
        total = 0
        for i, lid in enumerate(self._ids):
            n = self._ledger_last(i) + 1
            if lid > pos.ledger_id:
                total += n
            elif lid == pos.ledger_id:
                total += max(0, n - 1 - pos.entry_id)
        return total

    def _notify(self) -> None:
        waiters, self._tail_waiters = self._tail_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait(self, after: Position, max_wait: float) -> bool:
        """Wait (woken by appends, no polling) until an entry after `after` is confirmed."""
        deadline = time.monotonic() + max_wait
        while self._last_confirmed <= after or self.next_position(after) > self._last_confirmed:
            if self._failure is not None or self._closed:
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._tail_waiters.append(fut)
            try:
                await within(fut, remaining)
            except TimeoutError:
                return False
        return True

    async def _readable_last(self, idx: int, want: int) -> int:
        return self._ledger_last(idx)

    def _cached(self, ledger_id: int, first: int, last: int, max_bytes: int) -> list[bytes | memoryview] | None:
        return self._cache.get_range(self._token, ledger_id, first, last, max_bytes)

    async def read_or_wait(
        self,
        start: Position,
        max_entries: int = 1000,
        max_bytes: int = DEFAULT_MAX_READ_BYTES,
        max_wait: float = 0.5,
    ) -> list[Entry]:
        """read(), but if nothing is available yet wait up to `max_wait` s for an append."""
        got = await self.read(start, max_entries, max_bytes)
        if got:
            return got
        prev = Position(start.ledger_id, start.entry_id - 1)
        if await self.wait(prev, max_wait):
            return await self.read(start, max_entries, max_bytes)
        return []
