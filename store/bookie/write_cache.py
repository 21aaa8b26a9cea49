"""The bookie's write cache: where adds land (readable at once) until a flush moves them to the
entry logs.

Two halves: adds go to the active one; a flush swaps them and writes the other out, so reads
find every entry either in a half or in the index. When both halves together reach the
capacity, adds are refused (has_room() is False) until a flush completes: BookKeeper's
write-cache throttle.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from store.bookie.flush import Entry

log = logging.getLogger(__name__)

Entries = dict[int, dict[int, Entry]]  # ledger id -> entry id -> entry


class WriteCache:
    def __init__(self, capacity: int, flush_bytes: int) -> None:
        self.capacity = capacity  # both halves together: adds wait beyond this
        self._active: Entries = {}
        self._active_bytes = 0
        self._flushing: Entries = {}
        self._flushing_bytes = 0
        # Below half the cache, so a flush always starts before adds have to wait.
        self._flush_max = max(1, min(flush_bytes or capacity // 8, capacity // 2))
        self._flush_bytes = self._jittered_flush_bytes()
        self._room = asyncio.Event()
        self._room.set()
        self._room_cbs: list[Callable[[], object]] = []

    def _jittered_flush_bytes(self) -> int:
        # The bookies of an ensemble get the same adds: without jitter they would all flush
        # (and hit the shared disk) at the same moment, stalling the same adds everywhere.
        return max(1, self._flush_max - random.randrange(self._flush_max // 4 + 1))

    # -- adds and reads --

    def put(self, ledger_id: int, entry_id: int, entry: Entry) -> None:
        cache = self._active.get(ledger_id)
        if cache is None:
            cache = self._active[ledger_id] = {}
        old = cache.get(entry_id)
        cache[entry_id] = entry
        self._active_bytes += len(entry) - (len(old) if old is not None else 0)

    def get(self, ledger_id: int, entry_id: int) -> Entry | None:
        c = self._active.get(ledger_id)
        if c is not None:
            e = c.get(entry_id)
            if e is not None:
                return e
        c = self._flushing.get(ledger_id)
        if c is not None:
            return c.get(entry_id)
        return None

    def drop(self, ledger_id: int) -> None:
        """Forget a deleted ledger's entries that no flush has taken yet."""
        dropped = self._active.pop(ledger_id, None)
        if dropped:
            self._active_bytes -= sum(len(e) for e in dropped.values())
            self._update_room()

    @property
    def cached_bytes(self) -> int:
        """Bytes in the write cache (both halves)."""
        return self._active_bytes + self._flushing_bytes

    @property
    def flushing_bytes(self) -> int:
        return self._flushing_bytes

    @property
    def wants_flush(self) -> bool:
        """The active half holds enough for a flush."""
        return self._active_bytes >= self._flush_bytes

    # -- flushes --

    def start_flush(self) -> Entries:
        """Swap the halves: the active one becomes the one being flushed, and is returned."""
        flushing = self._flushing = self._active
        self._flushing_bytes, self._active, self._active_bytes = self._active_bytes, {}, 0
        return flushing

    def flush_failed(self, keep: Callable[[int], bool]) -> None:
        """Put the entries of a failed flush back in the active half (those of the ledgers
        `keep` accepts, unless newer adds replaced them), to be flushed next time."""
        for lid, c in self._flushing.items():
            if keep(lid):
                merged = self._active.setdefault(lid, {})
                for eid, e in c.items():
                    if eid not in merged:
                        merged[eid] = e
                        self._active_bytes += len(e)
        self._flushing, self._flushing_bytes = {}, 0

    def flush_done(self) -> None:
        self._flushing, self._flushing_bytes = {}, 0
        self._flush_bytes = self._jittered_flush_bytes()
        self._update_room()

    # -- the throttle --

    def limit_room(self) -> None:
        """After an add: refuse further adds while both halves together are full."""
        if self._active_bytes + self._flushing_bytes >= self.capacity:
            self._room.clear()

    def has_room(self) -> bool:
        return self._room.is_set()

    async def wait_room(self) -> None:
        await self._room.wait()

    def on_room(self, cb: Callable[[], object]) -> None:
        """Call cb() (once) when the write cache has room again (soon if it has now)."""
        if self._room.is_set():
            asyncio.get_running_loop().call_soon(cb)
        else:
            self._room_cbs.append(cb)

    def _update_room(self) -> None:
        if self._active_bytes + self._flushing_bytes < self.capacity and not self._room.is_set():
            self._room.set()
            cbs, self._room_cbs = self._room_cbs, []
            for cb in cbs:
                try:
                    cb()
                except Exception:
                    log.exception("write cache room callback failed")
