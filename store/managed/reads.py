"""Reading entries from bookies for catch-up readers: ledger handles kept open, large range
reads, and read-ahead of the next range while the caller consumes the current one."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import Any

from store.managed.ledgers import LedgerClientLike

READ_CHUNK_BYTES = 8 << 20
MAX_CHUNK_ENTRIES = 4096
_MAX_HANDLES = 64
_MAX_AHEAD = 8


class BookieReads:
    def __init__(self, client: LedgerClientLike, *, chunk_bytes: int = READ_CHUNK_BYTES) -> None:
        self._client = client
        self._chunk_bytes = chunk_bytes
        self._handles: OrderedDict[int, Any] = OrderedDict()
        self._opening: dict[int, asyncio.Future[Any]] = {}
        # (ledger, first entry) -> entries from there: read-ahead in flight, or leftovers.
        self._ahead: OrderedDict[tuple[int, int], asyncio.Future[list[bytes]]] = OrderedDict()

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

    async def _fetch(self, ledger_id: int, first: int, last: int, is_open: bool) -> list[bytes]:
        h = await self.handle(ledger_id)
        if is_open and h.last_add_confirmed < last:
            lac = await h.read_lac()
            last = min(last, lac)
            if last < first:
                return []
        data: list[bytes] = await h.read(first, last)
        return data

    def _prefetch(self, ledger_id: int, first: int, last: int, is_open: bool) -> None:
        key = (ledger_id, first)
        if key in self._ahead or last < first:
            return
        task = asyncio.get_running_loop().create_task(self._fetch(ledger_id, first, last, is_open))
        self._ahead[key] = task
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
    ) -> list[bytes]:
        """Entries first..(at most)want_last of a ledger whose last readable entry is
        ledger_last, stopping once max_bytes is reached (at least one entry)."""
        chunk = self._chunk_entries(avg_entry_size)
        data: list[bytes] | None = None
        fut = self._ahead.pop((ledger_id, first), None)
        if fut is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                data = await fut
        if not data:
            data = await self._fetch(
                ledger_id, first, min(ledger_last, first + max(chunk, want_last - first + 1) - 1), is_open
            )
        take, total = 0, 0
        limit = want_last - first + 1
        for d in data:
            if take >= limit or (take and total >= max_bytes):
                break
            take += 1
            total += len(d)
        nxt = first + take
        if take < len(data):
            rest: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()
            rest.set_result(data[take:])
            self._ahead[(ledger_id, nxt)] = rest
            nxt_fetch = first + len(data)
        else:
            nxt_fetch = nxt
        if nxt_fetch <= ledger_last:
            self._prefetch(ledger_id, nxt_fetch, min(ledger_last, nxt_fetch + chunk - 1), is_open)
        return data[:take]

    def forget(self, ledger_id: int) -> None:
        """Drop a deleted ledger's handle and read-ahead."""
        h = self._handles.pop(ledger_id, None)
        if h is not None:
            asyncio.get_running_loop().create_task(h.close())
        for key in [k for k in self._ahead if k[0] == ledger_id]:
            self._ahead.pop(key).cancel()

    async def close(self) -> None:
        for fut in self._ahead.values():
            fut.cancel()
        self._ahead.clear()
        handles, self._handles = list(self._handles.values()), OrderedDict()
        for h in handles:
            with contextlib.suppress(Exception):
                await h.close()
