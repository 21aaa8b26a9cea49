"""The one reader of a segmented log's entries, with an owning mode (ManagedLog: the owner's
own view of what is confirmed, and its entry cache) and a non-owning mode (ManagedLogReader:
batch jobs and tools, which fence nothing and ask bookies how far an open ledger is
confirmed). Either way, entries come in order, skipping ledger ends and truncated or deleted
ledgers, from the cache when it has them, else from where the ledger lives: its offloaded copy
(store/offload) once its metadata names one, or bookies, in large ranges with read-ahead."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol

from store.managed.metadata import LedgerInfo, LogMetadata, OffloadInfo
from store.managed.position import Entry, Position
from store.managed.reads import BookieReads

DEFAULT_MAX_READ_BYTES = 1 << 20


class OffloadedSource(Protocol):
    """Reads an offloaded ledger's entries (store/offload/tier.py's Tier)."""

    driver: str

    async def read(self, info: OffloadInfo, first: int, last: int, max_bytes: int) -> list[bytes]: ...


class LogReader:
    """Base of both modes, which provide the state declared here and `_readable_last`."""

    _md: LogMetadata
    _ids: list[int]
    _reads: BookieReads
    _offloaded: OffloadedSource | None = None

    def _source(self, li: LedgerInfo) -> OffloadedSource | None:
        """The tier serving this ledger, or None for bookies. Offloaded copies are read first
        (Pulsar's tiered-storage-first): catch-up reads then never compete with the journal."""
        off, src = li.offload, self._offloaded
        if off is None:
            return None
        if src is not None and src.driver == off.driver:
            return src
        if off.bookie_deleted:
            raise RuntimeError(f"ledger {li.ledger_id} lives in offload tier {off.driver!r}, not configured here")
        return None

    @property
    def start(self) -> Position:
        """The first position not truncated away (the first ledger's start if never truncated)."""
        first = Position(self._ids[0], 0) if self._ids else Position(0, 0)
        return max(first, self._md.start) if self._md.start is not None else first

    async def _readable_last(self, idx: int, want: int) -> int:
        """Last readable entry id of the idx-th ledger, `want` being the first one wanted."""
        raise NotImplementedError

    def _cached(self, ledger_id: int, first: int, last: int, max_bytes: int) -> list[bytes | memoryview] | None:
        """Entries first.. from an entry cache (owning mode); None or [] if it has none."""
        return None

    async def read(
        self, start: Position, max_entries: int = 1000, max_bytes: int = DEFAULT_MAX_READ_BYTES
    ) -> list[Entry]:
        """Readable entries from `start` (inclusive), at most max_entries and about max_bytes
        (at least one entry)."""
        out: list[Entry] = []
        total = 0
        pos = max(start, self.start)
        ids = self._ids
        i = bisect.bisect_left(ids, pos.ledger_id)
        entry = max(pos.entry_id, 0) if i < len(ids) and ids[i] == pos.ledger_id else 0
        while i < len(ids) and len(out) < max_entries and (not out or total < max_bytes):
            last = await self._readable_last(i, entry)
            if entry > last:
                if i == len(ids) - 1:
                    break  # the tail: nothing more confirmed yet
                i, entry = i + 1, 0
                continue
            lid = ids[i]
            want = min(last, entry + max_entries - len(out) - 1)
            budget = max(max_bytes - total, 1)
            data: Sequence[bytes | memoryview] | None = self._cached(lid, entry, want, budget)
            if not data:
                li = self._md.ledgers[i]
                src = self._source(li)
                if src is not None and li.offload is not None:
                    data = await src.read(li.offload, entry, want, budget)
                else:
                    avg = li.size // li.entries if li.entries else 1024
                    is_open = i == len(ids) - 1 and not li.closed
                    data = await self._reads.read(li.data_id, entry, want, last, budget, avg, is_open=is_open)
                if not data:
                    break
            for k, d in enumerate(data):
                out.append(Entry(Position(lid, entry + k), d))
                total += len(d)
            entry += len(data)
        return out
