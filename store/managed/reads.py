"""Reading entries from bookies for catch-up readers: ledger handles kept open, large range
reads, and read-ahead of the next range while the caller consumes the current one.

Memory: with an entry cache (an owned log), what is read beyond the caller's request lands in
that cache, within its byte budget, and read-ahead in flight is reserved against the same
budget; so a process with hundreds of catch-up readers holds --cache-mb of read data, not a
few chunks per log (which once held 16 MiB per partition, gigabytes over 500 partitions).
Without one (a read-only reader), at most one chunk of leftovers is kept per reader.

Entries are views of the bookies' responses (no copy), and reads are bounded in bytes as well as
entries (an open ledger's average entry size is not known yet: a 4096-entry chunk of 1 MiB
batches was once read in one go). The entry returned last is kept too: a Kafka fetch that stops
inside a batch asks for it again, and it is not read from bookies twice."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from store.managed.cache import EntryCache, retainable
from store.managed.ledgers import LedgerClientLike

READ_CHUNK_BYTES = 8 << 20
MAX_CHUNK_ENTRIES = 4096
_MAX_HANDLES = 64
_MAX_AHEAD = 2

_Entries = Sequence[bytes | memoryview]


class BookieReads:
    def __init__(
        self,
        client: LedgerClientLike,
        *,
        chunk_bytes: int = READ_CHUNK_BYTES,
        cache: EntryCache | None = None,
        token: int = 0,
    ) -> None:
        self._client = client
        self._chunk_bytes = chunk_bytes
        self._cache = cache
        self._token = token  # the owning log's key space in `cache`
        self._handles: OrderedDict[int, Any] = OrderedDict()
        self._opening: dict[int, asyncio.Future[Any]] = {}
        # (ledger, first entry) -> entries from there: read-ahead in flight, or (without a
        # cache) leftovers of the last read.
        self._ahead: OrderedDict[tuple[int, int], asyncio.Future[_Entries]] = OrderedDict()
        self._last: tuple[int, int, bytes | memoryview] | None = None  # (ledger, entry, data) returned last

    async def handle(self, ledger_id: int) -> Any:
        h = self._handles.get(ledger_id)
        if h is not None:
            self._handles.move_to_end(ledger_id)
            return h
        pending = self._opening.get(ledger_id)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._opening[ledger_id] = fut
        try:
            h = await self._client.open(ledger_id, recovery=False)
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._opening.pop(ledger_id, None)
        fut.set_result(h)
        self._handles[ledger_id] = h
        while len(self._handles) > _MAX_HANDLES:
            _, old = self._handles.popitem(last=False)
            asyncio.get_running_loop().create_task(old.close())
        return h

    def _chunk_entries(self, avg_entry_size: int) -> int:
        return max(1, min(MAX_CHUNK_ENTRIES, self._chunk_bytes // max(avg_entry_size, 1)))

    async def _fetch(self, ledger_id: int, first: int, last: int, is_open: bool) -> _Entries:
        h = await self.handle(ledger_id)
        if is_open and h.last_add_confirmed < last:
            lac = await h.read_lac()
            last = min(last, lac)
            if last < first:
                return []
        data: _Entries = await h.read(first, last, self._chunk_bytes)
        return data

    def _prefetch(self, ledger_id: int, first: int, last: int, is_open: bool, estimate: int) -> None:
        key = (ledger_id, first)
        if key in self._ahead or last < first:
            return
        cache = self._cache
        if cache is not None and not cache.reserve(estimate):
            return  # the process's read-ahead budget is in use by other readers: read on demand
        task = asyncio.get_running_loop().create_task(self._fetch(ledger_id, first, last, is_open))
        self._ahead[key] = task
        if cache is not None:
            task.add_done_callback(lambda t: self._landed(key, t, estimate))
        while len(self._ahead) > _MAX_AHEAD:
            _, old = self._ahead.popitem(last=False)
            old.cancel()

    def _landed(self, key: tuple[int, int], task: asyncio.Future[_Entries], estimate: int) -> None:
        """A read-ahead finished: release its reservation and, unless a reader took it over
        already, move its entries into the cache (bounded) instead of keeping them here."""
        cache = self._cache
        assert cache is not None
        cache.release(estimate)
        if self._ahead.get(key) is not task:
            return
        del self._ahead[key]
        if not task.cancelled() and task.exception() is None:
            self._keep(key[0], key[1], task.result())

    def _keep(self, ledger_id: int, first: int, entries: _Entries) -> None:
        if self._cache is not None:
            for i, d in enumerate(entries):
                self._cache.insert(self._token, ledger_id, first + i, d)
            return
        if entries:
            rest: asyncio.Future[_Entries] = asyncio.get_running_loop().create_future()
            rest.set_result(entries)
            self._ahead[(ledger_id, first)] = rest
            while len(self._ahead) > _MAX_AHEAD:
                _, old = self._ahead.popitem(last=False)
                old.cancel()

    async def read(
        self,
        ledger_id: int,
        first: int,
        want_last: int,
        ledger_last: int,
        max_bytes: int,
        avg_entry_size: int,
        *,
        is_open: bool = False,
    ) -> list[bytes | memoryview]:
        """Entries first..(at most)want_last of a ledger whose last readable entry is
        ledger_last, stopping once max_bytes is reached (at least one entry)."""
        chunk = self._chunk_entries(avg_entry_size)
        last = self._last
        if last is not None and last[0] == ledger_id and last[1] == first:
            return [last[2]]  # asked again for the entry returned last; the rest follows as usual
        data: _Entries | None = None
        fut = self._ahead.pop((ledger_id, first), None)
        if fut is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                data = await fut
        if not data:
            span = max(chunk, want_last - first + 1)
            if self._cache is not None and not self._cache.can_reserve(chunk * max(avg_entry_size, 1)):
                # Many readers are catching up at once: read about what was asked, not a chunk
                # whose rest would be evicted from the cache before it is asked for.
                span = min(want_last - first + 1, max_bytes // max(avg_entry_size, 1) + 1)
            data = await self._fetch(ledger_id, first, min(ledger_last, first + span - 1), is_open)
        take, total = 0, 0
        limit = want_last - first + 1
        for d in data:
            if take >= limit or (take and total >= max_bytes):
                break
            take += 1
            total += len(d)
        nxt = first + take
        # Kept per reader (one per partition): never as a view pinning a whole bookie response.
        self._last = (ledger_id, nxt - 1, retainable(data[take - 1])) if take else None
        if take < len(data):
            self._keep(ledger_id, nxt, data[take:])
            nxt_fetch = first + len(data)
        else:
            nxt_fetch = nxt
        if nxt_fetch <= ledger_last:
            estimate = chunk * max(avg_entry_size, 1)
            self._prefetch(ledger_id, nxt_fetch, min(ledger_last, nxt_fetch + chunk - 1), is_open, estimate)
        return list(data[:take])

    def forget(self, ledger_id: int) -> None:
        """Drop a deleted ledger's handle and read-ahead."""
        h = self._handles.pop(ledger_id, None)
        if h is not None:
            asyncio.get_running_loop().create_task(h.close())
        for key in [k for k in self._ahead if k[0] == ledger_id]:
            self._ahead.pop(key).cancel()
        if self._last is not None and self._last[0] == ledger_id:
            self._last = None

    async def close(self) -> None:
        for fut in self._ahead.values():
            fut.cancel()
        self._ahead.clear()
        self._last = None
        handles, self._handles = list(self._handles.values()), OrderedDict()
        for h in handles:
            with contextlib.suppress(Exception):
                await h.close()
